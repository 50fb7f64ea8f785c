"""What one epoch of an :class:`~adass.engine.loop.Engine` is planned to be (:class:`EpochPlan`: the
agreed steps, this replica's batches, the shares) and what it did (:class:`EpochReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .work import EpochWork

__all__ = ["EpochPlan", "EpochReport"]


@dataclass
class EpochPlan:
    """What the replicas agreed for one epoch.

    Attributes
    ----------
    epoch : int
        The epoch.
    kept : list of int
        Every replica's selected samples, in rank order.
    steps : int
        Steps of the epoch: as many as one process takes with the global batch over all kept samples.
    batches : list of slice
        This replica's local batch of every step, in its selection (in its :class:`EpochWork`'s rows
        where the epoch is shared out).
    totals : list of float
        Every step's planned global batch (the sum of all replicas' local batches; where the epoch is
        shared out, the mean global batch, so that a replica's pushes add up to its share).
    refreshed : int
        Samples this replica passed forward before selecting (counted as forwards of the epoch).
    traffic : list of dict
        What planning sent to the other replicas, as TrafficRecord fields (phase ``agree``).
    worker_steps : list of int
        Every replica's steps, in rank order, where the epoch is shared out by throughput (replicas
        then take different numbers of steps); empty where every replica takes ``steps``.
    work : EpochWork or None
        This replica's rows to train on where the epoch is shared out.
    """

    epoch: int
    kept: list[int]
    steps: int
    batches: list[slice]
    totals: list[float]
    refreshed: int = 0
    traffic: list[dict] = field(default_factory=list)
    worker_steps: list[int] = field(default_factory=list)
    work: EpochWork | None = None

    def steps_of(self, rank: int) -> int:
        """How many steps replica ``rank`` takes in this epoch."""
        return self.worker_steps[rank] if self.worker_steps else self.steps


@dataclass
class EpochReport:
    """What one replica did in one epoch; plain data, so it travels back from a Dask actor."""

    rank: int
    epoch: int
    samples: int = 0
    backprops: int = 0
    forwards: int = 0
    loss_sum: float = 0.0
    train_s: float = 0.0
    losses: list[float] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    traffic: list[dict] = field(default_factory=list)
    selection: dict[str, list] = field(default_factory=dict)
    skipped: int = 0  # steps skipped everywhere for a non-finite loss or gradient
    busy_s: float = 0.0  # step time less the time the servers held this replica back
