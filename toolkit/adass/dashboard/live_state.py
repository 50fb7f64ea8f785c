"""What a page knows about the run it shows, built from drained feed messages; bounded in size.

:class:`LiveState` has no Panel in it: the page (or a notebook, or a test) hands it the messages a
:class:`~adass.dashboard.feed.LiveFeed` queued, and reads back frames sized for drawing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from enum import Enum, auto
from functools import singledispatchmethod
from typing import Any

import pandas as pd

from ..data import Dataset
from ..metrics import SelectionRecord, StepRecord, TrafficRecord, columns
from ..viz.curves import empty_evals
from ..viz.raster import KeptGrid
from ..viz.traffic import empty_traffic, last_steps
from .messages import (
    DaskLink,
    DatasetLoaded,
    Done,
    EpochTraffic,
    EvalDone,
    Message,
    RunError,
    SelectionFrame,
    Status,
    StepRows,
    TrafficRows,
)

__all__ = ["LiveState", "Part"]


class Part(Enum):
    """A piece of :class:`LiveState` that messages change; views name the parts they read."""

    EVALS = auto()
    STEPS = auto()
    TRAFFIC = auto()
    SELECTION = auto()
    DATASET = auto()
    LINK = auto()
    STATUS = auto()
    ERROR = auto()


def _empty_steps() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype="float64") for c in columns(StepRecord)})
    return frame.astype({"run": "object"})


class LiveState:
    """Records of one run as the page needs them.

    Parameters
    ----------
    max_steps : int
        Step rows kept per rank (the timeline shows the last of them).
    max_traffic_steps : int
        Distinct steps of traffic detail kept (the heatmap's width).
    """

    def __init__(self, max_steps: int = 200, max_traffic_steps: int = 200) -> None:
        self.max_steps, self.max_traffic_steps = max_steps, max_traffic_steps
        self.reset()

    def reset(
        self, world: int = 0, servers: int = 0, epochs: int = 0, held: dict[int, int] | None = None
    ) -> None:
        """Forget the previous run.

        Parameters
        ----------
        world : int
            Ranks of the next run, replicas and Parameter Server shards (0: it trains in this process).
        servers : int
            How many of them are PS shards (the last ones); 0 for a ring.
        epochs : int
            Epochs the run will train (0: not known).
        held : dict, optional
            ``{replica rank: shard}`` of PS shards that replicas serve (``colocated=true``).
        """
        self.world, self.servers, self.epochs, self.held = world, servers, epochs, dict(held or {})
        self.evals = empty_evals()
        self.new_evals: list[dict[str, Any]] = []
        self.steps = _empty_steps()
        self.steps_seen = 0
        self._pending_steps: list[dict] = []
        self.traffic = empty_traffic()
        self.traffic_seen = 0
        self._pending_traffic: list[pd.DataFrame] = []
        self.full_epochs: set[int] = set()  # epochs whose full traffic detail has arrived
        self.grid = KeptGrid()
        self.selection = pd.DataFrame(columns=columns(SelectionRecord))  # the last epoch's rows
        self.dataset: Dataset | None = None
        self.dashboard_link = ""
        self.status = "idle"
        self.error = ""
        self.done = False
        self.seen: set[Part] = set()  # parts that have arrived since the reset

    def apply(self, messages: Iterable[Message]) -> set[Part]:
        """Take in drained messages; return which parts changed (a page redraws only what reads them)."""
        changed: set[Part] = set()
        for message in messages:
            changed |= self._take(message)
        if self._pending_steps:
            self._steps(self._pending_steps)
            self._pending_steps = []
            changed.add(Part.STEPS)
        if self._pending_traffic:
            self._traffic(pd.concat(self._pending_traffic, ignore_index=True))
            self._pending_traffic = []
            changed.add(Part.TRAFFIC)
        self.seen |= changed
        return changed

    # -- one method per message type; rows that arrive in many small messages are merged once per apply
    @singledispatchmethod
    def _take(self, message: Message) -> set[Part]:
        raise TypeError(f"LiveState cannot take a {type(message).__name__}")

    @_take.register
    def _(self, message: EvalDone) -> set[Part]:
        row = asdict(message.record)
        self.new_evals.append(row)
        epoch = int(row["epoch"])  # 0-based, as the plots draw it
        of = f" ({epoch + 1} of {self.epochs})" if self.epochs else ""
        self.status = f"epoch {epoch} done{of}, test accuracy {row['test_acc']:.3f}"
        return {Part.EVALS, Part.STATUS}

    @_take.register
    def _(self, message: StepRows) -> set[Part]:
        self._pending_steps += message.rows
        return set()

    @_take.register
    def _(self, message: TrafficRows) -> set[Part]:
        self._pending_traffic.append(pd.DataFrame(message.rows, columns=columns(TrafficRecord)))
        self.traffic_seen += len(message.rows)
        return set()

    @_take.register
    def _(self, message: EpochTraffic) -> set[Part]:
        self._epoch_traffic(message.frame)
        return {Part.TRAFFIC}

    @_take.register
    def _(self, message: SelectionFrame) -> set[Part]:
        self._selection(message.frame)
        return {Part.SELECTION}

    @_take.register
    def _(self, message: DatasetLoaded) -> set[Part]:
        self.dataset = message.dataset
        return {Part.DATASET}

    @_take.register
    def _(self, message: DaskLink) -> set[Part]:
        self.dashboard_link = message.url
        return {Part.LINK}

    @_take.register
    def _(self, message: Status) -> set[Part]:
        self.status = message.text
        return {Part.STATUS}

    @_take.register
    def _(self, message: RunError) -> set[Part]:
        self.error = message.text
        return {Part.ERROR, Part.STATUS}

    @_take.register
    def _(self, message: Done) -> set[Part]:
        self.done = True
        self.status = message.outcome
        return {Part.STATUS}

    def all_evals(self) -> pd.DataFrame:
        """Every EvalRecord so far, the new ones included (what a Pipe is sent)."""
        self.take_new_evals()
        return self.evals

    def take_new_evals(self) -> pd.DataFrame:
        """EvalRecords that arrived since the last call (what a Buffer is sent), also kept in ``evals``."""
        if not self.new_evals:
            return self.evals.iloc[:0]
        frame = pd.DataFrame(self.new_evals, columns=self.evals.columns)
        self.new_evals = []
        self.evals = frame if not len(self.evals) else pd.concat([self.evals, frame], ignore_index=True)
        return frame

    # -- the parts ---------------------------------------------------------------------------
    def _steps(self, rows: list[dict]) -> None:
        self.steps_seen += len(rows)
        frame = pd.DataFrame(rows)
        merged = frame if not len(self.steps) else pd.concat([self.steps, frame], ignore_index=True)
        self.steps = merged.sort_values(["rank", "step"], kind="stable").groupby("rank").tail(self.max_steps)

    def _traffic(self, frame: pd.DataFrame) -> None:
        # sampled live rows can arrive after their epoch's full detail; keep the full detail only
        frame = frame[~frame["epoch"].isin(self.full_epochs)] if self.full_epochs else frame
        if not len(frame):
            return
        merged = frame if not len(self.traffic) else pd.concat([self.traffic, frame], ignore_index=True)
        self.traffic = last_steps(merged, self.max_traffic_steps).reset_index(drop=True)

    def _epoch_traffic(self, frame: pd.DataFrame) -> None:
        """A finished epoch's full detail replaces the sampled rows of that epoch."""
        if not len(frame):
            return
        epochs = frame["epoch"].unique()
        self.traffic = self.traffic[~self.traffic["epoch"].isin(epochs)]
        self._traffic(frame[columns(TrafficRecord)])
        self.full_epochs |= {int(e) for e in epochs}

    def _selection(self, frame: pd.DataFrame) -> None:
        self.grid.add(frame)
        latest = int(frame["epoch"].max())
        current = int(self.selection["epoch"].max()) if len(self.selection) else -1
        if latest > current:
            self.selection = frame[frame["epoch"] == latest].reset_index(drop=True)
        elif latest == current:  # another rank's share of the same epoch
            self.selection = pd.concat([self.selection, frame[frame["epoch"] == latest]], ignore_index=True)
