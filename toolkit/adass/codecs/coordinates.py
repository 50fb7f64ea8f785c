"""Seeded draws of ``k`` distinct coordinates out of ``n`` without a full permutation, and a cache.

:func:`distinct_sample` draws a stream of integers uniform on ``[0, n)`` already in sorted order,
keeps its distinct values, draws more in the rare case that fewer than ``k`` came up, and then
drops a uniformly chosen few so that exactly ``k`` remain. Relabelling the coordinates changes
neither the law of the stream nor when it stops, so the set of distinct values, given its size,
is uniform over subsets of that size; dropping a uniform subset of it leaves a uniform k-subset.
The positions to drop are drawn the same way (a much smaller problem), or by a permutation once
there are few of them. For ``k > n/2`` the ``n - k`` coordinates to leave out are drawn instead.

Sorted draws need no sort: with ``E_1 .. E_{m+1}`` independent standard exponentials and ``S_j``
their partial sums, ``S_1 / S_{m+1} < ... < S_m / S_{m+1}`` are distributed as the order
statistics of ``m`` uniforms on ``(0, 1)``, and ``floor(n * U)`` makes them uniform integers. The
arithmetic is float64, so the law departs from the exact one only by rounding (relative
``2**-52`` per coordinate boundary). The cost is a few passes over ``~k`` values.

:class:`IndexCache` keeps recent draws, so that decoding a chunk at every hop of a ring does not
draw again.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np
import torch

from .kernels import FUSED, REFERENCE

__all__ = ["IndexCache", "block_sample", "distinct_sample"]

_INT32_LIMIT = 2**31 - 1
_PERMUTE_BELOW = 2048  # drop positions out of fewer than this many values by a permutation


def _draws_needed(n: int, have: int, k: int) -> int:
    """Enough uniform draws to go from ``have`` to ``k`` distinct values, most of the time.

    The expected count is ``n * (H(n - have) - H(n - k))`` (coupon collector), close to
    ``n * ln((n - have + 1/2) / (n - k + 1/2))``; four standard deviations more make a second
    round rare.
    """
    mean = n * math.log((n - have + 0.5) / (n - k + 0.5))
    var = (k - have) * k * n / (n - k + 1) ** 2  # sum of geometric variances i*n/(n-i)**2
    return math.ceil(mean + 4.0 * math.sqrt(var) + 16)


def _sorted_draws(
    n: int, m: int, gen: torch.Generator, device: torch.device, kind: torch.dtype
) -> torch.Tensor:
    """``m`` independent uniform integers on ``[0, n)`` in increasing order (ties possible)."""
    # -log(1 - U) with U uniform on [0, 1): torch's exponential_ measured several times slower
    uniform = torch.empty(m + 1, dtype=torch.float64, device=device).uniform_(generator=gen)
    sums = uniform.neg_().log1p_().neg_().cumsum_(0)
    points = sums[:m].mul_(n / sums[m])
    return points.floor_().clamp_(max=n - 1).to(kind)


def _sorted_unique(n: int, m: int, gen: torch.Generator) -> torch.Tensor:
    """``unique_consecutive(_sorted_draws(n, m, gen, "cpu", ...))`` as int64 in one fused pass after
    torch's own uniform and log1p (same words, same bits); CPU with the fused kernels only."""
    from .kernels import fused

    logs = torch.empty(m + 1, dtype=torch.float64).uniform_(generator=gen).neg_().log1p_()
    out = np.empty(m, dtype=np.int64)
    return torch.from_numpy(out[: fused.sorted_unique(logs.numpy(), n, out)])


def _drop_uniform(values: torch.Tensor, k: int, gen: torch.Generator, kernels: str) -> torch.Tensor:
    """``values`` without ``values.numel() - k`` of its entries chosen uniformly (order kept)."""
    u = values.numel()
    if u == k:
        return values
    if u < _PERMUTE_BELOW:
        drop = torch.randperm(u, generator=gen, device=values.device)[: u - k]
    else:
        drop = distinct_sample(u, u - k, gen, values.device, kernels=kernels)
    keep = torch.ones(u, dtype=torch.bool, device=values.device).index_fill_(0, drop, False)
    if values.device.type == "cpu":  # numpy compacts about 4x faster than masked_select here
        return torch.from_numpy(values.numpy()[keep.numpy()])
    return torch.masked_select(values, keep)


def _distinct_sorted(
    n: int, k: int, gen: torch.Generator, device: torch.device, first_draws: int | None, kernels: str
) -> torch.Tensor:
    """A uniform k-subset of ``[0, n)``, sorted, for ``0 < k <= n``: the distinct values of a
    stream of draws long enough to hold ``k``, thinned to exactly ``k``."""
    # the same values as int32 where they fit: every pass over them takes about half the time
    kind = torch.int32 if n <= _INT32_LIMIT else torch.int64
    batch = _draws_needed(n, 0, k) if first_draws is None else max(1, first_draws)
    if device.type == "cpu" and kernels == FUSED:
        have = _sorted_unique(n, batch, gen)
    else:
        have = torch.unique_consecutive(_sorted_draws(n, batch, gen, device, kind))
    while have.numel() < k:  # rare with the default first round
        more = _sorted_draws(n, _draws_needed(n, have.numel(), k), gen, device, kind)
        have = torch.unique(torch.cat([have, more]))  # sorted
    return _drop_uniform(have, k, gen, kernels).to(torch.int64)


def distinct_sample(
    n: int,
    k: int,
    gen: torch.Generator,
    device: str | torch.device = "cpu",
    first_draws: int | None = None,
    kernels: str = REFERENCE,
) -> torch.Tensor:
    """``k`` distinct coordinates of ``[0, n)``, sorted, uniform over k-subsets.

    Parameters
    ----------
    n, k : int
        Chunk length and number of coordinates, ``0 <= k <= n``.
    gen : torch.Generator
        The seeded source of the draws (on ``device``): the same seed gives the same coordinates.
    device : str or torch.device
        Where the draws happen and the result lives.
    first_draws : int, optional
        How many integers to draw in the first round (default: enough for ``k`` distinct ones
        nearly always). Later rounds top up until ``k`` distinct values are in hand.
    kernels : {"reference", "fused"}
        The kernels of the draws' tail on the CPU (the caller's codec's); the same bits either way.

    Returns
    -------
    Tensor
        int64 ``(k,)``, strictly increasing.
    """
    if not 0 <= k <= n:
        raise ValueError(f"cannot draw k={k} distinct coordinates out of n={n}")
    device = torch.device(device)
    if 2 * k <= n:
        if k == 0:
            return torch.empty(0, dtype=torch.int64, device=device)
        return _distinct_sorted(n, k, gen, device, first_draws, kernels)
    keep = torch.ones(n, dtype=torch.bool, device=device)
    if k < n:  # draw the n - k coordinates to leave out: their complement is a uniform k-subset
        keep[_distinct_sorted(n, n - k, gen, device, first_draws, kernels)] = False
    return keep.nonzero().flatten()


def block_sample(
    n: int,
    k: int,
    block: int,
    gen: torch.Generator,
    device: str | torch.device = "cpu",
    kernels: str = REFERENCE,
) -> torch.Tensor:
    """``k`` distinct coordinates of ``[0, n)``, sorted, taken in runs of ``block`` neighbours.

    The chunk is rotated by a uniform offset; of the ``n // block`` whole blocks of the rotated
    chunk, ``ceil(k / block)`` are drawn as a uniform subset (:func:`distinct_sample`), and the first
    ``k`` of their coordinates are kept. Because the offset puts every coordinate at a uniform
    position of the rotated chunk, each is kept with probability ``(expected count kept) / n = k / n``,
    as under :func:`distinct_sample`, though coordinates of one block go together. The draws cost
    about ``k / block`` values instead of ``k``. Falls back to :func:`distinct_sample` where the
    whole blocks cannot hold ``k`` (or ``block`` is 1). ``kernels`` as :func:`distinct_sample` takes it.
    """
    if not 0 <= k <= n:
        raise ValueError(f"cannot draw k={k} distinct coordinates out of n={n}")
    device = torch.device(device)
    whole, chosen = n // block, -(-k // block)
    if block <= 1 or k == 0 or chosen > whole:
        return distinct_sample(n, k, gen, device, kernels=kernels)
    offset = int(torch.randint(n, (1,), generator=gen, device=device))
    starts = distinct_sample(whole, chosen, gen, device, kernels=kernels) * block
    if device.type == "cpu" and kernels == FUSED:
        from .kernels import fused

        out = np.empty(k, dtype=np.int64)
        fused.block_positions(starts.numpy(), block, offset, n, out)
        return torch.from_numpy(out)
    positions = (starts[:, None] + torch.arange(block, device=device)).reshape(-1)[:k]  # increasing
    # rotate back: the positions past n - offset wrap to the chunk's start, so they come first
    wrap = int(torch.searchsorted(positions, n - offset))
    return torch.cat((positions[wrap:] + (offset - n), positions[:wrap] + offset))


class IndexCache:
    """The most recently used index tensors, up to ``max_indices`` int64 entries in all.

    Safe to share between threads. Callers must not modify a returned tensor in place: every later
    lookup of the same key returns that same tensor. A cache travels empty when pickled.

    Parameters
    ----------
    max_indices : int
        Budget in indices (8 bytes each); a tensor larger than the budget is returned uncached.
    """

    def __init__(self, max_indices: int = 2**21) -> None:
        self.max_indices = max_indices
        self._entries: OrderedDict[Hashable, torch.Tensor] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], torch.Tensor]) -> torch.Tensor:
        """The tensor cached under ``key``, or ``make()`` (then cached) when there is none."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit
        made = make()  # outside the lock: other threads may draw other keys meanwhile
        if made.numel() > self.max_indices:
            return made
        with self._lock:
            if key not in self._entries:
                self._entries[key] = made
                self._held += made.numel()
            while self._held > self.max_indices:
                _, old = self._entries.popitem(last=False)
                self._held -= old.numel()
            return self._entries.get(key, made)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._held = 0

    def __getstate__(self) -> dict:
        return {"max_indices": self.max_indices}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["max_indices"])
