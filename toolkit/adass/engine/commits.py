"""In-memory commits inside an epoch, so that a lost replica costs at most ``--commit-steps`` steps.

Every ``every`` steps of an epoch a replica keeps a :class:`Commit`: its whole state (model,
optimizer, sampler with its buffered observations, counters, the exchange's memory and codec
state), copied into host memory (:func:`host_copy`), and the epoch's report so far. Only the last two are
held, in the replica's own memory; nothing is written. Replicas of a lock-step exchange commit at
the same steps, so after a loss every survivor holds the same point (one of them may be a commit
ahead: the second-to-last commit covers it).

After a loss the survivors' commits travel to the client, and the replicas of the next attempt go
on from the last point every survivor holds (:meth:`~adass.engine.loop.Engine.recover`): a survivor
from its own commit; a replica that lost its state takes the model, the optimizer, the step count
and the codec's shared state from a peer's commit (every replica of a synchronous step holds the
same ones), keeps the selection state of the epoch checkpoint it loaded (its observations of the
steps before the commit are lost) and starts its error-feedback memory at zero (what it had not yet
sent is lost).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Commit", "Commits", "EpochResume", "host_copy"]


def host_copy(value: Any) -> Any:
    """``value`` with every tensor in it copied to host memory (dicts, lists and tuples followed), so
    that later steps do not change it and a GPU replica's commits take no device memory."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: host_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(host_copy(v) for v in value)
    return value


@dataclass
class EpochResume:
    """Where a replica's epoch goes on: after ``at`` of its steps, with its report so far.

    Attributes
    ----------
    at : int
        Steps of the epoch already done.
    report : dict
        The :class:`~adass.engine.epoch.EpochReport` fields so far (empty: the steps before ``at``
        left no records on this replica).
    base : dict
        ``backprops``, ``forwards``, ``skipped``, ``step`` and ``elapsed_s`` as the epoch started
        (the counters its totals are taken from) and how long its steps before ``at`` took.
    """

    at: int
    report: dict[str, Any] = field(default_factory=dict)
    base: dict[str, float] = field(default_factory=dict)


@dataclass
class Commit:
    """One replica's state after ``at`` steps of ``epoch``.

    Attributes
    ----------
    epoch : int
        The epoch.
    state : dict
        :meth:`~adass.engine.loop.Engine.state_dict`, every tensor a copy in host memory.
    resume : EpochResume
        Where the epoch goes on (``at``), its report so far and the counters it started from.
    """

    epoch: int
    state: dict[str, Any]
    resume: EpochResume

    @property
    def at(self) -> int:
        """Steps of the epoch done at this point."""
        return self.resume.at

    @property
    def step(self) -> int:
        """The replica's global step count at this point."""
        return int(self.state["step"])


class Commits:
    """The last two commits of one replica, one every ``every`` steps of an epoch (0: none)."""

    def __init__(self, every: int = 0) -> None:
        self.every = int(every)
        self.kept: list[Commit] = []

    def due(self, done: int, steps: int) -> bool:
        """Whether a commit is due after ``done`` of the epoch's ``steps`` (none after the last: the
        epoch's end is the epoch checkpoint's)."""
        return self.every > 0 and done % self.every == 0 and done < steps

    def add(self, commit: Commit) -> None:
        self.kept = [*self.kept[-1:], commit]

    def held(self) -> list[tuple[int, int]]:
        """The points held, as ``(epoch, at)``."""
        return [(c.epoch, c.at) for c in self.kept]

    def get(self, epoch: int, at: int) -> Commit | None:
        return next((c for c in self.kept if (c.epoch, c.at) == (epoch, at)), None)
