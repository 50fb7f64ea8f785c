"""Bit packing: unsigned integer codes of any width from 1 to 56 bits, packed densely into bytes.

Layout: code ``i`` occupies bits ``[i*w, (i+1)*w)`` of the byte stream, least significant bit first
(bit ``j`` of the stream is bit ``j % 8`` of byte ``j // 8``), so two 4-bit codes share a byte with
the first in the low nibble. The last byte is zero-padded. ``n`` codes of width ``w`` take exactly
``ceil(n * w / 8)`` bytes.

How. A group of ``g = 8 / gcd(w, 8)`` codes fills ``g*w/8`` whole bytes (two 4-bit codes one byte,
eight 11-bit codes eleven bytes), and every group has the same layout. So a tensor of codes is
viewed as ``(groups, g)`` and its bytes as ``(groups, g*w/8)``, and each byte column is built from
the few code columns that touch it, by shifts and masks over whole columns: no per-code index
arithmetic, and codes up to 8 bits never leave uint8. :func:`pack_bits_reference` is the plain
per-code version of the same layout, kept to explain it and to test the fast one against.
"""

from __future__ import annotations

import math
from functools import cache

import torch

__all__ = [
    "MAX_BITS",
    "bits_for",
    "code_dtype",
    "pack_bits",
    "pack_bits_reference",
    "packed_nbytes",
    "unpack_bits",
]

MAX_BITS = 56  # a code shifted by up to 7 bits must still fit an int64

# (code j, first code bit, byte b, first byte bit, bit count): bits [cb, cb+nb) of code j of a group
# are bits [bb, bb+nb) of byte b of that group
_Piece = tuple[int, int, int, int, int]


def packed_nbytes(n: int, bits: int) -> int:
    """Bytes that ``n`` codes of width ``bits`` take: ``ceil(n * bits / 8)``."""
    return (n * bits + 7) // 8


def bits_for(max_value: int) -> int:
    """Smallest width (at least 1) that holds every integer in ``[0, max_value]``."""
    return max(1, int(max_value).bit_length())


def code_dtype(bits: int) -> torch.dtype:
    """The narrowest torch integer dtype that holds every code of width ``bits``."""
    if bits <= 8:
        return torch.uint8
    if bits <= 15:
        return torch.int16
    return torch.int32 if bits <= 31 else torch.int64


def _holds(dtype: torch.dtype, bits: int) -> bool:
    """Whether integer ``dtype`` holds every unsigned ``bits``-wide code."""
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex:
        return False
    return dtype.itemsize * 8 - int(dtype.is_signed) >= bits


def _check(bits: int) -> None:
    if not 1 <= bits <= MAX_BITS:
        raise ValueError(f"bits={bits} is not allowed; expected an integer in [1, {MAX_BITS}]")


@cache
def _layout(bits: int) -> tuple[int, int, tuple[_Piece, ...]]:
    """Codes per group, bytes per group, and where each code's bits go within a group."""
    group = 8 // math.gcd(bits, 8)
    pieces = []
    for j in range(group):
        start, end = j * bits, (j + 1) * bits
        at = start
        while at < end:  # split code j at byte boundaries
            count = min(8 - at % 8, end - at)
            pieces.append((j, at - start, at // 8, at % 8, count))
            at += count
    return group, group * bits // 8, tuple(pieces)


def _pack_groups(codes: torch.Tensor, out: torch.Tensor, bits: int) -> None:
    """Fill ``out`` (uint8 ``(m, bytes per group)``) from ``codes`` (``(m, group)``)."""
    _, nbytes, pieces = _layout(bits)
    for b in range(nbytes):
        column = None
        for j, code_bit, byte, byte_bit, count in pieces:
            if byte != b:
                continue
            part = codes[:, j]
            if code_bit:
                part = part >> code_bit
            if code_bit + count < bits:  # higher code bits belong to later bytes
                part = part & ((1 << count) - 1)
            part = part.to(torch.uint8)
            if byte_bit:
                part = part << byte_bit
            column = part if column is None else column | part
        out[:, b] = column


def _unpack_groups(packed: torch.Tensor, out: torch.Tensor, bits: int) -> None:
    """Fill ``out`` (``(m, group)``, the codes' dtype) from ``packed`` (uint8 ``(m, bytes)``)."""
    group, _, pieces = _layout(bits)
    for j in range(group):
        code = None
        for jj, code_bit, byte, byte_bit, count in pieces:
            if jj != j:
                continue
            part = packed[:, byte]
            if byte_bit:
                part = part >> byte_bit
            if byte_bit + count < 8:  # higher byte bits belong to the next code
                part = part & ((1 << count) - 1)
            part = part.to(out.dtype)
            if code_bit:
                part = part << code_bit
            code = part if code is None else code | part
        out[:, j] = code


def pack_bits(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack non-negative integer ``codes`` (1-D, each < 2**bits) into a uint8 tensor.

    Parameters
    ----------
    codes : Tensor
        1-D integer tensor with values in ``[0, 2**bits)``, of any integer dtype wide enough
        (``code_dtype(bits)`` is the cheapest).
    bits : int
        Width of each code, 1..56.

    Returns
    -------
    Tensor
        uint8 tensor of ``packed_nbytes(len(codes), bits)`` bytes (for ``bits=8``, uint8 input is
        returned as it is).
    """
    _check(bits)
    codes = codes.reshape(-1)
    if not _holds(codes.dtype, bits):
        codes = codes.to(torch.int64)
    if bits == 8:
        return codes.to(torch.uint8)
    group, nbytes, _ = _layout(bits)
    n = codes.numel()
    whole = n // group
    out = torch.empty(packed_nbytes(n, bits), dtype=torch.uint8, device=codes.device)
    if whole:
        body = out[: whole * nbytes].view(whole, nbytes)
        _pack_groups(codes[: whole * group].view(whole, group), body, bits)
    if n > whole * group:  # the last, partial group: zero-padded, then trimmed
        tail = codes.new_zeros(1, group)
        tail[0, : n - whole * group] = codes[whole * group :]
        last = torch.empty(1, nbytes, dtype=torch.uint8, device=codes.device)
        _pack_groups(tail, last, bits)
        out[whole * nbytes :] = last[0, : out.numel() - whole * nbytes]
    return out


def unpack_bits(packed: torch.Tensor, bits: int, n: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Inverse of :func:`pack_bits`: the first ``n`` codes of width ``bits``, as ``dtype``.

    ``dtype`` must hold ``bits``-wide codes (``code_dtype(bits)`` is the narrowest, and for
    ``bits=8`` returns a view of ``packed``); int64 by default.
    """
    _check(bits)
    if packed.numel() < packed_nbytes(n, bits):
        raise ValueError(
            f"{packed.numel()} bytes cannot hold {n} codes of {bits} bits ({packed_nbytes(n, bits)} needed)"
        )
    if not _holds(dtype, bits):
        raise ValueError(f"dtype {dtype} cannot hold codes of {bits} bits")
    packed = packed.reshape(-1)
    if bits == 8:
        return packed[:n].to(dtype)
    group, nbytes, _ = _layout(bits)
    whole = n // group
    out = torch.empty(n, dtype=dtype, device=packed.device)
    if whole:
        body = packed[: whole * nbytes].contiguous().view(whole, nbytes)
        _unpack_groups(body, out[: whole * group].view(whole, group), bits)
    if n > whole * group:
        last = packed.new_zeros(1, nbytes)
        used = packed_nbytes(n, bits) - whole * nbytes
        last[0, :used] = packed[whole * nbytes : whole * nbytes + used]
        tail = torch.empty(1, group, dtype=dtype, device=packed.device)
        _unpack_groups(last, tail, bits)
        out[whole * group :] = tail[0, : n - whole * group]
    return out


def pack_bits_reference(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """The same bytes as :func:`pack_bits`, placing each code at bit offset ``i * bits`` in turn.

    Slower (int64 offsets for every code); it states the layout directly.
    """
    _check(bits)
    codes = codes.reshape(-1).to(torch.int64)
    n = codes.numel()
    offsets = torch.arange(n, device=codes.device, dtype=torch.int64) * bits
    shifted = codes << (offsets % 8)  # the code placed at its bit position within its first byte
    span = (bits + 7 + 7) // 8  # bytes one shifted code can touch
    out = torch.zeros(packed_nbytes(n, bits) + span, dtype=torch.int64, device=codes.device)
    for j in range(span):
        # codes never overlap, so adding their bytes is the same as OR-ing them
        out.index_add_(0, offsets // 8 + j, (shifted >> (8 * j)) & 0xFF)
    return out[: packed_nbytes(n, bits)].to(torch.uint8)
