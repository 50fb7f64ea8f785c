"""The fused ring-hop kernels (QSGD requantize, shared-scale code sums) give the reference's bits."""

from __future__ import annotations

import pytest
import torch
from codec_cases import raw_bytes, reference_and_fused

from adass.codecs import ChunkKey, kernels, make_codec

pytestmark = pytest.mark.skipif(not kernels.available(), reason="numba does not import")

REQUANTIZE = ["qsgd:bits=8", "qsgd:bits=4", "qsgd:bits=8,bucket=7", "qsgd:bits=4,bucket=6",
              "qsgd:bits=4,bucket=7", "qsgd:bits=2", "qsgd:bits=8,rounding=nearest",
              "qsgd:bits=4,bucket=6,rounding=nearest", "qsgd:bits=2,bucket=8", "qsgd:bits=2,bucket=6",
              "qsgd:bits=2,bucket=12,rounding=nearest"]  # fmt: skip
LENGTHS = [0, 1, 2, 3, 5, 7, 511, 512, 513, 1537, 40_001]
KINDS = ["randn", "zero", "zero share", "zero buckets"]


def _chunk(n: int, seed: int, kind: str) -> torch.Tensor:
    x = torch.randn(n, generator=torch.Generator().manual_seed(seed)) * 3
    if kind == "zero":
        return torch.zeros(n)
    if kind == "zero buckets":  # whole zero buckets between nonzero ones
        x[: min(n, 600)] = 0.0
    return x


def _same(a, b, label) -> None:
    assert a.header == b.header and a.numel == b.numel, label
    assert a.tensors.keys() == b.tensors.keys(), label
    for name in a.tensors:
        assert torch.equal(raw_bytes(a.tensors[name]), raw_bytes(b.tensors[name])), (label, name)


@pytest.mark.parametrize("spec", REQUANTIZE)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("weight", [1.0, 0.25, 1 / 3])
def test_fused_requantize_gives_the_reference_payload(spec, kind, weight):
    both = {k: make_codec(spec, k) for k in kernels.KERNELS}
    for n in LENGTHS:
        received = both["reference"].encode(
            _chunk(n, n, "zero" if kind == "zero" else "randn"), ChunkKey(1, 2, n)
        )
        x = torch.zeros(n) if kind == "zero share" else _chunk(n, n + 1, kind)
        key = ChunkKey(1, 2, n, rank=3, hop=1)
        ref, fused = reference_and_fused(
            lambda kind, r=received, x=x, k=key: both[kind].requantize(r, x, k, weight)
        )
        _same(ref, fused, (spec, kind, weight, n))


def test_requantize_is_decode_add_encode():
    codec = make_codec("qsgd:bits=8")
    x, y = _chunk(1000, 1, "randn"), _chunk(1000, 2, "randn")
    received, key = codec.encode(x, ChunkKey(0, 0, 0)), ChunkKey(0, 0, 0, rank=1, hop=1)
    total = codec.decode(received)
    total.add_(y, alpha=0.5)
    _same(codec.requantize(received, y, key, 0.5), codec.encode(total, key), "decode-add-encode")


@pytest.mark.parametrize("spec", ["qsgd:bits=8,shared=true", "qsgd:bits=4,shared=true",
                                  "qsgd:bits=3,shared=true,bucket=5", "qsgd:bits=16,shared=true"])  # fmt: skip
@pytest.mark.parametrize("kind", ["randn", "zero", "zero buckets"])
def test_fused_code_sums_give_the_reference_payload(spec, kind):
    both = {k: make_codec(spec, k) for k in kernels.KERNELS}
    codec = both["reference"]
    for n in LENGTHS:
        xs = [_chunk(n, n + r, kind) for r in range(5)]
        scale = torch.stack([codec.local_scale(x) for x in xs]).amax(0) if n else torch.zeros(0)

        def ring_sum(kind, c=codec, xs=xs, scale=scale, n=n):
            parts = [c.encode(x, ChunkKey(0, 1, n, rank=r), scale=scale) for r, x in enumerate(xs)]
            total, sums = parts[0], []
            for part in parts[1:]:  # widths grow as counts do: 8+8, 9+8, ...
                total = both[kind].add(total, part)
                sums.append(total)
            return sums

        ref, fused = reference_and_fused(ring_sum)
        for k, (a, b) in enumerate(zip(ref, fused, strict=True)):
            _same(a, b, (spec, kind, n, k))
