"""The one epoch driver of every run: plan, train, record, evaluate, checkpoint; over any backend.

A :class:`Backend` says where the replicas live (one model in this process, virtual replicas on
threads, Dask actors) and runs each epoch's two phases on all of them; the driver does everything
else once, in the same order for every backend, so that a run's records, totals and checkpoints do
not depend on where it ran. Records are built here and nowhere else: the selection right after the
plan (a live page shows it before the epoch trains), the steps, traffic and evaluation after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from ..config import RunConfig
from ..failures import Diverged
from ..locations import Location
from ..metrics import EvalRecord, SelectionRecord, Sink
from .checkpoints import Checkpoint, epoch_folder, fixed_options, publish
from .divergence import Divergence
from .records import epoch_eval, new_totals, write_epoch
from .result import Stop, stop_signal

__all__ = ["Backend", "Driven", "EpochOutcome", "drive"]


@dataclass
class EpochOutcome:
    """What the replicas (and PS servers) of one epoch did.

    Attributes
    ----------
    reports : list of dict
        Every replica's :class:`~adass.engine.epoch.EpochReport` as a dict, in rank order.
    traffic : list of dict
        Every transfer of the epoch (replicas' and servers'), as TrafficRecord fields.
    complete : bool
        False when a stop request ended the epoch before its last step (a run in one process
        checks it after every step): its steps are recorded, but it is not evaluated.
    """

    reports: list[dict[str, Any]]
    traffic: list[dict[str, Any]]
    complete: bool = True


class Backend(Protocol):
    """Where a run's replicas live; the driver calls these in order, every epoch."""

    def plan(self, epoch: int, selection: bool) -> list[Mapping[str, list]]:
        """Every replica chooses its samples and they agree on the epoch's steps; returns every
        replica's selection columns (``epoch, rank, sample_id, bound, kept``) when ``selection``."""

    def train(self, epoch: int, stop: Callable[[], bool]) -> EpochOutcome:
        """Run the planned epoch on every replica (and server)."""

    def evaluate(self) -> tuple[float, float]:
        """Test loss and accuracy of replica 0 (every replica holds the same parameters)."""

    def save(self, folder: Path | Location) -> None:
        """Write every replica's ``rank<r>.pt`` and every server's ``server<s>.pt`` into ``folder`` (a
        path on this machine, else a Location)."""

    def load(self, folder: Path | Location) -> None:
        """Restore what :meth:`save` wrote (for as many replicas as this backend has)."""


@dataclass
class Driven:
    """What the driver hands back: the last evaluation, the running totals and whether a stop ended it."""

    final: EvalRecord | None
    totals: dict[str, float] = field(default_factory=new_totals)
    stopped: bool = False


def drive(
    backend: Backend,
    config: RunConfig,
    sink: Sink,
    n_train: int,
    *,
    run_id: str = "run",
    progress: Callable[[EvalRecord], None] | None = None,
    stop: Stop = None,
    selection_records: bool = True,
    checkpoint_dir: str | Path | Location | None = None,
    checkpoint: Checkpoint | None = None,
    chance: float | None = None,
) -> Driven:
    """Train ``config.optim.epochs`` epochs on ``backend``, from ``checkpoint`` when one is given.

    Parameters
    ----------
    backend : Backend
        The replicas, built and joined.
    config : RunConfig
        The run.
    sink : Sink
        Where the records go.
    n_train : int
        Training samples of the whole data set (the kept fraction's denominator).
    run_id : str
        Label of the records.
    progress : callable, optional
        Called with each epoch's EvalRecord, after its checkpoint.
    stop : callable or Event, optional
        Checked before every epoch, and by the backend within it where it can stop mid-epoch.
    selection_records : bool
        Write one SelectionRecord per sample and epoch.
    checkpoint_dir : path, URL or Location, optional
        Where ``checkpoints/`` get one version per epoch (see :mod:`adass.engine.checkpoints`):
        :func:`~adass.engine.checkpoints.checkpoint_location` of the run.
    checkpoint : Checkpoint, optional
        Continue from it: its files are loaded (for this backend's replica count), its totals go on,
        and records of later epochs already in the sink are dropped.
    chance : float, optional
        The test accuracy of a model that ignores its input (:func:`~adass.engine.divergence.
        chance_accuracy`); without it, accuracy at chance does not stop the run.

    Raises
    ------
    Diverged
        After an epoch whose training loss grew past ``--diverge-factor`` times the run's start, or
        the ``--chance-epochs``-th in a row at chance accuracy: that epoch's records are written, its
        checkpoint is not (the last one stays the epoch before).
    """
    should_stop = stop_signal(stop)
    first, totals = 0, new_totals()
    if checkpoint is not None:
        backend.load(checkpoint.folder)
        first, totals = checkpoint.epoch + 1, dict(checkpoint.totals)
    if hasattr(sink, "drop_after"):  # records of an epoch after the checkpoint (or of an attempt that
        sink.drop_after(first - 1)  # started over) are written again
    totals.setdefault("skipped_steps", 0.0)
    driven = Driven(final=None, totals=totals)
    divergence = Divergence(config.optim.diverge_factor, config.optim.chance_epochs, chance)
    for epoch in range(first, config.optim.epochs):
        if should_stop():
            driven.stopped = True
            break
        start = time.perf_counter()
        selections = backend.plan(epoch, selection_records)
        plan_s = time.perf_counter() - start
        for columns in selections:  # as selected, before the epoch trains
            sink.write_frame(SelectionRecord, pd.DataFrame({"run": run_id, **columns}))
        start = time.perf_counter()
        outcome = backend.train(epoch, should_stop)
        epoch_s = plan_s + time.perf_counter() - start
        if not outcome.complete:  # the steps it took are kept, but half an epoch is not evaluated
            write_epoch(sink, outcome.reports, outcome.traffic)
            driven.stopped = True
            break
        driven.final = _record_epoch(backend, sink, run_id, epoch, outcome, epoch_s, totals, n_train)
        try:
            steps = [row for report in outcome.reports for row in report["steps"]]
            divergence.check(epoch, steps, driven.final, totals, sink)
        except Diverged:
            if hasattr(sink, "flush"):  # the epoch that shows it is kept on disk, but not its model
                sink.flush()
            raise
        if checkpoint_dir is not None:
            _checkpoint(backend, checkpoint_dir, epoch, totals, sink, config)
        if progress is not None:
            progress(driven.final)
    sink.close()
    return driven


def _record_epoch(
    backend: Backend, sink: Sink, run_id: str, epoch: int, outcome: EpochOutcome, epoch_s: float,
    totals: dict[str, float], n_train: int,
) -> EvalRecord:  # fmt: skip
    """Steps and traffic to the sink, then the evaluation record with the running totals."""
    reports: Sequence[Mapping[str, Any]] = outcome.reports
    write_epoch(sink, reports, outcome.traffic)
    totals["skipped_steps"] += sum(r.get("skipped", 0) for r in reports[:1])  # alike on every replica
    record = epoch_eval(run_id, epoch, reports, outcome.traffic, epoch_s, totals, backend.evaluate(), n_train)
    sink.write(record)
    return record


def _checkpoint(
    backend: Backend,
    run_dir: str | Path | Location,
    epoch: int,
    totals: dict[str, float],
    sink: Sink,
    config: RunConfig,
) -> None:
    """Rank files into a fresh epoch folder, records flushed, then the pointer moves (one rename)."""
    folder = epoch_folder(run_dir, epoch)
    backend.save(folder)
    if hasattr(sink, "flush"):
        sink.flush()
    publish(run_dir, epoch, totals, fixed_options(config))
