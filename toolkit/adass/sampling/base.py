"""The Sampler protocol: which samples of a shard an epoch visits, and with what loss weights."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from ..codecs.base import stable_seed
from ..registry import Registry
from .agreement import Agreement

__all__ = [
    "SAMPLERS",
    "Sampler",
    "SamplerBase",
    "Selection",
    "last_only",
    "last_visits",
    "once_each",
    "shuffled",
]


@dataclass
class Selection:
    """What one epoch visits.

    Attributes
    ----------
    indices : Tensor
        ``(m,)`` int64 positions in the shard, in visiting order.
    weights : Tensor
        ``(m,)`` float32 loss weights (1.0 where no rescaling applies).
    refresh : Tensor or None
        Positions to pass forward only (no backprop) before the epoch, so their scores are fresh;
        the trainer counts these forwards as cost. The engine asks :meth:`Sampler.to_refresh` before
        selecting instead; a policy that fills this field is refreshed after its selection.
    threshold : float
        The bound below which samples were dropped (NaN where the policy has no threshold).
    """

    indices: torch.Tensor
    weights: torch.Tensor
    refresh: torch.Tensor | None = None
    threshold: float = float("nan")

    def __len__(self) -> int:
        return int(self.indices.shape[0])


@runtime_checkable
class Sampler(Protocol):
    """A sample-selection policy for one shard of ``n`` samples.

    The trainer calls ``to_refresh(epoch)`` and passes the positions it names forward, then
    ``select(epoch)`` once per epoch, then, for every visited batch, ``observe``
    with the per-sample losses of the forward pass. ``extras`` holds ``path`` (the cumulative length
    of the optimisation path, sum of ||w_{t+1} - w_t||, at the time of the forward) and ``epoch``.

    ``observe`` may keep the tensors it is given and fold them in later (once per epoch, at
    ``settle``, or when its state is read), so callers hand over tensors they no longer change.

    Policies that decide per batch after a forward pass (``two_pass = True``) also implement
    ``backprop_weights(indices, losses) -> Tensor`` giving each sample's loss weight, 0 to skip.

    In a run of several replicas each replica's sampler sees its own shard; before the first epoch
    the engine calls ``share(agreement)``, where a policy with a global budget (ADASS) takes the
    collectives it needs to decide for all replicas at once. Local policies ignore it.

    ``state_layout`` names, for each state entry that belongs to samples, how it follows them when a
    run goes on with another number of replicas (``sample``, ``indexed``, ``pooled`` or ``summed``; see
    :mod:`adass.engine.reshard`).
    """

    two_pass: bool
    state_layout: dict[str, str]

    def share(self, agreement: Agreement) -> None:
        """Decide together with the other replicas through ``agreement`` from now on."""
        ...

    def to_refresh(self, epoch: int) -> torch.Tensor | None:
        """Positions to pass forward (no backprop) before ``select(epoch)``, so it sees fresh losses."""
        ...

    def select(self, epoch: int) -> Selection: ...

    def settle(self) -> None:
        """End of an epoch's steps: finish the bookkeeping of what ``observe`` buffered."""
        ...

    def observe(self, indices: torch.Tensor, losses: torch.Tensor, extras: Mapping[str, Any]) -> None: ...

    def bounds(self) -> torch.Tensor:
        """Current per-sample score (a gradient-norm bound for ADASS), ``(n,)`` float32."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


SAMPLERS = Registry("sampler")


def shuffled(indices: torch.Tensor, seed: int, epoch: int, salt: str = "order") -> torch.Tensor:
    """``indices`` in a seeded random order: the same (seed, epoch) always gives the same order.

    The permutation is ``torch.randperm(len(indices), generator=g)`` with ``g`` seeded by
    ``stable_seed(seed, salt, epoch)``.
    """
    gen = torch.Generator().manual_seed(stable_seed(seed, salt, epoch))
    return indices.index_select(0, torch.randperm(int(indices.shape[0]), generator=gen))


def last_visits(indices: torch.Tensor, n: int) -> torch.Tensor:
    """Which entries of ``indices`` (positions among ``n``) are the last visit of their sample: where
    observations are folded in at once, a sample seen twice keeps what its later visit saw.

    >>> last_visits(torch.tensor([3, 1, 3, 0]), 4).tolist()
    [False, True, True, True]
    """
    order = torch.arange(indices.numel())
    last = torch.full((n,), -1, dtype=torch.long).scatter_reduce(0, indices, order, "amax")
    return last[indices] == order


def once_each(indices: torch.Tensor, n: int) -> bool:
    """Whether no position among ``n`` appears twice in ``indices`` (then every entry is its sample's
    last visit, and a write by index needs no :func:`last_visits`): one count per position, about a
    third of the time of :func:`last_visits` for 30k of 56k positions.

    >>> once_each(torch.tensor([3, 1, 0]), 4), once_each(torch.tensor([3, 1, 3]), 4)
    (True, False)
    """
    return indices.numel() == 0 or int(torch.bincount(indices, minlength=n).max()) <= 1


def last_only(indices: torch.Tensor, n: int, *values: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``indices`` (positions among ``n``) and ``values`` (one entry per index) kept where they are
    their sample's last visit: as given where no position repeats (:func:`once_each`), so a write by
    ``index_copy_`` afterwards sees each sample once, its latest value.

    >>> [t.tolist() for t in last_only(torch.tensor([3, 1, 3]), 4, torch.tensor([0.5, 1.5, 2.5]))]
    [[1, 3], [1.5, 2.5]]
    """
    if once_each(indices, n):
        return (indices, *values)
    keep = last_visits(indices, n)
    return (indices[keep], *(v[keep] for v in values))


class SamplerBase:
    """Shared plumbing: a shard of ``n`` samples, the run seed, last-seen losses for ``bounds()``.

    ``uses_path``: whether ``observe`` reads ``extras["path"]``; where no policy does, a
    distributed replica skips measuring the length of each step.

    ``observe`` only keeps the batch's losses; they are folded into :attr:`last_loss` at once when it
    is read (``bounds``, ``select``, ``settle``, ``state_dict``), so a step pays for no per-sample
    write, and ``last_loss`` holds, whenever it is read, what writing every batch in turn would.
    """

    two_pass = False
    uses_path = False
    #: how each state entry follows its samples to another shard (``adass.engine.reshard``)
    state_layout: dict[str, str] = {"last_loss": "sample"}

    def __init__(self, n: int, seed: int = 0, epochs: int = 1) -> None:
        self.n = int(n)
        self.seed = int(seed)
        self.epochs = int(epochs)
        self.last_loss = torch.full((self.n,), float("nan"))

    @property
    def last_loss(self) -> torch.Tensor:
        """``(n,)`` float32: each sample's loss at its last visit (NaN before its first)."""
        if self._seen:
            self._fold_seen()
        return self._last_loss

    @last_loss.setter
    def last_loss(self, value: torch.Tensor) -> None:
        self._last_loss, self._seen = value, []

    def _fold_seen(self) -> None:
        """Write the kept batches' losses into ``last_loss``, the last visit of a sample winning."""
        idx = torch.cat([i for i, _ in self._seen])
        losses = torch.cat([f for _, f in self._seen]).float().cpu()
        self._seen = []
        idx, losses = last_only(idx, self.n, losses)
        self._last_loss.index_copy_(0, idx, losses)

    def observe(self, indices: torch.Tensor, losses: torch.Tensor, extras: Mapping[str, Any]) -> None:
        self._seen.append((indices, losses.detach()))

    def bounds(self) -> torch.Tensor:
        return self.last_loss.clone()

    def share(self, agreement: Agreement) -> None:
        """Local policies decide on their own shard: nothing to share."""
        return None

    def to_refresh(self, epoch: int) -> torch.Tensor | None:
        """No refresh passes."""
        return None

    def settle(self) -> None:
        """Fold the epoch's observed losses into ``last_loss``."""
        if self._seen:
            self._fold_seen()

    def everything(self, epoch: int) -> Selection:
        order = shuffled(torch.arange(self.n), self.seed, epoch)
        return Selection(order, torch.ones(self.n))

    def state_dict(self) -> dict[str, Any]:
        return {"last_loss": self.last_loss.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last_loss = state["last_loss"].clone()
