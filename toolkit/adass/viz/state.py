"""What a page knows about the run it shows, built from drained feed messages; bounded in size.

:class:`LiveState` has no Panel in it: the page (or a notebook, or a test) hands it the messages a
:class:`~adass.viz.feed.LiveFeed` queued, and reads back frames sized for drawing.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd

from ..data import Dataset
from ..metrics import EvalRecord, SelectionRecord, StepRecord, TrafficRecord, columns
from .curves import empty_evals
from .feed import Message
from .raster import KeptGrid
from .traffic import empty_traffic, last_steps

__all__ = ["LiveState"]


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

    def reset(self) -> None:
        """Forget the previous run."""
        self.evals = empty_evals()
        self.new_evals: list[dict[str, Any]] = []
        self.steps = _empty_steps()
        self.steps_seen = 0
        self.traffic = empty_traffic()
        self.traffic_seen = 0
        self.full_epochs: set[int] = set()  # epochs whose full traffic detail has arrived
        self.grid = KeptGrid()
        self.selection = pd.DataFrame(columns=columns(SelectionRecord))  # the last epoch's rows
        self.dataset: Dataset | None = None
        self.dashboard_link = ""
        self.status = "idle"
        self.error = ""
        self.done = False

    def apply(self, messages: list[Message]) -> set[str]:
        """Take in drained messages; return which parts changed.

        The parts are ``eval``, ``steps``, ``traffic``, ``selection``, ``dataset``, ``link``, ``status``
        and ``error``; a page redraws only the views that depend on them.
        """
        steps: list[dict] = []
        traffic: list[pd.DataFrame] = []
        changed: set[str] = set()
        for kind, payload in messages:
            if kind == "eval":
                row = asdict(payload) if isinstance(payload, EvalRecord) else dict(payload)
                self.new_evals.append(row)
                self.status = f"epoch {row['epoch'] + 1} done, test accuracy {row['test_acc']:.3f}"
                changed |= {"eval", "status"}
            elif kind == "steps":
                steps += payload
            elif kind == "traffic":
                traffic.append(pd.DataFrame(payload, columns=columns(TrafficRecord)))
                self.traffic_seen += len(payload)
            elif kind == "epoch_traffic":
                self._epoch_traffic(payload)
                changed.add("traffic")
            elif kind == "selection":
                self._selection(payload)
                changed.add("selection")
            elif kind == "dataset":
                self.dataset = payload
                changed.add("dataset")
            elif kind == "link":
                self.dashboard_link = str(payload)
                changed.add("link")
            elif kind == "status":
                self.status = str(payload)
                changed.add("status")
            elif kind == "error":
                self.error = str(payload)
                changed |= {"error", "status"}
            elif kind == "done":
                self.done = True
                self.status = str(payload)
                changed.add("status")
        if steps:
            self._steps(steps)
            changed.add("steps")
        if traffic:
            self._traffic(pd.concat(traffic, ignore_index=True))
            changed.add("traffic")
        return changed

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
