"""Bit packing: unsigned integer codes of any width from 1 to 56 bits, packed densely into bytes.

Layout: code ``i`` occupies bits ``[i*w, (i+1)*w)`` of the byte stream, least significant bit first
(bit ``j`` of the stream is bit ``j % 8`` of byte ``j // 8``), so two 4-bit codes share a byte with
the first in the low nibble. The last byte is zero-padded. ``n`` codes of width ``w`` take exactly
``ceil(n * w / 8)`` bytes.
"""

from __future__ import annotations

import torch

__all__ = ["MAX_BITS", "bits_for", "pack_bits", "packed_nbytes", "unpack_bits"]

MAX_BITS = 56  # a code shifted by up to 7 bits must still fit an int64


def packed_nbytes(n: int, bits: int) -> int:
    """Bytes that ``n`` codes of width ``bits`` take: ``ceil(n * bits / 8)``."""
    return (n * bits + 7) // 8


def bits_for(max_value: int) -> int:
    """Smallest width (at least 1) that holds every integer in ``[0, max_value]``."""
    return max(1, int(max_value).bit_length())


def _check(bits: int) -> None:
    if not 1 <= bits <= MAX_BITS:
        raise ValueError(f"bits={bits} is not allowed; expected an integer in [1, {MAX_BITS}]")


def pack_bits(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack non-negative integer ``codes`` (1-D, each < 2**bits) into a uint8 tensor.

    Parameters
    ----------
    codes : Tensor
        1-D integer tensor with values in ``[0, 2**bits)``.
    bits : int
        Width of each code, 1..56.

    Returns
    -------
    Tensor
        uint8 tensor of ``packed_nbytes(len(codes), bits)`` bytes.
    """
    _check(bits)
    codes = codes.reshape(-1).to(torch.int64)
    n = codes.numel()
    nbytes = packed_nbytes(n, bits)
    if bits == 8:
        return codes.to(torch.uint8)
    if 8 % bits == 0:  # 1, 2, 4: whole codes per byte, same layout without the scatter
        per = 8 // bits
        padded = torch.zeros(nbytes * per, dtype=torch.int64, device=codes.device)
        padded[:n] = codes
        shifts = torch.arange(per, device=codes.device, dtype=torch.int64) * bits
        return (padded.view(nbytes, per) << shifts).sum(dim=1).to(torch.uint8)
    offsets = torch.arange(n, device=codes.device, dtype=torch.int64) * bits
    first = offsets // 8  # byte where each code starts
    shifted = codes << (offsets % 8)  # the code placed at its bit position within that byte
    span = (bits + 7 + 7) // 8  # bytes one shifted code can touch
    out = torch.zeros(nbytes + span, dtype=torch.int64, device=codes.device)
    for j in range(span):
        # codes never overlap, so adding their bytes is the same as OR-ing them
        out.index_add_(0, first + j, (shifted >> (8 * j)) & 0xFF)
    return out[:nbytes].to(torch.uint8)


def unpack_bits(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """Inverse of :func:`pack_bits`: the first ``n`` codes of width ``bits`` as int64."""
    _check(bits)
    if packed.numel() < packed_nbytes(n, bits):
        raise ValueError(
            f"{packed.numel()} bytes cannot hold {n} codes of {bits} bits "
            f"({packed_nbytes(n, bits)} needed)"
        )
    if bits == 8:
        return packed[:n].to(torch.int64)
    if 8 % bits == 0:
        per = 8 // bits
        shifts = torch.arange(per, device=packed.device, dtype=torch.int64) * bits
        nbytes = packed_nbytes(n, bits)
        whole = (packed[:nbytes].to(torch.int64)[:, None] >> shifts) & ((1 << bits) - 1)
        return whole.reshape(-1)[:n]
    span = (bits + 7 + 7) // 8
    stream = torch.zeros(packed.numel() + span, dtype=torch.int64, device=packed.device)
    stream[: packed.numel()] = packed.to(torch.int64)
    offsets = torch.arange(n, device=packed.device, dtype=torch.int64) * bits
    first = offsets // 8
    word = torch.zeros(n, dtype=torch.int64, device=packed.device)
    for j in range(span):
        word |= stream[first + j] << (8 * j)
    return (word >> (offsets % 8)) & ((1 << bits) - 1)
