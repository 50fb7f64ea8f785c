"""Throughput-proportional shares of an epoch's selected samples, for asynchronous exchanges.

Distributed ADASS keeps one global budget per epoch: every replica selects its own samples above one
agreed threshold. In lock-step (ring, ``ps:mode=sync``) every replica then takes the same number of
steps, so the epoch ends with the slowest one. Under ``ps:mode=async|ssp`` nothing ties the replicas'
steps together, and a replica may take a share of the epoch in proportion to how fast it works:
replicas that kept more than their share hand the tail of their selection over to those that kept
less, and each takes as many steps as its share needs at the usual local batch.

Why shares are set at the epoch's start from a running estimate, rather than work handed out batch by
batch: a replica's samples stay where they live (their scores, the sampler's state and the selection
records stay with their owner, who learns the losses of its handed-over samples at the epoch's end),
the hand-over is decided by every replica alike from one gather (nothing to coordinate per step, so
the asynchronous exchange keeps running without a collective), and the plan is reproducible from the
gathered numbers. The price is the first epoch, which has nothing measured yet and keeps every
replica's own selection; a permanently slow replica is then left behind from the second epoch on.

>>> proportional_counts(10, [1.0, 1.0, 3.0])
[2, 2, 6]
>>> [(h.donor, h.receiver, h.start, h.stop) for h in handovers([6, 2, 2], [2, 4, 4])]
[(0, 1, 2, 4), (0, 2, 4, 6)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Handover", "Throughput", "handovers", "proportional_counts", "steps_for"]


def proportional_counts(total: int, rates: Sequence[float]) -> list[int]:
    """``total`` split in proportion to ``rates`` (largest remainders; ties to the lower rank), so the
    counts add up to ``total`` exactly."""
    weight = sum(rates)
    exact = [total * r / weight for r in rates]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(rates)), key=lambda r: (counts[r] - exact[r], r))
    for r in by_remainder[: total - sum(counts)]:
        counts[r] += 1
    return counts


@dataclass(frozen=True)
class Handover:
    """Positions ``start:stop`` of replica ``donor``'s selection, taken by replica ``receiver``."""

    donor: int
    receiver: int
    start: int
    stop: int


def handovers(kept: Sequence[int], targets: Sequence[int]) -> list[Handover]:
    """What moves so that replica ``r`` holds ``targets[r]`` samples, where it selected ``kept[r]``.

    Every replica keeps the head of its selection up to its target; the tails of those above their
    target go, in rank order, to those below theirs, in rank order. Each selected sample thus ends at
    exactly one replica (the targets must add up to the kept counts).
    """
    if sum(kept) != sum(targets):
        raise ValueError(f"targets add up to {sum(targets)}, the kept samples to {sum(kept)}")
    gives = [(r, targets[r], kept[r]) for r in range(len(kept)) if kept[r] > targets[r]]  # (donor, from, to)
    takes = [[r, targets[r] - kept[r]] for r in range(len(kept)) if targets[r] > kept[r]]  # [receiver, left]
    moved, t = [], 0
    for donor, start, stop in gives:
        while start < stop:
            n = min(stop - start, takes[t][1])
            moved.append(Handover(donor, takes[t][0], start, start + n))
            start, takes[t][1] = start + n, takes[t][1] - n
            t += takes[t][1] == 0
    return moved


def steps_for(count: int, batch_size: int, world: int) -> int:
    """Steps a replica takes for ``count`` samples at the local batch ``batch_size / world`` (at
    least one: a replica with nothing to do still pushes once, so the servers hear from it)."""
    return max(1, math.ceil(count * world / batch_size))


class Throughput:
    """A replica's running estimate of the samples it backpropagates per second of its own work
    (time spent held by the servers' consistency model does not count; see ``held_s``).

    Each epoch's measurement is averaged with the estimate so far at weight ``keep`` for the past, so
    a replica's noise on a shared host moves its share less than a lasting change does.
    """

    def __init__(self, keep: float = 0.5) -> None:
        self.keep = keep
        self.rate = 0.0  # samples per second; 0 until an epoch is measured

    def update(self, samples: int, busy_s: float) -> None:
        """Fold in one epoch: ``samples`` backpropagated in ``busy_s`` seconds of work."""
        if samples <= 0 or busy_s <= 0:
            return
        measured = samples / busy_s
        self.rate = measured if self.rate <= 0 else self.keep * self.rate + (1 - self.keep) * measured

    def state_dict(self) -> dict[str, Any]:
        return {"rate": self.rate}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rate = float(state["rate"])
