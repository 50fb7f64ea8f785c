"""Bit packing: every width round-trips and takes exactly ceil(n * bits / 8) bytes."""

from __future__ import annotations

import pytest
import torch

from adass.codecs import bits_for, pack_bits, packed_nbytes, unpack_bits


@pytest.mark.parametrize("bits", [*range(1, 25), 32, 40, 55, 56])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1001])
def test_round_trip_every_width(bits: int, n: int) -> None:
    gen = torch.Generator().manual_seed(bits * 1000 + n)
    codes = torch.randint(0, 2**bits, (n,), generator=gen, dtype=torch.int64)
    if n:
        codes[0] = 2**bits - 1  # the largest code must survive
    packed = pack_bits(codes, bits)
    assert packed.dtype == torch.uint8
    assert packed.numel() == packed_nbytes(n, bits) == -(-n * bits // 8)
    assert torch.equal(unpack_bits(packed, bits, n), codes)


def test_layout_is_lsb_first() -> None:
    # two 4-bit codes per byte, the first in the low nibble
    assert pack_bits(torch.tensor([1, 2, 15]), 4).tolist() == [0x21, 0x0F]
    # 1-bit codes fill a byte from bit 0 upwards
    assert pack_bits(torch.tensor([1, 0, 0, 0, 0, 0, 0, 1, 1]), 1).tolist() == [0x81, 0x01]


def test_bits_for() -> None:
    assert [bits_for(v) for v in (0, 1, 2, 3, 4, 255, 256)] == [1, 1, 2, 2, 3, 8, 9]


def test_bad_width_and_short_buffer_fail() -> None:
    with pytest.raises(ValueError, match="bits=0"):
        pack_bits(torch.tensor([0]), 0)
    with pytest.raises(ValueError, match="cannot hold"):
        unpack_bits(torch.zeros(1, dtype=torch.uint8), 4, 3)
