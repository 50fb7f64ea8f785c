"""Fused numba loops for QSGD (2, 4 and 8 bits) and random-k: one pass over the values, no temporaries.

QSGD encode works bucket by bucket: the max-abs of the bucket (read from memory), its gain, then
the bucket again (now from the L1 cache) rounded with the 16-bit lanes of SFC64 words generated in
the loop, the same words ``numpy.random.SFC64(seed).random_raw`` gives (state taken from numpy's
seeding), and packed. Every operation is the reference's float32 operation in the same order, so
the codes are bit-identical: the rounding is one fused multiply-add, as torch's vectorised
``addcmul`` computes it on CPUs with FMA (the tests compare the two wherever they run), and the
scale of an all-zero bucket, a signed zero whose sign follows torch's reductions, is taken from
the reference. The loops index without bounds checks: the wrappers size every array. Functions compile on first call and are cached on disk
(``cache=True``: next to this file, or numba's user cache directory where that is read-only, or
``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

__all__ = ["compensate_delayed", "qsgd_decode", "qsgd_encode", "randk_gather", "randk_scatter", "sent_update",
           "sfc64_state"]  # fmt: skip

_LANE = np.float32(2.0**-16)


def sfc64_state(seed: int) -> np.ndarray:
    """The state ``(a, b, c, counter)`` of ``numpy.random.SFC64(seed)`` before its first word."""
    return np.random.SFC64(seed).state["state"]["state"].copy()


@numba.njit(cache=True, nogil=True, inline="always")
def _next(s):
    """The next word of SFC64 with state ``s = (a, b, c, counter)``, as numpy's ``sfc64_next``."""
    tmp = s[0] + s[1] + s[3]
    s[3] += np.uint64(1)
    s[0] = s[1] ^ (s[1] >> np.uint64(11))
    s[1] = s[2] + (s[2] << np.uint64(3))
    s[2] = ((s[2] << np.uint64(24)) | (s[2] >> np.uint64(40))) + tmp
    return tmp


@intrinsic
def _fma32(typingctx, a, b, c):
    """``a * b + c`` rounded once (LLVM's fma): what torch's vectorised ``addcmul`` computes."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return sig, codegen


@numba.njit(cache=True, nogil=True)
def _max_abs(xs):
    """``max(max(xs), -min(xs))`` as the reference's ``torch.maximum(amax, -amin)``: the largest
    magnitude, found on the integer bits (a vectorised integer max), with a zero's sign as torch's."""
    bits = xs.view(np.int32)
    top = np.int32(0)
    for i in range(bits.size):
        v = bits[i] & np.int32(0x7FFFFFFF)
        top = v if v > top else top
    if top != 0:
        return np.array([top], dtype=np.int32).view(np.float32)[0]
    # all zeros: torch.maximum(amax, -amin) keeps its first argument, +0 unless every zero is -0
    for i in range(bits.size):
        if bits[i] == 0:
            return np.float32(0.0)
    return np.float32(-0.0)


@numba.njit(cache=True, nogil=True)
def _round(lanes, step, xs, gain, offset, top, level):
    """``level = clamp(floor(lane * step + offset + x * gain), 0, top)`` as uint8, in float32 as
    the reference: the lane offset, then one fused multiply-add. ``step`` is ``2**-16`` for
    stochastic rounding; 0 rounds to the nearest level (``lane * 0`` is a zero: ``u`` is ``offset``)."""
    zero = np.float32(0.0)
    for i in range(xs.size):
        u = np.float32(lanes[i]) * step + offset
        v = _fma32(xs[i], gain, u)
        v = v if v > zero else zero
        v = v if v < top else top
        level[i] = np.uint8(np.int16(v))


@numba.njit(cache=True, nogil=True)
def _pack4(level, out):
    """Two 4-bit codes a byte, the first in the low nibble (``level`` has an even length)."""
    for i in range(out.size):
        out[i] = level[2 * i] | (level[2 * i + 1] << np.uint8(4))


@numba.njit(cache=True, nogil=True)
def _pack2(level, out):
    """Four 2-bit codes a byte, the first in the lowest bits (``level`` has a multiple of 4 length)."""
    for i in range(out.size):
        j = 4 * i
        out[i] = (
            level[j]
            | (level[j + 1] << np.uint8(2))
            | (level[j + 2] << np.uint8(4))
            | (level[j + 3] << np.uint8(6))
        )


@numba.njit(cache=True, nogil=True)
def _pack(level, count, lo, out, bits):
    """The ``count`` codes in ``level`` packed ``bits`` (4 or 2) wide into ``out`` from value ``lo``
    on (``lo`` starts a byte; the last byte's spare codes are zero)."""
    per = 8 // bits
    whole = (count + per - 1) // per
    for i in range(count, whole * per):
        level[i] = 0
    if bits == 4:
        _pack4(level[: whole * per], out[lo // per : lo // per + whole])
    else:
        _pack2(level[: whole * per], out[lo // per : lo // per + whole])


@numba.njit(cache=True, nogil=True)
def _encode_bucket(xs, lo, m, out, state, last, words, level, bits, nearest):
    """Round bucket ``xs`` (the values from ``lo`` on) with scale ``m`` and pack it ``bits`` (4 or
    8) wide into ``out``. ``state``: SFC64 state, one word per 4 values from value 0 on, so a word
    whose lanes straddle two buckets is drawn once: ``last[0]`` keeps the latest word drawn.
    ``words`` and ``level`` are scratch of at least ``(len(xs) + 7) // 4 + 1`` and ``len(xs) + 3``.
    ``nearest``: round to the nearest level, drawing nothing. 4- and 2-bit buckets start on a byte."""
    count = xs.size
    hi = lo + count
    half = np.float32((2**bits - 2) // 2)
    top = np.float32(2**bits - 2)
    one = np.float32(1.0)
    zero = np.float32(0.0)
    gain = (one / (m if m > zero else one)) * half
    if nearest:  # no draws: the lanes weigh nothing and the offset is the half that rounds
        lanes, step, offset = words.view(np.int16)[:count], zero, half + np.float32(0.5)
    else:
        wlo = lo >> 2
        made = (lo + 3) >> 2  # words drawn for the values before lo
        for j in range(wlo, (hi + 3) >> 2):
            if j >= made:
                last[0] = _next(state)
            words[j - wlo] = last[0]
        skip = lo - 4 * wlo
        lanes, step = words.view(np.int16)[skip : skip + count], _LANE
        offset = half + np.float32(0.5) + np.float32(2.0**-17)
    if bits == 8:
        _round(lanes, step, xs, gain, offset, top, out[lo:hi])
    else:  # 4 or 2 bits: buckets of a whole number of bytes start on a byte
        _round(lanes, step, xs, gain, offset, top, level[:count])
        _pack(level, count, lo, out, bits)


@numba.njit(cache=True, nogil=True)
def _encode(x, scale, out, state, bucket, bits, given, nearest):
    """QSGD codes of ``x`` packed ``bits`` (8, 4 or 2) wide into ``out``; bucket scales into ``scale``
    unless ``given`` (then read from it); ``state``: SFC64 state, advanced one word per 4 values
    (``nearest``: not used)."""
    n = x.size
    words = np.empty((bucket + 7) // 4 + 1, dtype=np.uint64)
    level = np.zeros(bucket + 3, dtype=np.uint8)
    last = np.zeros(1, dtype=np.uint64)
    for b in range((n + bucket - 1) // bucket):
        lo = b * bucket
        hi = min(lo + bucket, n)
        if given:
            m = scale[b]
        else:
            m = _max_abs(x[lo:hi])
            scale[b] = m
        _encode_bucket(x[lo:hi], lo, m, out, state, last, words, level, bits, nearest)


@numba.njit(cache=True, nogil=True)
def _decode8(codes, spacing, out, bucket, centre):
    """``out[i] = (codes[i] - centre) * spacing[i // bucket]`` for byte-wide codes."""
    n = out.size
    for b in range((n + bucket - 1) // bucket):
        lo = b * bucket
        d = spacing[b]
        src = codes[lo : lo + bucket]
        dst = out[lo : lo + bucket]
        for i in range(dst.size):
            dst[i] = (np.float32(src[i]) - centre) * d


@numba.njit(cache=True, nogil=True)
def _decode_pairs(codes, out, centre, d):
    """Both nibbles of each byte of ``codes``, low first, into ``out`` (twice as long)."""
    mask = np.uint8(15)
    for j in range(codes.size):
        c = codes[j]
        out[2 * j] = (np.float32(c & mask) - centre) * d
        out[2 * j + 1] = (np.float32(c >> np.uint8(4)) - centre) * d


@numba.njit(cache=True, nogil=True)
def _decode_quads(codes, out, centre, d):
    """The four 2-bit codes of each byte of ``codes``, lowest first, into ``out`` (four times as long)."""
    mask = np.uint8(3)
    for j in range(codes.size):
        c = codes[j]
        out[4 * j] = (np.float32(c & mask) - centre) * d
        out[4 * j + 1] = (np.float32((c >> np.uint8(2)) & mask) - centre) * d
        out[4 * j + 2] = (np.float32((c >> np.uint8(4)) & mask) - centre) * d
        out[4 * j + 3] = (np.float32(c >> np.uint8(6)) - centre) * d


@numba.njit(cache=True, nogil=True, inline="always")
def _decode_single(codes, out, lo, hi, centre, d, bits):
    """Values ``lo`` to ``hi`` of codes packed ``bits`` wide, one code at a time."""
    per, mask = 8 // bits, np.uint8((1 << bits) - 1)
    for i in range(lo, hi):
        out[i] = (np.float32((codes[i // per] >> np.uint8(bits * (i % per))) & mask) - centre) * d


@numba.njit(cache=True, nogil=True)
def _decode_packed(codes, spacing, out, bucket, centre, bits):
    """``_decode8`` for codes packed ``bits`` (4 or 2) wide, lowest bits first: per bucket, single
    codes up to a byte boundary, whole bytes at once, then the codes left in the last byte."""
    n, per = out.size, 8 // bits
    for b in range((n + bucket - 1) // bucket):
        lo = b * bucket
        hi = min(lo + bucket, n)
        d = spacing[b]
        start = min(hi, lo + (-lo) % per)
        whole = (hi - start) // per
        first, stop = start // per, start + per * whole
        if bits == 4:
            _decode_pairs(codes[first : first + whole], out[start:stop], centre, d)
        else:
            _decode_quads(codes[first : first + whole], out[start:stop], centre, d)
        _decode_single(codes, out, lo, start, centre, d, bits)
        _decode_single(codes, out, stop, hi, centre, d, bits)


def qsgd_encode(
    x: np.ndarray, scale: np.ndarray | None, seed: int, bucket: int, bits: int, nearest: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Packed codes and per-bucket scales of float32 ``x`` (``scale`` given: used as it is);
    stochastic rounding with ``seed``, or to the nearest level."""
    n = x.size
    if bucket % (8 // bits):
        raise ValueError(f"fused {bits}-bit encode needs buckets of whole bytes")
    nb = -(-n // bucket)
    given = scale is not None
    scales = scale if given else np.empty(nb, dtype=np.float32)
    out = np.empty((n * bits + 7) // 8, dtype=np.uint8)
    _encode(x, scales, out, sfc64_state(seed), bucket, bits, given, nearest)
    return out, scales


def qsgd_decode(
    codes: np.ndarray, spacing: np.ndarray, out: np.ndarray, bucket: int, bits: int, centre: float
) -> None:
    """``(code - centre) * spacing[bucket]`` into float32 ``out``, codes packed ``bits`` (8, 4 or 2) wide."""
    if bits == 8:
        _decode8(codes, spacing, out, bucket, np.float32(centre))
    else:
        _decode_packed(codes, spacing, out, bucket, np.float32(centre), bits)


@numba.njit(cache=True, nogil=True)
def randk_gather(x, idx, out):
    """``out[i] = x[idx[i]]``."""
    for i in range(idx.size):
        out[i] = x[idx[i]]


@numba.njit(cache=True, nogil=True)
def randk_scatter(values, idx, gain, out):
    """``out[idx[i]] = values[i] * gain`` (float32)."""
    g = np.float32(gain)
    for i in range(idx.size):
        out[idx[i]] = values[i] * g


@numba.njit(cache=True, nogil=True)
def block_positions(starts, block, offset, n, out):
    """The first ``out.size`` positions of the runs ``[s, s + block)`` (``starts`` increasing), each
    moved by ``offset`` modulo ``n``, in increasing order: those that wrap past ``n`` come first."""
    k = out.size
    lo, hi = 0, k  # the first j whose position reaches n - offset
    while lo < hi:
        mid = (lo + hi) // 2
        if starts[mid // block] + mid % block < n - offset:
            lo = mid + 1
        else:
            hi = mid
    for j in range(k):
        p = starts[j // block] + j % block
        if j < lo:
            out[k - lo + j] = p + offset
        else:
            out[j - lo] = p + offset - n


@numba.njit(cache=True, nogil=True)
def compensate_delayed(x, residual, velocity, momentum, accumulation, decayed, y):
    """``accumulation = x + residual``, ``decayed = momentum * velocity`` and ``y = accumulation +
    decayed``, each rounded to float32 as torch's separate operations round them, in one pass."""
    m = np.float32(momentum)
    for i in range(x.size):
        a = x[i] + residual[i]
        d = m * velocity[i]
        accumulation[i] = a
        decayed[i] = d
        y[i] = a + d


@numba.njit(cache=True, nogil=True)
def sent_update(y, arrived, sent, residual, velocity, before):
    """At each coordinate ``i = sent[j]`` (distinct): ``residual[i] = y[i] - arrived[j]``,
    ``before[j] = velocity[i]`` (where ``before`` has room) and then ``velocity[i] = arrived[j]``."""
    keep = before.size > 0
    for j in range(sent.size):
        i = sent[j]
        a = arrived[j]
        residual[i] = y[i] - a
        if keep:
            before[j] = velocity[i]
        velocity[i] = a


@numba.njit(cache=True, nogil=True)
def sorted_unique(logs, n, out):
    """The distinct sorted draws of ``sampling._sorted_draws`` from ``logs[i] = log1p(-U_i)``
    (``m + 1`` values): ``min(floor(S_j * (n / S_{m+1})), n - 1)`` for ``j <= m``, where ``S`` sums
    ``-logs`` one term at a time from 0 (as torch's cumsum does) and ``n / S`` is taken as torch's
    ``reciprocal(S) * n``. Writes them, without repeats, to int64 ``out[:m]``; returns their count."""
    m = logs.size - 1
    total = 0.0
    for i in range(m + 1):
        total += -logs[i]
    scale = (1.0 / total) * n
    top = n - 1
    s = 0.0
    count = 0
    last = -1
    for i in range(m):
        s += -logs[i]
        v = np.int64(min(np.floor(s * scale), top))
        if v != last:
            out[count] = v
            count += 1
            last = v
    return count
