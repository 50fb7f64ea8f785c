"""One replica's work in an epoch whose selection was shared out by throughput (``shares.py``): the
head of its own selection and the samples handed over to it, as one table of rows to train on;
losses of handed-over samples go back to their owners' samplers at the epoch's end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..sampling import Sampler, Selection
from .agreement import Agreement
from .batches import Split
from .replica import ReplicaState
from .shares import handovers, proportional_counts, steps_for

__all__ = ["EpochWork", "MAX_SHARED_ROWS", "floats_to_ids", "ids_to_floats", "share_out", "shared_plan"]

#: row ids travel through the agreement's float32 gather as two 24-bit halves (``ids_to_floats``), exact
#: below 2**48 rows: larger sets keep their own samples
MAX_SHARED_ROWS = 1 << 48
_HALF = 1 << 24


def ids_to_floats(ids: torch.Tensor) -> torch.Tensor:
    """Row ids ``(n,)`` as ``2n`` float32 values, high 24 bits first, each exact in float32."""
    ids = ids.long()
    return torch.cat(
        [torch.div(ids, _HALF, rounding_mode="floor").float(), torch.remainder(ids, _HALF).float()]
    )


def floats_to_ids(values: torch.Tensor) -> torch.Tensor:
    """The ids of :func:`ids_to_floats` back (int64)."""
    n = values.numel() // 2
    return values[:n].long() * _HALF + values[n:].long()


def share_out(
    agreement: Agreement,
    state: ReplicaState,
    selection: Selection,
    kept: Sequence[int],
    rates: Sequence[float],
) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """Agree on every replica's share of the kept samples (in proportion to ``rates``) and hand the
    tails over; returns the targets (samples per replica, rank order) and the dataset rows and
    weights this replica receives. Every replica calls it (one gather)."""
    rank = agreement.rank
    targets = proportional_counts(sum(kept), rates)
    tail = selection.indices[min(targets[rank], len(selection)) :]  # what this replica gives away
    posted = torch.cat([ids_to_floats(state.indices[tail]), selection.weights[targets[rank] :].float()])
    parts = agreement.gather(posted)
    ids, weights = [], []
    for move in handovers(kept, targets):
        if move.receiver != rank:
            continue
        given = kept[move.donor] - targets[move.donor]
        part_ids, part_weights = floats_to_ids(parts[move.donor][: 2 * given]), parts[move.donor][2 * given :]
        lo, hi = move.start - targets[move.donor], move.stop - targets[move.donor]
        ids.append(part_ids[lo:hi])
        weights.append(part_weights[lo:hi])
    received = torch.cat(ids) if ids else torch.zeros(0, dtype=torch.long)
    return targets, received, torch.cat(weights) if weights else torch.zeros(0)


def shared_plan(
    agreement: Agreement, state: ReplicaState, selection: Selection, kept: Sequence[int], rates: Sequence[float],
    split: Split, steps: int,
) -> tuple[list[slice], list[float], list[int], EpochWork]:  # fmt: skip
    """This replica's part of an epoch shared out by ``rates``: its batches (rows of its work), each
    step's planned global batch, every replica's steps and its :class:`EpochWork`. ``steps`` are the
    epoch's plan steps (the global batch over all kept samples)."""
    rank, batch_size = agreement.rank, state.config.optim.batch_size
    targets, received, weights = share_out(agreement, state, selection, kept, rates)
    work = EpochWork(state, selection, min(len(selection), targets[rank]), received, weights)
    worker_steps = [steps_for(t, batch_size, agreement.world) for t in targets]
    own = worker_steps[rank]
    # each push weighs as a part of the epoch's mean global batch: all pushes add up to `steps` steps
    return split(targets[rank], own, batch_size), [sum(kept) / steps] * own, worker_steps, work


class EpochWork:
    """What one replica trains on in a shared-out epoch, and the sampler the step kernel sees.

    Rows ``0..keep-1`` of :attr:`x` are the head of this replica's own selection, the rest the
    dataset rows handed over to it. As a sampler it routes observed losses: its own rows to the
    replica's sampler, the others into a buffer that :meth:`give_back` returns to their owners.

    Parameters
    ----------
    state : ReplicaState
        The replica (its shard, the whole training set and its sampler).
    selection : Selection
        The replica's selection of the epoch.
    keep : int
        How many of its own selected samples (the head) it keeps.
    received, received_weights : Tensor
        ``(m,)`` dataset rows handed over to it and their loss weights.
    """

    two_pass = False  # shares are built for one-pass policies only (the engine checks)

    def __init__(self, state: ReplicaState, selection: Selection, keep: int, received: torch.Tensor,
                 received_weights: torch.Tensor) -> None:  # fmt: skip
        self.state, self.keep, self.received = state, keep, received
        self.own = selection.indices[:keep]
        self.x = torch.cat([state.x[self.own], state.x_all[received]])
        self.y = torch.cat([state.y[self.own], state.y_all[received]])
        self.weights = torch.cat([selection.weights[:keep], received_weights.to(selection.weights.dtype)])
        self.order = torch.arange(int(self.y.shape[0]))
        self.foreign: list[tuple[torch.Tensor, torch.Tensor, float]] = []  # (rows, losses, path then)

    @property
    def sampler(self) -> Sampler:
        return self.state.sampler

    def observe(self, indices: torch.Tensor, losses: torch.Tensor, extras: Mapping[str, Any]) -> None:
        mine = indices < self.keep
        if bool(mine.any()):
            self.sampler.observe(self.own[indices[mine]], losses[mine], extras)
        if not bool(mine.all()):
            theirs = ~mine
            rows = self.received[indices[theirs] - self.keep]
            self.foreign.append((rows, losses[theirs].detach().float(), float(extras.get("path", 0.0))))

    def give_back(self, agreement: Agreement) -> None:
        """Every replica's buffered losses to their owners (one gather; every replica calls it).

        A loss travels with the path this replica has walked since it was computed (its lag); the
        owner files it at its own path less that lag, so the drift bound of a handed-over sample
        grows from about when it was visited, not from the epoch's end.
        """
        s = self.state
        path_now = s.counters.path
        rows = [r for r, _, _ in self.foreign]
        lags = [torch.full((r.numel(),), path_now - p) for r, _, p in self.foreign]
        posted = torch.cat([ids_to_floats(torch.cat(rows)), torch.cat([loss for _, loss, _ in self.foreign]),
                            torch.cat(lags).float()]) if rows else torch.zeros(0)  # fmt: skip
        local = torch.full((s.n_train,), -1, dtype=torch.long)
        local[s.indices] = torch.arange(s.n)
        for part in agreement.gather(posted):
            n = part.numel() // 4  # ids (two values each), losses, lags
            ids, losses, lag = floats_to_ids(part[: 2 * n]), part[2 * n : 3 * n], part[3 * n :]
            positions = local[ids]
            mine = positions >= 0
            for value in torch.unique(lag[mine]).tolist():  # one observe per path, as visits come
                at = mine & (lag == value)
                s.sampler.observe(positions[at], losses[at], {"path": max(0.0, path_now - value)})
        self.foreign = []
