"""Dense float codecs: fp32 exact, fp16/bf16 within half-precision rounding, sums in fp32."""

from __future__ import annotations

import pytest
import torch
from codec_cases import chunk

from adass.codecs import ChunkKey, make_codec

LENGTHS = [0, 1, 2, 513, 10_000]


@pytest.mark.parametrize("n", LENGTHS)
def test_fp32_is_lossless(n: int) -> None:
    codec = make_codec("fp32")
    x = chunk(n)
    payload = codec.encode(x, ChunkKey(0, 0, 0))
    assert codec.traits.lossless and codec.traits.summable
    assert torch.equal(codec.decode(payload), x)
    assert payload.nbytes == 4 * n == payload.raw_bytes


@pytest.mark.parametrize("spec,rel", [("fp16", 2**-11), ("bf16", 2**-8)])
@pytest.mark.parametrize("n", LENGTHS)
def test_half_round_trip_within_one_rounding(spec: str, rel: float, n: int) -> None:
    codec = make_codec(spec)
    x = chunk(n).clamp(-1e4, 1e4)  # fp16 overflows beyond 65504
    payload = codec.encode(x, ChunkKey(0, 0, 0))
    out = codec.decode(payload)
    assert out.dtype == torch.float32 and out.shape == x.shape
    assert not codec.traits.lossless
    # round to nearest: relative error at most half an ulp (2**-11 for fp16, 2**-8 for bf16)
    assert torch.all((out - x).abs() <= rel * x.abs() + 1e-7)
    assert payload.nbytes == 2 * n


@pytest.mark.parametrize("spec", ["fp32", "fp16", "bf16"])
def test_add_sums_in_fp32_then_rounds_once(spec: str) -> None:
    codec = make_codec(spec)
    a, b = chunk(1000, 1), chunk(1000, 2)
    pa, pb = codec.encode(a, ChunkKey(0, 0, 0)), codec.encode(b, ChunkKey(0, 0, 0))
    expected = (codec.decode(pa) + codec.decode(pb)).to(codec.dtype).to(torch.float32)
    assert torch.equal(codec.decode(codec.add(pa, pb)), expected)


def test_payload_does_not_alias_input_or_output() -> None:
    codec = make_codec("fp32")
    x = chunk(10)
    payload = codec.encode(x, ChunkKey(0, 0, 0))
    x.zero_()
    out = codec.decode(payload)
    out.zero_()
    assert codec.decode(payload).abs().sum() > 0
