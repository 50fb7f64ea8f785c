"""Bit packing: every width round-trips and takes exactly ceil(n * bits / 8) bytes."""

from __future__ import annotations

import pytest
import torch

from adass.codecs import bits_for, pack_bits, packed_nbytes, unpack_bits
from adass.codecs.packing import code_dtype, pack_bits_reference


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


@pytest.mark.parametrize("bits", [*range(1, 25), 31, 32, 40, 56])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 24, 1001])
def test_group_packing_matches_the_per_code_reference(bits: int, n: int) -> None:
    gen = torch.Generator().manual_seed(bits + 100 * n)
    codes = torch.randint(0, 2**bits, (n,), generator=gen, dtype=torch.int64)
    narrow = code_dtype(bits)
    packed = pack_bits(codes.to(narrow), bits)
    assert torch.equal(packed, pack_bits_reference(codes, bits))
    assert torch.equal(pack_bits(codes, bits), packed)  # any wide enough dtype, same bytes
    back = unpack_bits(packed, bits, n, dtype=narrow)
    assert back.dtype == narrow and torch.equal(back.long(), codes)


def test_code_dtype_is_the_narrowest_that_holds() -> None:
    assert [code_dtype(b) for b in (1, 8, 9, 15, 16, 31, 32, 56)] == [
        torch.uint8, torch.uint8, torch.int16, torch.int16,
        torch.int32, torch.int32, torch.int64, torch.int64,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="cannot hold codes of 16 bits"):
        unpack_bits(torch.zeros(4, dtype=torch.uint8), 16, 2, dtype=torch.int16)


def test_unpack_reads_a_view_into_a_larger_buffer() -> None:
    codes = torch.arange(100) % 2**6
    buffer = torch.cat([torch.full((3,), 0xFF, dtype=torch.uint8), pack_bits(codes, 6)])
    assert torch.equal(unpack_bits(buffer[3:], 6, 100), codes)
