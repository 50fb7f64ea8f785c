"""The fused codec kernels give the reference's payloads bit for bit, and each codec keeps the kernels
it was built with."""

from __future__ import annotations

import pytest
import torch
from codec_cases import raw_bytes, reference_and_fused

from adass.codecs import ChunkKey, kernels, make_codec
from adass.codecs.coordinates import distinct_sample
from adass.memory import build_pair

pytestmark = pytest.mark.skipif(not kernels.available(), reason="numba does not import")

QSGD = ["qsgd:bits=8", "qsgd:bits=4", "qsgd:bits=8,bucket=7", "qsgd:bits=4,bucket=6",
        "qsgd:bits=4,bucket=7", "qsgd:bits=8,shared=true", "qsgd:bits=2", "qsgd:bits=8,rounding=nearest",
        "qsgd:bits=4,bucket=6,rounding=nearest", "qsgd:bits=8,shared=true,rounding=nearest",
        "qsgd:bits=2,bucket=8", "qsgd:bits=2,bucket=6", "qsgd:bits=2,bucket=12,rounding=nearest", "qsgd:bits=2,shared=true"]  # fmt: skip
LENGTHS = [0, 1, 2, 3, 5, 7, 511, 512, 513, 1537, 40_001]


def _chunk(n: int, kind: str) -> torch.Tensor:
    x = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 3
    if kind == "zero":
        return torch.zeros(n)
    if kind == "negative zero":
        return -torch.zeros(n)
    if kind == "zero buckets":  # whole zero buckets (signed both ways) between nonzero ones
        x[: min(n, 600)] = 0.0
        x[min(n, 1024) : min(n, 1100)] = -0.0
    return x


@pytest.mark.parametrize("spec", QSGD)
@pytest.mark.parametrize("kind", ["randn", "zero", "negative zero", "zero buckets"])
def test_fused_qsgd_payloads_and_decodes_are_the_referenceraw_bytes(spec, kind):
    codec = make_codec(spec, "reference")
    both = {"reference": codec, "fused": make_codec(spec, "fused")}
    for n in LENGTHS:
        x = _chunk(n, kind)
        key = ChunkKey(3, 5, n, rank=1, hop=2)
        # shared mode: an agreed scale above some buckets' own and below others' (values clipped)
        factor = torch.tensor([1.25, 0.5]).repeat(codec.buckets(n))[: codec.buckets(n)]
        scale = codec.local_scale(x) * factor if codec.shared else None
        ref, fused = reference_and_fused(lambda k, x=x, key=key, s=scale: both[k].encode(x, key, scale=s))
        assert ref.header == fused.header
        for name in ref.tensors:
            assert torch.equal(raw_bytes(ref.tensors[name]), raw_bytes(fused.tensors[name])), (
                spec,
                kind,
                n,
                name,
            )
        decoded = reference_and_fused(lambda k, p=ref: both[k].decode(p))
        assert torch.equal(raw_bytes(decoded[0]), raw_bytes(decoded[1])), (spec, kind, n)
        out = torch.empty(n)
        both["fused"].decode_into(ref, out)
        assert torch.equal(raw_bytes(out), raw_bytes(decoded[0]))


@pytest.mark.parametrize("n", [1, 2, 3, 99, 1000, 40_001])
def test_fused_random_k_gathers_and_scatters_the_reference_values(n):
    both = {k: make_codec("randk:ratio=0.3", k) for k in kernels.KERNELS}
    x = _chunk(n, "randn")
    key = ChunkKey(1, 2, 3)
    ref, fused = reference_and_fused(lambda k: both[k].encode(x, key))
    assert torch.equal(raw_bytes(ref.tensors["values"]), raw_bytes(fused.tensors["values"]))
    decoded = reference_and_fused(lambda k: both[k].decode(ref))
    assert torch.equal(raw_bytes(decoded[0]), raw_bytes(decoded[1]))


@pytest.mark.parametrize(
    "n,k,first_draws",
    [(1, 1, None), (2, 1, None), (10, 3, None), (1000, 10, None), (1000, 499, None), (1000, 600, None),
     (625_000, 6250, None), (1 << 20, 3, None), (3_000_000_000, 5, None),
     (5000, 2000, 1), (100_000, 1000, 7)],  # the last two: short first rounds, topped up
)  # fmt: skip
def test_fused_draws_choose_the_reference_coordinates(n, k, first_draws):
    for seed in range(12):
        ref, fused = reference_and_fused(
            lambda kind, s=seed: distinct_sample(
                n, k, torch.Generator().manual_seed(s), first_draws=first_draws, kernels=kind
            )
        )
        assert fused.dtype == torch.int64 and torch.equal(ref, fused), (n, k, seed)


def test_the_switch_selects_and_restores_the_kernels():
    previous = kernels.use("reference")
    try:
        assert kernels.active() == "reference"
        with kernels.using("fused"):
            assert kernels.active() == "fused"
        assert kernels.active() == "reference"
        with pytest.raises(ValueError, match="unknown"):
            kernels.use("fast")
    finally:
        kernels.use(previous)


def test_a_codec_keeps_the_kernels_it_was_built_with():
    previous = kernels.use("reference")
    try:
        built, built_memory = build_pair("ef(randk:ratio=0.1,scale=false+qsgd:bits=4)")
        chosen, memory = build_pair("dmc(qsgd:bits=4)", kernels="fused")
        with kernels.using("fused"):  # a later default changes no codec already built
            assert (
                built.kernels
                == built.outer.kernels
                == built.inner.kernels
                == built_memory.kernels
                == "reference"
            )
            assert make_codec("qsgd:bits=4").kernels == "fused"
        assert chosen.kernels == memory.kernels == "fused"
        assert chosen.with_shared_scale().kernels == "fused"
        assert make_codec("qsgd:bits=4", "fused") == make_codec("qsgd:bits=4", "reference")  # the same bits
        with pytest.raises(ValueError, match="unknown"):
            make_codec("fp32", "fast")
    finally:
        kernels.use(previous)


def test_the_environment_variable_selects_the_kernels_in_a_fresh_process():
    import os
    import subprocess
    import sys

    code = "from adass.codecs import kernels; print(kernels.active())"
    env = {**os.environ, "ADASS_CODEC_KERNELS": "reference"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "reference"
    env["ADASS_CODEC_KERNELS"] = "fast"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "ADASS_CODEC_KERNELS='fast' unknown" in bad.stderr
