"""Seeded draws of ``k`` distinct coordinates out of ``n`` without a full permutation, and a cache.

:func:`distinct_sample` reads integers uniform on ``[0, n)`` from a seeded generator and keeps
the first ``k`` distinct ones in the order drawn: that is sampling without replacement, so the set
is uniform over the k-subsets of ``[0, n)``. For ``k > n/2`` it draws the ``n - k`` coordinates to
leave out instead, which keeps the number of draws below ``1.4 * min(k, n - k)`` on average. The
cost is that of sorting the draws (plus an ``n``-long mask for the complement), not of permuting
all ``n``.

Each integer comes from a 62-bit uniform draw reduced modulo ``n``, so a coordinate's chance per
draw is ``1/n`` to within a relative ``n / 2**62`` (below ``2**-30`` for any chunk of fewer than
``2**32`` values); that is the only way the law of the subset departs from uniform.

:class:`IndexCache` keeps recent draws, so that decoding a chunk at every hop of a ring does not
draw again.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import torch

__all__ = ["IndexCache", "distinct_sample"]

_RAW_HIGH = 2**62  # draws are uniform on [0, 2**62), then reduced modulo n
_INT32_LIMIT = 2**31 - 1


def _draws_needed(n: int, have: int, k: int) -> int:
    """Enough uniform draws to go from ``have`` to ``k`` distinct values, most of the time.

    The expected count is ``n * (H(n - have) - H(n - k))`` (coupon collector), close to
    ``n * ln((n - have + 1/2) / (n - k + 1/2))``; four standard deviations more make a second
    round rare.
    """
    mean = n * math.log((n - have + 0.5) / (n - k + 0.5))
    var = (k - have) * k * n / (n - k + 1) ** 2  # sum of geometric variances i*n/(n-i)**2
    return math.ceil(mean + 4.0 * math.sqrt(var) + 16)


def _in_order_firsts(values: torch.Tensor) -> torch.Tensor:
    """The distinct entries of ``values``, each once, in the order of their first occurrence."""
    if values.numel() == 0:
        return values
    sorted_values, order = torch.sort(values, stable=True)  # equal values keep their draw order
    first = torch.ones_like(sorted_values, dtype=torch.bool)
    first[1:] = sorted_values[1:] != sorted_values[:-1]
    mark = torch.zeros(values.numel(), dtype=torch.bool, device=values.device)
    mark[order[first]] = True
    return values[mark.nonzero().flatten()]


def _merge_sorted(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Two sorted tensors of distinct values (none shared) as one sorted tensor, in O(len) steps."""
    if b.numel() == 0:
        return a
    b = b.sort().values
    where_b = torch.searchsorted(a, b) + torch.arange(b.numel(), device=b.device)
    out = torch.empty(a.numel() + b.numel(), dtype=a.dtype, device=a.device)
    from_a = torch.ones(out.numel(), dtype=torch.bool, device=a.device)
    from_a[where_b] = False
    out[where_b] = b
    out[from_a] = a
    return out


def _first_distinct(
    n: int, k: int, gen: torch.Generator, device: torch.device, first_draws: int | None
) -> torch.Tensor:
    """The set of the first ``k`` distinct values of a uniform stream on ``[0, n)``, sorted.

    The first round draws ``k`` values (or ``first_draws``): when it is no longer than ``k``,
    every distinct value in it is among the first ``k`` distinct ones, so one sort finds them and
    their draw order does not matter. The few values still missing come from short top-up
    rounds, whose new values are taken in the order drawn.
    """
    batch = k if first_draws is None else max(1, first_draws)
    # the same values as int32 where they fit: sorting and merging them takes about half the time
    kind = torch.int32 if n <= _INT32_LIMIT else torch.int64

    def draw(count: int) -> torch.Tensor:
        return (torch.randint(0, _RAW_HIGH, (count,), generator=gen, device=device) % n).to(kind)

    fresh = draw(batch)
    if batch <= k:
        have = torch.unique(fresh)  # sorted
    else:
        have = _in_order_firsts(fresh)[:k].sort().values
    while have.numel() < k:
        fresh = draw(_draws_needed(n, have.numel(), k))
        if have.numel():
            at = torch.searchsorted(have, fresh).clamp_(max=have.numel() - 1)
            fresh = fresh[have[at] != fresh]  # values not drawn before, in draw order
        have = _merge_sorted(have, _in_order_firsts(fresh)[: k - have.numel()])
    return have.to(torch.int64)


def distinct_sample(
    n: int,
    k: int,
    gen: torch.Generator,
    device: str | torch.device = "cpu",
    first_draws: int | None = None,
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
        How many integers to draw in the first round (default ``k``, which needs one sort and no
        record of the draw order). Later rounds top up until ``k`` distinct values are in hand.

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
        return _first_distinct(n, k, gen, device, first_draws)
    keep = torch.ones(n, dtype=torch.bool, device=device)
    if k < n:  # draw the n - k coordinates to leave out: their complement is a uniform k-subset
        keep[_first_distinct(n, n - k, gen, device, first_draws)] = False
    return keep.nonzero().flatten()


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
