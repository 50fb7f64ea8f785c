"""One model on all the data in this process: the engine in a world of one, stoppable after any step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..config import RunConfig
from ..data import Dataset
from ..engine import (
    Engine,
    EpochOutcome,
    EpochPlan,
    LiveBatches,
    ReplicaState,
    in_order,
    read_state,
    write_state,
)

__all__ = ["LocalBackend"]


class LocalBackend:
    """The backend of a run without replicas (``--workers 0 --replicas 0``).

    Parameters
    ----------
    config : RunConfig
        The run.
    dataset : Dataset
        Its data, all of which the one model trains on.
    run_id : str
        Label of the records.
    live : callable, optional
        Receives ``(kind, rows)`` batches of live step rows (a :class:`~adass.engine.RunStore`'s ``add``).
    """

    def __init__(self, config: RunConfig, dataset: Dataset, run_id: str = "run",
                 live: Callable[[str, list[dict]], None] | None = None) -> None:  # fmt: skip
        # the selection in order, batch after batch, as plain Epoch-SGD takes it
        self.engine = Engine(ReplicaState.whole(config, dataset), split=in_order, run_id=run_id)
        self.live = live
        self.current: EpochPlan | None = None

    def plan(self, epoch: int, selection: bool) -> list[dict[str, list]]:
        self.current = self.engine.plan(epoch)
        return [self.engine.selection_columns(epoch)] if selection else []

    def train(self, epoch: int, stop: Callable[[], bool]) -> EpochOutcome:
        plan = self.current
        live = LiveBatches(self.live, plan.steps) if self.live else None
        report = self.engine.run_epoch(plan, on_step=live, stop=stop, selection_records=False)
        return EpochOutcome([vars(report)], report.traffic, complete=len(report.steps) == plan.steps)

    def evaluate(self) -> tuple[float, float]:
        return self.engine.evaluate()

    def save(self, folder: Path) -> None:
        write_state(folder / "rank0.pt", self.engine.state_dict())

    def load(self, folder: Path) -> None:
        self.engine.load_state_dict(read_state(folder / "rank0.pt"))

    def states(self) -> list[ReplicaState]:
        return [self.engine.state]
