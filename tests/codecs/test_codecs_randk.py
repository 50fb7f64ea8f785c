"""Random-k: shared coordinates from the chunk key, only values travel, unbiased, summable;
stacked with shared-scale QSGD (RS+Q) the quantized value vectors still add."""

from __future__ import annotations

import dataclasses
import math
import pickle

import pytest
import torch
from codec_cases import chunk

from adass.codecs import ChunkKey, RandomK, generator_for, make_codec
from adass.codecs.coordinates import distinct_sample


def support(codec: RandomK, x: torch.Tensor, key: ChunkKey) -> torch.Tensor:
    return codec.decode(codec.encode(x, key)).nonzero().flatten()


def test_workers_with_the_same_key_pick_the_same_coordinates(key: ChunkKey) -> None:
    codec = RandomK(ratio=0.05)
    a, b = chunk(5000, 1), chunk(5000, 2)  # two workers' different gradients
    same = codec.indices(5000, key)
    assert same.numel() == 250
    assert torch.equal(same, codec.indices(5000, dataclasses.replace(key, rank=3, hop=2)))
    assert torch.equal(support(codec, a, key), same) and torch.equal(support(codec, b, key), same)
    for other in (dataclasses.replace(key, step=key.step + 1), dataclasses.replace(key, chunk=9)):
        assert not torch.equal(codec.indices(5000, other), same)


def test_indices_are_the_seeded_draw_and_cached(key: ChunkKey) -> None:
    codec = RandomK(ratio=0.01)
    idx = codec.indices(100_000, key)
    expected = distinct_sample(100_000, 1000, generator_for(key, "randk"))
    assert torch.equal(idx, expected)
    assert codec.indices(100_000, key) is idx  # a decode at the next hop does not draw again
    # another worker (a fresh, unpickled codec with an empty cache) draws the same coordinates
    remote = pickle.loads(pickle.dumps(codec))
    assert len(remote._cache) == 0 and torch.equal(remote.indices(100_000, key), idx)
    assert not torch.equal(codec.indices(100_001, key)[:1000], idx)  # the length is in the key


def test_inclusion_frequency_over_keys_is_k_over_n() -> None:
    # Over T keys each coordinate is kept Binomial(T, k/n) times: mean 100, sd ~9.7 here.
    codec, n, trials = RandomK(ratio=0.05), 200, 2000
    hits = torch.zeros(n)
    for s in range(trials):
        hits[codec.indices(n, ChunkKey(seed=4, step=s, chunk=s % 3))] += 1
    p = codec.k_for(n) / n
    sd = math.sqrt(trials * p * (1 - p))
    assert float((hits - trials * p).abs().max()) < 4.5 * sd


def test_wire_bytes_values_only(key: ChunkKey) -> None:
    payload = make_codec("randk:ratio=0.01").encode(chunk(10_000), key)
    assert set(payload.tensors) == {"values"}
    assert payload.nbytes == 100 * 4 + 12
    assert payload.nbytes / payload.raw_bytes == pytest.approx(0.0103)


@pytest.mark.parametrize("n,ratio,k", [(0, 0.5, 0), (1, 0.01, 1), (10, 0.001, 1), (50, 0.0, 1), (7, 1.0, 7)])
def test_k_is_at_least_one(n: int, ratio: float, k: int, key: ChunkKey) -> None:
    codec = RandomK(ratio=ratio, scale=False)
    x = chunk(n)
    payload = codec.encode(x, key)
    assert payload.tensors["values"].numel() == k
    out = codec.decode(payload)
    kept = codec.indices(n, key)
    assert torch.equal(out[kept], x[kept]) and out.abs().sum() == x[kept].abs().sum()


def test_scaled_estimate_is_unbiased() -> None:
    # Coordinate i is kept with probability p = k/n and then multiplied by 1/p, so its variance is
    # x_i^2 (1/p - 1); the mean of N draws has E||mean - x||^2 = ||x||^2 (1/p - 1) / N.
    # Allow 1.5x (a sum of 100 nearly independent terms).
    codec, x, trials = RandomK(ratio=0.1), chunk(100, seed=4), 4000
    keys = [ChunkKey(seed=2, step=s, chunk=0) for s in range(trials)]
    mean = torch.stack([codec.decode(codec.encode(x, k)) for k in keys]).double().mean(0)
    expected = float(x.double().norm() ** 2) * (1 / 0.1 - 1) / trials
    assert float(((mean - x.double()) ** 2).sum()) <= 1.5 * expected


def test_aligned_payloads_add(key: ChunkKey) -> None:
    codec = RandomK(ratio=0.1)
    xs = [chunk(1000, w) for w in range(5)]
    payloads = [codec.encode(x, key) for x in xs]
    total = payloads[0]
    for p in payloads[1:]:
        total = codec.add(total, p)
    parts = torch.stack([codec.decode(p).double() for p in payloads])
    err = (codec.decode(total).double() - parts.sum(0)).abs()
    assert torch.all(err <= 1e-6 * parts.abs().sum(0) + 1e-30)  # fp32 rounding only
    assert total.nbytes == payloads[0].nbytes
    with pytest.raises(ValueError, match="different chunk keys"):
        codec.add(total, codec.encode(xs[0], dataclasses.replace(key, step=0)))


def test_randk_plus_qsgd_wire_bytes(key: ChunkKey) -> None:
    codec = make_codec("randk:ratio=0.01+qsgd:bits=8")
    payload = codec.encode(chunk(10_000), key)
    assert not codec.traits.summable and codec.traits.can_share_scale
    # 100 one-byte codes, one bucket scale, randk header (12) + qsgd header (7)
    assert payload.nbytes == 100 + 4 + 12 + 7
    out = codec.decode(payload)
    assert out.nonzero().numel() <= 100


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_randk_plus_shared_scale_qsgd_adds_exactly(workers: int) -> None:
    codec = make_codec("randk:ratio=0.05+qsgd:bits=4,bucket=16").with_shared_scale()
    assert codec.traits.summable and codec.traits.needs_shared_scale
    assert (
        codec.name == "randk:ratio=0.05,scale=true+qsgd:bits=4,bucket=16,norm=max,shared=true,rounding=auto"
    )
    key = ChunkKey(seed=5, step=1, chunk=0)
    xs = [chunk(2000, w) for w in range(workers)]
    # local_scale needs the key: it scales the values at the shared coordinates
    agreed = torch.stack([codec.local_scale(x, key) for x in xs]).amax(0)
    assert agreed.numel() == math.ceil(100 / 16)
    payloads = [codec.encode(x, dataclasses.replace(key, rank=w), scale=agreed) for w, x in enumerate(xs)]
    total = payloads[0]
    for p in payloads[1:]:
        total = codec.add(total, p)
    assert total.header["inner"]["count"] == workers
    parts = torch.stack([codec.decode(p).double() for p in payloads])
    err = (codec.decode(total).double() - parts.sum(0)).abs()
    assert torch.all(err <= 1e-6 * parts.abs().sum(0) + 1e-30)
    with pytest.raises(TypeError, match="needs the chunk key"):
        codec.local_scale(xs[0])
