"""Fused numba loops for ``sharedk``'s choice of coordinates: scores, the exact top share, and the
mapping of random positions onto the coordinates left over, without sorting the chunk.

The top share is found by a radix select on the scores' bits: a non-negative float32 orders like its
bit pattern read as an unsigned integer. A pass after the one that computes the scores counts
their highest 11 bits into 2048 bins (four histograms in turn, 32 KiB in all, in the L1 cache, so that a
long run of equal keys, such as the scores of coordinates never sent, does not make every count
wait for the one before); a second pass gathers the keys of the bin where the ``top``-th largest
score lies, the next bits are counted among those alone, and a last pass takes, in index order,
every score above the threshold found and, of the scores equal to it, those whose ranks the
caller picks (a shared-seed draw). The result comes out sorted and is the reference's
(``shared.top_sorted``). Scores are canonical first (NaN as +inf, negatives and -0.0 as +0.0), in
both. The arithmetic of a score (``rate * sqrt(wait)`` with the correctly rounded root, or
``rate * wait``, float32) is the reference's, so both choose the same coordinates.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

__all__ = ["complement_at", "merge_sorted", "observe", "scores", "seen_total", "top_of_scores"]


_WAYS = 4  # histograms counted side by side, so that runs of equal keys do not wait on one counter
_BITS = 11  # bits of a key decided per level: 2048 bins, four ways of int32 in 32 KiB (the L1 cache)


@numba.njit(cache=True, nogil=True)
def _scores(rate, wait, seen, fill, linear, keys, hist):
    """Canonical scores ``r_i * G(wait[i])`` as their bits into ``keys`` (``r_i = rate[i]`` where seen,
    else ``fill``; ``G`` the identity when ``linear``, else the square root; NaN as +inf, not above
    zero as +0.0), and the counts of their highest bits into ``hist``."""
    f = np.float32(fill)
    inf = np.float32(np.inf)
    zero = np.float32(0.0)
    out = keys.view(np.float32)
    top_shift = np.uint32(32 - _BITS)
    for i in range(rate.size):
        r = rate[i] if seen[i] else f
        g = wait[i] if linear else np.float32(np.sqrt(np.float64(wait[i])))  # correctly rounded
        s = np.float32(r * g)
        if s != s:
            s = inf
        elif s <= zero:
            s = zero
        out[i] = s
    for i in range(keys.size):  # a pass of its own: counting in the loop above runs 5x slower
        hist[i % _WAYS, keys[i] >> top_shift] += 1


@numba.njit(cache=True, nogil=True)
def _digit(hist, above, top):
    """The highest bin at which the keys counted in ``hist`` (plus ``above``, the keys known to lie
    higher) reach ``top``; and the count above that bin."""
    digit = hist.shape[1] - 1
    while True:
        count = 0
        for w in range(_WAYS):
            count += hist[w, digit]
        if above + count >= top:
            return digit, above
        above += count
        digit -= 1


@numba.njit(cache=True, nogil=True)
def _threshold(rate, wait, seen, fill, linear, top, keys):
    """The bits of the ``top``-th largest canonical score, how many scores lie above it and how
    many equal it; the scores' bits go to ``keys``."""
    n = rate.size
    hist = np.zeros((_WAYS, 1 << _BITS), dtype=np.int32)
    _scores(rate, wait, seen, fill, linear, keys, hist)
    shift = 32 - _BITS
    digit, above = _digit(hist, 0, top)
    prefix = np.uint32(digit) << np.uint32(shift)
    # the keys that share the threshold's bits so far: few, unless many scores are equal
    m = 0
    for w in range(_WAYS):
        m += hist[w, digit]
    candidates = np.empty(m + 1, dtype=np.uint32)  # a spare slot for the writes not kept
    m = 0
    for i in range(n):  # branch-free, as the passes below
        candidates[m] = keys[i]
        m += np.int64(keys[i] >> np.uint32(shift) == np.uint32(digit))
    while shift > 0:
        bits = min(_BITS, shift)
        shift -= bits
        sh, mask = np.uint32(shift), np.uint32((1 << bits) - 1)
        hist[:] = 0
        for i in range(m):
            hist[i % _WAYS, (candidates[i] >> sh) & mask] += 1
        digit, above = _digit(hist[:, : 1 << bits], above, top)
        prefix |= np.uint32(digit) << sh
        kept = 0
        for i in range(m):
            key = candidates[i]
            candidates[kept] = key
            kept += np.int64((key >> sh) & mask == np.uint32(digit))
        m = kept
    return prefix, above, m


@numba.njit(cache=True, nogil=True)
def _take(keys, threshold, chosen, out):
    """Into ``out`` (increasing, one slot longer than what is taken): every index whose key lies
    above ``threshold``, and of those equal to it the ones whose rank among them (from 0, in index
    order) ``chosen`` marks (one flag per tie and a spare; None: all of them)."""
    j = 0
    if chosen is None:  # every tie taken: one compare per key
        for i in range(keys.size):  # branch-free; ``out`` has a spare slot for the writes not kept
            out[j] = i
            j += np.int64(keys[i] >= threshold)
        return
    t = 0
    for i in range(keys.size):  # branch-free; the flag's address depends on the tie count alone
        key = keys[i]
        tie = np.int64(key == threshold)
        out[j] = i
        j += np.int64(key > threshold) | (tie & np.int64(chosen[t]))
        t += tie


def top_of_scores(
    rate: np.ndarray,
    wait: np.ndarray,
    seen: np.ndarray,
    fill: float,
    linear: bool,
    top: int,
    pick: Callable[[int, int], np.ndarray],
) -> np.ndarray:
    """int64 indices, increasing, of the ``top`` largest canonical scores of ``sharedk``;
    ``0 < top <= rate.size``. Where several scores equal the smallest one taken, ``pick(m, r)``
    says which ``r`` of those ``m`` (their ranks in index order, increasing)."""
    keys = np.empty(rate.size, dtype=np.uint32)
    threshold, above, equal = _threshold(rate, wait, seen, np.float32(fill), linear, top, keys)
    need = top - above
    chosen = None
    if need != equal:
        chosen = np.zeros(equal + 1, dtype=np.uint8)
        chosen[pick(equal, need)] = 1
    out = np.empty(top + 1, dtype=np.int64)
    _take(keys, threshold, chosen, out)
    return out[:top]


def scores(rate: np.ndarray, wait: np.ndarray, seen: np.ndarray, fill: float, linear: bool) -> np.ndarray:
    """The canonical float32 scores the choice ranks (for tests and inspection)."""
    keys = np.empty(rate.size, dtype=np.uint32)
    hist = np.zeros((_WAYS, 1 << _BITS), dtype=np.int32)
    _scores(rate, wait, seen, np.float32(fill), linear, keys, hist)
    return keys.view(np.float32)


@numba.njit(cache=True, nogil=True)
def complement_at(taken, positions, out):
    """``out[i]``: the ``positions[i]``-th coordinate (from 0) that is not in ``taken``; both inputs
    increasing, ``positions`` below the number of coordinates left."""
    j = 0
    for i in range(positions.size):
        p = positions[i]
        c = p + j
        while j < taken.size and taken[j] <= c:
            j += 1
            c = p + j
        out[i] = c


@numba.njit(cache=True, nogil=True)
def merge_sorted(a, b, out):
    """The increasing union of increasing, disjoint ``a`` and ``b`` into ``out``."""
    i = j = 0
    for o in range(out.size):
        if j >= b.size or (i < a.size and a[i] < b[j]):
            out[o] = a[i]
            i += 1
        else:
            out[o] = b[j]
            j += 1


@numba.njit(cache=True, nogil=True)
def observe(averaged, sent, rate, wait, seen, decay, linear):
    """``SharedK.observe`` in place on a chunk's state: at each coordinate of ``sent`` (distinct),
    ``per = |averaged| / G(wait)`` and the rate becomes ``decay * rate + (1 - decay) * per`` where
    it was seen before, else ``per``; then every wait grows by one and the sent ones restart at one.
    The reference's float32 operations in its order (each product rounded, then the sum)."""
    keep = np.float32(decay)
    fresh = np.float32(1.0 - decay)
    one = np.float32(1.0)
    for j in range(sent.size):
        i = sent[j]
        g = wait[i] if linear else np.float32(np.sqrt(np.float64(wait[i])))  # correctly rounded
        per = np.float32(abs(averaged[i]) / g)
        if seen[i]:
            rate[i] = np.float32(keep * rate[i]) + np.float32(fresh * per)
        else:
            rate[i] = per
        seen[i] = True
    for i in range(wait.size):
        wait[i] += one
    for j in range(sent.size):
        wait[sent[j]] = one


#: partial sums of ``seen_total``: coordinate ``i`` adds to lane ``i % _LANES``, so that the adds of
#: one lane do not wait on the others'
_LANES = 8


@numba.njit(cache=True, nogil=True)
def seen_total(rate, seen):
    """How many coordinates were sent before, and the float64 sum of ``rate``: each of ``_LANES``
    lanes sums its coordinates in index order from +0.0, and the lanes are then added in order."""
    count = 0
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    n = rate.size
    full = n - n % _LANES
    for i in range(0, full, _LANES):
        a0 += np.float64(rate[i])
        a1 += np.float64(rate[i + 1])
        a2 += np.float64(rate[i + 2])
        a3 += np.float64(rate[i + 3])
        a4 += np.float64(rate[i + 4])
        a5 += np.float64(rate[i + 5])
        a6 += np.float64(rate[i + 6])
        a7 += np.float64(rate[i + 7])
    lanes = np.array([a0, a1, a2, a3, a4, a5, a6, a7])
    for i in range(full, n):
        lanes[i - full] += np.float64(rate[i])
    for i in range(n):
        count += np.int64(seen[i])
    total = 0.0
    for lane in range(_LANES):
        total += lanes[lane]
    return count, total
