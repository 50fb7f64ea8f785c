"""Fused numba loops for a ring hop: QSGD requantize (decode, add the own share, encode again, one
bucket at a time) and the shared-scale sum of two packed code streams.

Requantize decodes a bucket of the received partial sum into a bucket-sized scratch (still in the
L1 cache when it is read again), adds this rank's share with one fused multiply-add, as torch's
vectorised ``add_(x, alpha=w)`` does on CPUs with FMA, and encodes the scratch with the encode
loop of ``fused.py``: the same float32 operations in the same order as the reference
``Codec.requantize``, so the payload is bit-identical. The code sum reads and writes bit streams
up to 16 bits wide (``packing.py``'s layout, least significant bit first) eight codes at a time,
which fill a whole number of bytes, without unpacking them to whole tensors first.
"""

from __future__ import annotations

import numba
import numpy as np

from .fused import _encode_bucket, _fma32, _max_abs, sfc64_state

__all__ = ["add_codes", "qsgd_requantize"]


@numba.njit(cache=True, nogil=True)
def _decode_add(codes, lo, d, centre, x, weight, bits, tmp):
    """``tmp[i] = fma(x[i], weight, (code[lo + i] - centre) * d)`` for the bucket of ``x``."""
    if bits == 8:
        for i in range(x.size):
            v = (np.float32(codes[lo + i]) - centre) * d
            tmp[i] = _fma32(x[i], weight, v)
    elif bits == 2:  # four codes a byte, lowest bits first
        mask = np.uint8(3)
        for i in range(x.size):
            j = lo + i
            c = (codes[j >> 2] >> np.uint8(2 * (j & 3))) & mask
            tmp[i] = _fma32(x[i], weight, (np.float32(c) - centre) * d)
    else:  # 4 bits: buckets are even, so this one starts on a byte; both nibbles of a byte at once
        mask, base = np.uint8(15), lo >> 1
        for j in range(x.size >> 1):
            c = codes[base + j]
            low = (np.float32(c & mask) - centre) * d
            high = (np.float32(c >> np.uint8(4)) - centre) * d
            tmp[2 * j] = _fma32(x[2 * j], weight, low)
            tmp[2 * j + 1] = _fma32(x[2 * j + 1], weight, high)
        if x.size & 1:  # the chunk's last value, in a low nibble
            i = x.size - 1
            tmp[i] = _fma32(x[i], weight, (np.float32(codes[base + (i >> 1)] & mask) - centre) * d)


@numba.njit(cache=True, nogil=True)
def _requantize(codes, spacing, x, weight, scale, out, state, bucket, bits, centre, nearest):
    """Decode ``codes`` (``bits`` wide, one spacing per bucket), add ``x * weight``, and encode the
    sum into ``out`` and ``scale``, bucket by bucket (``nearest``: to the nearest level)."""
    n = x.size
    tmp = np.empty(bucket, dtype=np.float32)
    words = np.empty((bucket + 7) // 4 + 1, dtype=np.uint64)
    level = np.zeros(bucket + 3, dtype=np.uint8)
    last = np.zeros(1, dtype=np.uint64)
    for b in range((n + bucket - 1) // bucket):
        lo = b * bucket
        hi = min(lo + bucket, n)
        sums = tmp[: hi - lo]
        _decode_add(codes, lo, spacing[b], centre, x[lo:hi], weight, bits, sums)
        m = _max_abs(sums)
        scale[b] = m
        _encode_bucket(sums, lo, m, out, state, last, words, level, bits, nearest)


def qsgd_requantize(
    codes: np.ndarray,
    spacing: np.ndarray,
    x: np.ndarray,
    weight: float,
    seed: int,
    bucket: int,
    bits: int,
    centre: float,
    nearest: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Packed codes and bucket scales of ``decode(codes) + x * weight``, encoded with ``seed`` (or
    rounded to the nearest level).

    ``codes``: the received payload's codes, ``bits`` (8, 4 or 2) wide, the width it is encoded with
    too; ``spacing``: its per-bucket level spacing (float32); ``centre``: the level of zero.
    """
    n = x.size
    if bucket % (8 // bits):
        raise ValueError(f"fused {bits}-bit requantize needs buckets of whole bytes")
    scales = np.empty(-(-n // bucket), dtype=np.float32)
    out = np.empty((n * bits + 7) // 8, dtype=np.uint8)
    _requantize(
        codes, spacing, x, np.float32(weight), scales, out, sfc64_state(seed), bucket, bits,
        np.float32(centre), nearest,
    )  # fmt: skip
    return out, scales


@numba.njit(cache=True, nogil=True, inline="always")
def _load_group(stream, at, width):
    """The ``width`` bytes from ``at`` (eight codes of ``width`` bits) as a 128-bit ``(lo, hi)``."""
    lo = hi = np.uint64(0)
    for k in range(min(width, 8)):
        lo |= np.uint64(stream[at + k]) << np.uint64(8 * k)
    for k in range(8, width):
        hi |= np.uint64(stream[at + k]) << np.uint64(8 * (k - 8))
    return lo, hi


@numba.njit(cache=True, nogil=True, inline="always")
def _code(lo, hi, j, width, mask):
    """Code ``j`` of a group of eight ``width``-bit codes held in ``(lo, hi)``."""
    s = j * width
    if s >= 64:
        return (hi >> np.uint64(s - 64)) & mask
    if s + width <= 64:
        return (lo >> np.uint64(s)) & mask
    return ((lo >> np.uint64(s)) | (hi << np.uint64(64 - s))) & mask


@numba.njit(cache=True, nogil=True)
def _add_groups(a, wa, b, wb, out, wo, groups):
    """The first ``groups`` groups of eight codes: eight codes of width ``w`` fill exactly ``w``
    bytes, so every group of every stream starts on a byte and is read and written whole."""
    one = np.uint64(1)
    mask_a, mask_b = (one << np.uint64(wa)) - one, (one << np.uint64(wb)) - one
    for g in range(groups):
        alo, ahi = _load_group(a, g * wa, wa)
        blo, bhi = _load_group(b, g * wb, wb)
        olo = ohi = np.uint64(0)
        for j in range(8):
            v = _code(alo, ahi, j, wa, mask_a) + _code(blo, bhi, j, wb, mask_b)
            s = j * wo
            if s >= 64:
                ohi |= v << np.uint64(s - 64)
            elif s + wo <= 64:
                olo |= v << np.uint64(s)
            else:
                olo |= v << np.uint64(s)
                ohi |= v >> np.uint64(64 - s)
        at = g * wo
        for k in range(min(wo, 8)):
            out[at + k] = np.uint8((olo >> np.uint64(8 * k)) & np.uint64(255))
        for k in range(8, wo):
            out[at + k] = np.uint8((ohi >> np.uint64(8 * (k - 8))) & np.uint64(255))


GROUP_WIDTH_MAX = 16  # a group of eight codes fits 128 bits


def add_codes(a: np.ndarray, wa: int, b: np.ndarray, wb: int, wo: int, n: int) -> np.ndarray:
    """The ``n`` sums of two packed code streams (widths ``wa`` and ``wb``), packed ``wo`` wide.

    ``wo`` must hold every sum; widths 1 to 16. The last, partial group of eight codes is summed
    from zero-padded copies.
    """
    if max(wa, wb, wo) > GROUP_WIDTH_MAX:
        raise ValueError(f"fused code sums take widths up to {GROUP_WIDTH_MAX}; got {wa}, {wb}, {wo}")
    out = np.empty((n * wo + 7) // 8, dtype=np.uint8)
    whole = n // 8
    _add_groups(a, wa, b, wb, out, wo, whole)
    if n > 8 * whole:  # the bytes left, padded to one group (the padding codes add to zero)
        tails = []
        for stream, width in ((a, wa), (b, wb)):
            tail = np.zeros(width, dtype=np.uint8)
            used = (n * width + 7) // 8 - whole * width
            tail[:used] = stream[whole * width : whole * width + used]
            tails.append(tail)
        last = np.zeros(wo, dtype=np.uint8)
        _add_groups(tails[0], wa, tails[1], wb, last, wo, 1)
        out[whole * wo :] = last[: out.size - whole * wo]
    return out
