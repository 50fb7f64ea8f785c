"""Fused numba loops for ``sharedk``'s choice of coordinates: scores, the exact top share, and the
mapping of random positions onto the coordinates left over, without sorting the chunk.

The top share is found by a radix select on the scores' bits: a non-negative float32 orders like its
bit pattern read as an unsigned integer, so a pass counts the highest 11 bits into 2048 bins, the
next pass the following 11 bits of the keys in the bin where the ``top``-th largest score lies, a
third the last 10, and a last pass takes, in index order, every score above that threshold and the
lowest-index ones equal to it. Each pass counts into four histograms in turn (32 KiB in all, in the
L1 cache), so that a long run of equal keys, such as the scores of coordinates never sent, does
not make every count wait for the one before.
The result comes out sorted, and ties go to the lowest index, as in the reference
(``shared.top_sorted``). Scores are canonical first (NaN as +inf, negatives and -0.0 as +0.0), in
both. The arithmetic of a score (``rate * sqrt(wait)`` or ``rate * wait``, float32) is the
reference's, so both choose the same coordinates.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["complement_at", "merge_sorted", "scores_into", "top_sorted"]


@numba.njit(cache=True, nogil=True)
def scores_into(rate, wait, seen, fill, linear, out):
    """``out[i] = r_i * G(wait[i])`` with ``r_i = rate[i]`` where seen, else ``fill``; ``G`` is the
    identity (``linear``) or the square root. Canonical: NaN as +inf, not above zero as +0.0."""
    f = np.float32(fill)
    inf = np.float32(np.inf)
    zero = np.float32(0.0)
    for i in range(rate.size):
        r = rate[i] if seen[i] else f
        g = wait[i] if linear else np.sqrt(wait[i])
        s = r * g
        if s != s:
            s = inf
        elif s <= zero:
            s = zero
        out[i] = s


# radix levels: (shift, bits) from the highest bits down
_LEVELS = ((21, 11), (10, 11), (0, 10))
_WAYS = 4  # histograms counted side by side, so that runs of equal keys do not wait on one counter


@numba.njit(cache=True, nogil=True)
def _top_into(keys, top, out):
    """The indices of the ``top`` largest ``keys`` (ties: lowest index), increasing, into ``out``."""
    hist = np.zeros((_WAYS, 1 << 11), dtype=np.int32)  # 32 KiB: stays in the L1 cache
    prefix = np.uint32(0)  # the threshold's bits found so far
    known = np.uint32(0)  # which bits of it are found
    above = 0  # keys known to lie above the threshold
    whole = keys.size - keys.size % _WAYS
    for shift, bits in _LEVELS:
        hist[:] = 0
        sh = np.uint32(shift)
        mask = np.uint32((1 << bits) - 1)
        for i in range(0, whole, _WAYS):  # branch-free: the test is a coin toss for many keys
            for w in range(_WAYS):
                key = keys[i + w]
                hist[w, (key >> sh) & mask] += np.int32(key & known == prefix)
        for i in range(whole, keys.size):
            key = keys[i]
            hist[0, (key >> sh) & mask] += np.int32(key & known == prefix)
        digit = (1 << bits) - 1
        while True:
            count = 0
            for w in range(_WAYS):
                count += hist[w, digit]
            if above + count >= top:
                break
            above += count
            digit -= 1
        prefix |= np.uint32(digit) << sh
        known |= mask << sh
    ties = top - above
    j = 0
    for i in range(keys.size):  # branch-free; ``out`` has a spare slot for the writes not kept
        key = keys[i]
        tie = np.int64(key == prefix) & np.int64(ties > 0)
        out[j] = i
        j += np.int64(key > prefix) | tie
        ties -= tie


def top_sorted(scores: np.ndarray, top: int) -> np.ndarray:
    """int64 indices of the ``top`` largest of canonical float32 ``scores`` (ties: lowest index),
    increasing; ``0 < top <= scores.size``."""
    out = np.empty(top + 1, dtype=np.int64)
    _top_into(scores.view(np.uint32), top, out)
    return out[:top]


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
