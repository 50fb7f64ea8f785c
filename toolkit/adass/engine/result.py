"""What a finished run hands back, whether it ran in this process or on Dask."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from threading import Event

from torch import nn

from ..config import RunConfig
from ..data import Dataset
from ..metrics import EvalRecord, Sink
from .step import Counters

__all__ = ["RunResult", "Stop", "stop_signal"]

#: a stop request: a callable that returns True once the run should stop, or an Event that is set
Stop = Callable[[], bool] | Event | None


def stop_signal(stop: Stop) -> Callable[[], bool]:
    """``stop`` as a callable that says whether to stop now."""
    if stop is None:
        return lambda: False
    if isinstance(stop, Event):
        return stop.is_set
    return lambda: bool(stop())


@dataclass
class RunResult:
    """A finished (or stopped) run.

    Attributes
    ----------
    model : Module or None
        The trained model (rank 0's for in-process replicas; None when it lives on Dask workers).
    sink : Sink
        The records.
    counters : Counters
        Backprops, forwards and training seconds of all replicas together.
    config : RunConfig
        What ran.
    dataset : Dataset or None
        The data it ran on (None on Dask).
    final : EvalRecord or None
        The last epoch's evaluation.
    extra : dict
        What else a kind of run reports: ``parameters`` (every replica's final parameters, rank order,
        for in-process replicas; rank 0's on Dask), ``totals``, ``store``, ``dashboard_link``.
    stopped : bool
        The run ended early because ``stop`` asked it to.
    states : list of ReplicaState
        Every replica's model, optimizer, shard and sampler, in rank order, for runs in this process
        (empty where the replicas live on Dask workers).
    """

    model: nn.Module | None
    sink: Sink
    counters: Counters
    config: RunConfig
    dataset: Dataset | None
    final: EvalRecord | None = None
    extra: dict = field(default_factory=dict)
    stopped: bool = False
    states: list = field(default_factory=list)
