"""What a run tells its page: one small dataclass per kind of message, with the payload it carries.

A run (its training thread, Dask's event thread) builds these and puts them in a
:class:`~adass.dashboard.feed.LiveFeed`; :class:`~adass.dashboard.live_state.LiveState` takes them in by
type. The types are the only list of kinds, so the feed, the state and the page cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..data import Dataset
from ..metrics import EvalRecord

__all__ = [
    "DaskLink",
    "DatasetLoaded",
    "Done",
    "EpochTraffic",
    "EvalDone",
    "Message",
    "RunError",
    "SelectionFrame",
    "Status",
    "StepRows",
    "TrafficRows",
]


@dataclass(frozen=True)
class EvalDone:
    """An epoch ended and was evaluated."""

    record: EvalRecord


@dataclass(frozen=True)
class StepRows:
    """Per-step StepRecord rows as plain dicts (a distributed run's may carry byte totals too)."""

    rows: list[dict]


@dataclass(frozen=True)
class TrafficRows:
    """Sampled per-chunk TrafficRecord rows sent while an epoch runs."""

    rows: list[dict]


@dataclass(frozen=True, eq=False)
class EpochTraffic:
    """A finished epoch's full TrafficRecord detail (it replaces that epoch's sampled rows)."""

    frame: pd.DataFrame


@dataclass(frozen=True, eq=False)
class SelectionFrame:
    """SelectionRecord rows of one epoch (one rank's share, or every rank's)."""

    frame: pd.DataFrame


@dataclass(frozen=True, eq=False)
class DatasetLoaded:
    """The training data, loaded (the samples views draw images from it)."""

    dataset: Dataset


@dataclass(frozen=True)
class DaskLink:
    """The address of the run's Dask dashboard."""

    url: str


@dataclass(frozen=True)
class Status:
    """One line on what the run is doing."""

    text: str


@dataclass(frozen=True)
class RunError:
    """The run failed; one line on why."""

    text: str


@dataclass(frozen=True)
class Done:
    """The run's thread ended (finished, stopped or failed); always its last message."""

    outcome: str


#: Any message a run sends its page.
Message = (
    EvalDone
    | StepRows
    | TrafficRows
    | EpochTraffic
    | SelectionFrame
    | DatasetLoaded
    | DaskLink
    | Status
    | RunError
    | Done
)
