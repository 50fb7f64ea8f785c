"""Splitting a training set across P workers: ``iid`` and label-skewed ``dirichlet:alpha=..``."""

from __future__ import annotations

import numpy as np
import torch

from ..registry import Param, Registry

__all__ = ["SHARDINGS", "shard_indices"]

#: ``factory(**params, labels=..., world=..., seed=...) -> list[Tensor]``
SHARDINGS = Registry("shard")


def shard_indices(labels: torch.Tensor, world: int, spec: str = "iid", seed: int = 0) -> list[torch.Tensor]:
    """Split sample indices ``0..n-1`` into one shard per worker.

    Parameters
    ----------
    labels : Tensor
        ``(n,)`` integer labels of the training set.
    world : int
        Number of workers P, in ``[1, n]``.
    spec : str
        ``iid`` or ``dirichlet:alpha=0.5``; see ``SHARDINGS.help()``.
    seed : int
        Same seed, same shards.

    Returns
    -------
    list of Tensor
        P sorted int64 index tensors; together they hold every index exactly once, and none is
        empty.

    Raises
    ------
    ValueError
        ``world`` outside ``[1, n]`` (or a bad spec: SpecError, a ValueError).
    """
    labels = torch.as_tensor(labels)
    n = int(labels.shape[0])
    if isinstance(world, bool) or not isinstance(world, int) or not 1 <= world <= n:
        raise ValueError(f"shard: world={world!r} is not allowed; expected an integer in [1, {n}]")
    shards = SHARDINGS.build(spec, labels=labels, world=world, seed=seed)
    return [torch.sort(s).values for s in shards]


@SHARDINGS.register("iid")
def shard_iid(*, labels: torch.Tensor, world: int, seed: int) -> list[torch.Tensor]:
    """A seeded permutation cut into P near-equal parts (sizes differ by at most one)."""
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(labels.shape[0], generator=gen)
    return list(torch.tensor_split(order, world))


@SHARDINGS.register(
    "dirichlet",
    alpha=Param(
        0.5,
        "Dirichlet concentration: small gives few classes per worker, large ~iid",
        low=1e-3,
        high=1e6,
    ),
)
def shard_dirichlet(alpha: float, *, labels: torch.Tensor, world: int, seed: int) -> list[torch.Tensor]:
    """Label skew: each class is shared among the workers in proportions drawn from Dir(alpha).

    Shard sizes vary with the draw; a worker left empty takes one sample from the largest shard.
    """
    rng = np.random.default_rng(seed)
    y = labels.cpu().numpy()
    parts: list[list[np.ndarray]] = [[] for _ in range(world)]
    for value in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == value))
        share = rng.dirichlet(np.full(world, alpha))  # (P,) this class's split over workers
        cuts = np.round(np.cumsum(share)[:-1] * members.size).astype(np.int64)
        for worker, piece in enumerate(np.split(members, cuts)):
            parts[worker].append(piece)
    shards = [np.concatenate(p) if p else np.empty(0, np.int64) for p in parts]
    _fill_empty(shards)
    return [torch.from_numpy(s.astype(np.int64)) for s in shards]


def _fill_empty(shards: list[np.ndarray]) -> None:
    """Move one sample from the largest shard to each empty one (possible because P <= n)."""
    for worker, shard in enumerate(shards):
        if shard.size == 0:
            donor = int(np.argmax([s.size for s in shards]))
            shards[worker], shards[donor] = shards[donor][-1:], shards[donor][:-1]
