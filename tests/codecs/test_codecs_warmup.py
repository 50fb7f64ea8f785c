"""Ratio warm-up of the sparsifiers (``randk``/``topk`` with ``warmup=E``): a share kept that falls
exponentially to the target, a function of the epoch alone, so every worker keeps the same k."""

from __future__ import annotations

import doctest

import pytest
import torch
from codec_cases import chunk

from adass.codecs import ChunkKey, kept_count, make_codec, warmup_ratio
from adass.codecs import warmup as warmup_module


def test_the_module_doctest_holds() -> None:
    assert doctest.testmod(warmup_module).failed == 0


@pytest.mark.parametrize("target", [0.1, 0.01, 0.001])
@pytest.mark.parametrize("epochs", [1, 3, 5])
def test_schedule_falls_exponentially_to_the_target(target: float, epochs: int) -> None:
    shares = [warmup_ratio(target, epochs, e) for e in range(epochs + 3)]
    assert all(a > b for a, b in zip(shares[:epochs], shares[1 : epochs + 1], strict=True))
    assert shares[epochs:] == [target] * 3 and shares[0] < 1.0
    ratios = [shares[e + 1] / shares[e] for e in range(epochs)]
    assert max(ratios) == pytest.approx(min(ratios))  # one factor per epoch: exponential


@pytest.mark.parametrize("spec", ["randk:ratio=0.01,warmup=3", "topk:ratio=0.01,warmup=3"])
def test_every_worker_keeps_the_same_k_and_the_target_after_the_warmup(spec: str) -> None:
    n = 5000
    workers = [make_codec(spec) for _ in range(4)]  # one codec object per worker
    for epoch in range(6):
        for codec in workers:
            codec.set_epoch(epoch)
        ks = {codec.k_for(n) for codec in workers}
        assert ks == {kept_count(n, warmup_ratio(0.01, 3, epoch))}
        key = ChunkKey(0, epoch, 0)
        kept = {int(codec.encode(chunk(n, seed=epoch), key).tensors["values"].numel()) for codec in workers}
        assert kept == ks
    assert ks == {kept_count(n, 0.01)}


def test_random_k_coordinates_are_shared_during_the_warmup() -> None:
    a, b = make_codec("randk:ratio=0.01,warmup=2"), make_codec("randk:ratio=0.01,warmup=2")
    for codec in (a, b):
        codec.set_epoch(1)
    key = ChunkKey(7, 3, 0)
    assert torch.equal(a.indices(1000, key), b.indices(1000, key))
    payload = a.encode(chunk(1000, seed=1), key)
    b.set_epoch(2)  # a receiver counts the values it got; it needs no epoch
    assert torch.equal(b.decode(payload), a.decode(payload))


def test_bytes_per_value_follow_the_epoch() -> None:
    codec = make_codec("randk:ratio=0.01,scale=false,warmup=1+qsgd:bits=8")
    first = codec.bytes_per_value()
    codec.set_epoch(1)
    assert first == pytest.approx(10 * codec.bytes_per_value())
