"""QSGD: bounded round-trip error, unbiasedness, the variance bound, byte counts, shared scale."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from codec_cases import chunk

from adass.codecs import QSGD, ChunkKey, bits_for, make_codec, packed_nbytes
from adass.memory import build_pair


def keys(n: int, rank: int = 0) -> list[ChunkKey]:
    return [ChunkKey(seed=1, step=s, chunk=0, rank=rank) for s in range(n)]


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("norm", ["max", "l2"])
@pytest.mark.parametrize("n", [0, 1, 511, 513, 2000])
def test_round_trip_within_one_level(bits: int, norm: str, n: int, key: ChunkKey) -> None:
    codec = QSGD(bits=bits, bucket=512, norm=norm)
    x = chunk(n)
    out = codec.decode(codec.encode(x, key))
    assert out.shape == x.shape and out.dtype == torch.float32
    if n:
        # every value lands on one of the two levels around it: error below one spacing 2M/L
        scale = codec.local_scale(x).repeat_interleave(512)[:n]
        assert torch.all((out - x).abs() <= 2 * scale / codec.levels * (1 + 1e-5))


@pytest.mark.parametrize("n", [0, 1, 600])
def test_all_zero_input_decodes_to_zero(n: int, key: ChunkKey) -> None:
    for bits in (1, 8):
        codec = QSGD(bits=bits)
        out = codec.decode(codec.encode(torch.zeros(n), key))
        assert torch.equal(out, torch.zeros(n))


def test_same_key_same_codes_and_ranks_differ(key: ChunkKey) -> None:
    codec = QSGD(bits=2)
    x = chunk(3000)
    a, b = codec.encode(x, key), codec.encode(x, key)
    assert torch.equal(a.tensors["codes"], b.tensors["codes"])
    other = codec.encode(x, dataclasses.replace(key, rank=1))
    assert not torch.equal(a.tensors["codes"], other.tensors["codes"])


@pytest.mark.parametrize("bits,norm", [(1, "max"), (2, "max"), (4, "l2"), (8, "max")])
def test_unbiased(bits: int, norm: str) -> None:
    # The mean of N independent encodings has E||mean - x||^2 = sum_i var_i / N <= V / N, with V
    # the codec's variance bound. The squared error is a sum of d=300 independent terms and so
    # stays near its expectation; we allow 1.5x the bound.
    codec, x, trials = QSGD(bits=bits, bucket=64, norm=norm), chunk(300, seed=5), 1500
    mean = torch.stack([codec.decode(codec.encode(x, k)) for k in keys(trials)]).mean(0)
    bound = codec.variance_bound(x)
    assert float(((mean.double() - x.double()) ** 2).sum()) <= 1.5 * bound / trials
    # and no single coordinate strays: each is within 5 of its own standard deviations
    std = codec.coordinate_variance_bound(x).sqrt() / math.sqrt(trials)
    assert torch.all((mean - x).abs() <= 5 * std + 1e-5 * x.abs())  # fp32 rounding of the mean


@pytest.mark.parametrize("bits,norm", [(1, "l2"), (2, "l2"), (4, "l2"), (3, "max"), (8, "max")])
def test_variance_within_bound(bits: int, norm: str) -> None:
    # Empirical E||Q(x) - x||^2 over 400 seeded encodings must stay below the per-vector bound
    # sum_i min(D^2/4, D|x_i|) (D: level spacing; M^2 - x_i^2 for 1 bit), with 10% slack for the sampling error; for
    # the l2 scale also below the QSGD paper's min(d/s^2, sqrt(d)/s) * ||x||^2 per bucket.
    d, trials = 256, 400
    codec, x = QSGD(bits=bits, bucket=d, norm=norm), chunk(d, seed=9)
    errors = [float(((codec.decode(codec.encode(x, k)) - x) ** 2).sum()) for k in keys(trials)]
    empirical = sum(errors) / trials
    assert empirical <= 1.1 * codec.variance_bound(x)
    if norm == "l2" and bits >= 2:
        s = codec.levels // 2
        paper = min(d / s**2, math.sqrt(d) / s) * float(x.norm() ** 2)
        assert empirical <= 1.1 * paper


@pytest.mark.parametrize("bits,ratio", [(8, 0.2522), (4, 0.1272), (2, 0.0647), (16, 0.5022)])
def test_wire_bytes(bits: int, ratio: float, key: ChunkKey) -> None:
    n, codec = 10_000, QSGD(bits=bits, bucket=512)
    payload = codec.encode(chunk(n), key)
    scales = 4 * math.ceil(n / 512)
    assert payload.header_bytes == 7
    assert payload.nbytes == packed_nbytes(n, bits) + scales + 7
    assert payload.nbytes / payload.raw_bytes == pytest.approx(ratio, abs=1e-4)


def test_plain_mode_is_not_summable(key: ChunkKey) -> None:
    codec = make_codec("qsgd:bits=4")
    assert not codec.traits.summable and not codec.traits.needs_shared_scale and codec.traits.can_share_scale
    p = codec.encode(chunk(10), key)
    with pytest.raises(TypeError, match="not summable"):
        codec.add(p, p)
    shared = codec.with_shared_scale()
    assert shared.traits.summable and shared.traits.needs_shared_scale
    assert shared.name == "qsgd:bits=4,bucket=512,norm=max,shared=true,rounding=auto"
    assert make_codec(shared.name) == shared and shared.with_shared_scale() is shared


@pytest.mark.parametrize("workers", range(2, 8))
@pytest.mark.parametrize("bits,norm", [(1, "max"), (4, "max"), (8, "l2"), (16, "max")])
def test_shared_scale_codes_add_exactly(workers: int, bits: int, norm: str) -> None:
    n = 1300  # not a multiple of the bucket
    codec = make_codec(f"qsgd:bits={bits},bucket=256,norm={norm}").with_shared_scale()
    base = ChunkKey(seed=3, step=11, chunk=2)
    xs = [chunk(n, seed=w) * (w + 1) for w in range(workers)]
    agreed = torch.stack([codec.local_scale(x) for x in xs]).amax(0)
    payloads = [codec.encode(x, dataclasses.replace(base, rank=w), scale=agreed) for w, x in enumerate(xs)]
    total = payloads[0]
    for p in payloads[1:]:  # ring order: one payload joins per hop
        total = codec.add(total, p)
    # integer codes add exactly
    assert torch.equal(codec.codes(total), sum(codec.codes(p) for p in payloads))
    assert total.header["count"] == workers
    width = bits_for(workers * codec.levels)
    assert total.header["bits"] == width <= bits + math.ceil(math.log2(workers))
    assert total.nbytes == packed_nbytes(n, width) + 4 * math.ceil(n / 256) + 7
    # the decoded sum equals the sum of the individual decodings (fp32 rounding aside)
    parts = torch.stack([codec.decode(p).double() for p in payloads])
    err = (codec.decode(total).double() - parts.sum(0)).abs()
    assert torch.all(err <= 1e-6 * parts.abs().sum(0) + 1e-30)
    # a tree order gives the same bytes as the ring order
    if workers >= 4:
        left = codec.add(payloads[0], payloads[1])
        right = payloads[2]
        for p in payloads[3:]:
            right = codec.add(right, p)
        tree = codec.add(left, right)
        assert torch.equal(tree.tensors["codes"], total.tensors["codes"])


def test_shared_scale_rejects_mismatched_scales(key: ChunkKey) -> None:
    codec = QSGD(bits=4, shared=True)
    a, b = chunk(100, 1), chunk(100, 2)
    pa, pb = codec.encode(a, key), codec.encode(b, key)  # each with its own local scale
    with pytest.raises(ValueError, match="different scales"):
        codec.add(pa, pb)
    with pytest.raises(ValueError, match="scale has"):
        codec.encode(a, key, scale=torch.ones(3))


def formula(codec: QSGD, payload) -> torch.Tensor:
    """``M * (2U - count*L) / L`` in float64, straight from the codes and scales."""
    scale = payload.tensors["scales"].double().repeat_interleave(codec.bucket)[: payload.numel]
    centred = 2 * codec.codes(payload).double() - payload.header["count"] * codec.levels
    return scale * centred / codec.levels


@pytest.mark.parametrize("workers", [1, 3, 130])  # 130 x 16-bit codes: the float64 path
@pytest.mark.parametrize("bits", [1, 2, 4, 8, 16])
def test_decode_is_the_formula_to_two_float32_ulps(bits: int, workers: int) -> None:
    n = 300 if workers > 3 else 1300  # not a multiple of the bucket
    codec = QSGD(bits=bits, bucket=256, shared=True)
    xs = [chunk(n, seed=w) for w in range(workers)]
    agreed = torch.stack([codec.local_scale(x) for x in xs]).amax(0)
    total = None
    for w, x in enumerate(xs):
        p = codec.encode(x, ChunkKey(seed=1, step=0, chunk=0, rank=w), scale=agreed)
        total = p if total is None else codec.add(total, p)
    ref, out = formula(codec, total), codec.decode(total).double()
    assert torch.all((out - ref).abs() <= 2**-22 * ref.abs())  # zero where the codes centre
    assert torch.equal(codec.codes(total), codec.codes(total, torch.int32).long())


def test_zeros_in_a_bucket_decode_to_exact_zero() -> None:
    x = chunk(1000)
    x[::3] = 0.0  # zero is a level for bits >= 2, so zeros are never rounded away from it
    for bits in (2, 4, 8, 9, 16):
        codec = QSGD(bits=bits, bucket=100)
        for k in keys(20):  # 6,680 zeros each: a draw within half a float32 ulp of 1 would show
            out = codec.decode(codec.encode(x, k))
            assert torch.all(out[::3] == 0.0), (bits, k)


def test_subnormal_scale_stays_finite(key: ChunkKey) -> None:
    x = torch.tensor([0.0, 1e-44, -3e-45, 0.0, 2e-45] * 20)
    codec = QSGD(bits=8, bucket=50)
    out = codec.decode(codec.encode(x, key))
    assert torch.all(torch.isfinite(out)) and torch.all(out[::5] == 0.0)
    # within one level spacing 2M/L (float64: it is below the smallest float32), plus half the
    # float32 rounding step there, 2**-150
    spacing = 2 * codec.local_scale(x).double().repeat_interleave(50) / codec.levels
    assert torch.all((out.double() - x.double()).abs() <= spacing + 2**-150)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_nearest_rounding_lands_on_the_closest_level_whatever_the_key(bits: int) -> None:
    codec, x = QSGD(bits=bits, bucket=64, rounding="nearest"), chunk(1000, seed=3)
    outs = [codec.decode(codec.encode(x, k)) for k in keys(3) + keys(1, rank=2)]
    assert all(torch.equal(outs[0], o) for o in outs[1:])  # no draws: the key does not matter
    spacing = 2 * codec.local_scale(x).repeat_interleave(64)[: x.numel()] / codec.levels
    assert torch.all((outs[0] - x).abs() <= spacing / 2 * (1 + 1e-5))  # half a spacing at most
    assert torch.all((outs[0] - x).abs() <= x.abs() * (1 + 1e-6))  # never further than zero is


def test_two_bit_stochastic_rounding_is_not_contractive_and_nearest_is() -> None:
    """Why ``rounding=auto`` rounds to nearest under a memory: at 2 bits the levels are -M, 0 and
    M, and a heavy-tailed bucket (most values far below its max, as gradients are) rounds with an
    error larger than the bucket itself, so a residual fed back grows; nearest rounding's is smaller."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=gen) * torch.rand(4096, generator=gen) ** 4  # heavy tails
    stochastic, nearest = QSGD(bits=2), QSGD(bits=2, rounding="nearest")
    errors = [float((stochastic.decode(stochastic.encode(x, k)) - x).norm()) for k in keys(20)]
    assert min(errors) > float(x.norm())
    assert float((nearest.decode(nearest.encode(x, keys(1)[0])) - x).norm()) < float(x.norm())


def test_a_memory_turns_auto_rounding_to_nearest_and_keeps_an_explicit_choice() -> None:
    assert build_pair("ef(qsgd:bits=2)")[0].rounding == "nearest"
    assert build_pair("qsgd:bits=4", "mc")[0].rounding == "nearest"
    assert build_pair("ef(qsgd:bits=2,rounding=stochastic)")[0].rounding == "stochastic"
    assert make_codec("qsgd:bits=2").rounding == "auto" and not make_codec("qsgd:bits=2").nearest
    shared = build_pair("ef(qsgd:bits=2)")[0].with_shared_scale()
    assert shared.shared and shared.rounding == "nearest"
