"""Lossy codecs in the exchanges: identical results on every worker, shared coordinates for random-k,
exact integer sums under a shared scale, and requantization error that grows with the ring."""

from __future__ import annotations

import pytest
import torch
from exchange_cases import CODECS, grads, weighted_mean

from adass.codecs import ChunkKey, make_codec
from adass.exchange import ChunkLayout, check, simulate
from adass.registry import SpecError

EXCHANGES = [
    "ring",
    "ring:strategy=shared_scale",
    "ring:strategy=allgather",
    "ring:segment_kb=1",
    "ps:servers=2",
]


def _possible(exchange: str, codec: str) -> bool:
    try:
        check(exchange, codec)
    except SpecError:
        return False
    return True


PAIRS = [(e, c) for e in EXCHANGES for c in CODECS if _possible(e, c)]


@pytest.mark.parametrize("exchange, codec", PAIRS)
def test_every_worker_ends_bit_identical(exchange: str, codec: str) -> None:
    gs = grads(4, 1500, seed=2)
    result = simulate(gs, exchange=exchange, codec=codec, seed=11, counts=[3, 1, 2, 5], step=4)
    first = result.outputs[0]
    assert torch.isfinite(first).all()
    for out in result.outputs[1:]:
        assert torch.equal(out, first)
    again = simulate(gs, exchange=exchange, codec=codec, seed=11, counts=[3, 1, 2, 5], step=4)
    assert torch.equal(again.outputs[0], first)  # seeded: the same step gives the same bytes


@pytest.mark.parametrize("exchange", ["ring", "ps", "ring:strategy=shared_scale"])
def test_random_k_keeps_the_same_coordinates_everywhere(exchange: str) -> None:
    codec = "randk:ratio=0.05+qsgd:bits=8" if "shared" in exchange else "randk:ratio=0.05"
    workers, n, seed, step = 3, 900, 5, 2
    gs = [g + 10.0 for g in grads(workers, n, seed=3)]  # no kept value sums to zero
    result = simulate(gs, exchange=exchange, codec=codec, seed=seed, step=step)
    sparsifier = make_codec("randk:ratio=0.05")
    parts = 1 if exchange == "ps" else workers  # one server slice, or one ring chunk per worker
    expected = torch.zeros(n, dtype=torch.bool)
    for piece in ChunkLayout(n, parts).all_pieces():
        idx = sparsifier.indices(piece.numel, ChunkKey(seed, step, piece.pid))
        expected[piece.lo + idx] = True
    for out in result.outputs:
        assert torch.equal(out != 0, expected)


@pytest.mark.parametrize("workers, n", [(1, 5), (2, 1), (3, 0), (3, 1001), (5, 3), (5, 2000), (3, 30_000)])
@pytest.mark.parametrize("counts", [None, "counted"])
@pytest.mark.parametrize("exchange", ["ring", "ring:segment_kb=1"])
def test_ring_random_k_is_the_weighted_mean_of_the_kept_values(
    exchange: str, workers: int, n: int, counts
) -> None:
    # the ring adds only the kept values: the result is the count-weighted mean of every rank's
    # random-k estimate of its gradient, the same coordinates on every rank
    counts = [1.0 + 2 * r for r in range(workers)] if counts else None
    gs, seed, step = grads(workers, n, seed=6), 4, 3
    result = simulate(gs, exchange=exchange, codec="randk:ratio=0.05", counts=counts, seed=seed, step=step)
    codec = make_codec("randk:ratio=0.05")
    segment = int(1024 / codec.bytes_per_value()) if "segment" in exchange else None  # as the ring cuts
    layout = ChunkLayout(n, workers, segment)
    estimates = []
    for g in gs:
        estimate = torch.empty(n)
        for piece in layout.all_pieces():
            key = ChunkKey(seed, step, piece.pid)
            estimate[piece.lo : piece.hi] = codec.decode(codec.encode(g[piece.lo : piece.hi], key))
        estimates.append(estimate)
    expected = weighted_mean(estimates, counts)
    for out in result.outputs:
        assert torch.equal(out, result.outputs[0])
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert set(result.traffic.phase) <= {"reduce_scatter", "all_gather"}


def test_shared_scale_sums_integer_codes_exactly() -> None:
    workers, n, seed, step = 4, 1000, 9, 1
    gs = grads(workers, n, seed=4)
    result = simulate(
        gs, exchange="ring:strategy=shared_scale", codec="qsgd:bits=4,bucket=64", seed=seed, step=step
    )
    codec = make_codec("qsgd:bits=4,bucket=64,shared=true")
    expected = torch.empty(n)
    for piece in ChunkLayout(n, workers).all_pieces():
        shares = [g[piece.lo : piece.hi] * (1.0 / workers) for g in gs]
        scale = torch.stack([codec.local_scale(s) for s in shares]).amax(0)
        keys = [ChunkKey(seed, step, piece.pid, rank=r) for r in range(workers)]
        payloads = [codec.encode(s, k, scale=scale) for s, k in zip(shares, keys, strict=True)]
        total = payloads[0]
        for p in payloads[1:]:
            total = codec.add(total, p)
        codes = sum(codec.codes(p) for p in payloads)
        assert torch.equal(codec.codes(total), codes)  # integer codes add up without rounding
        expected[piece.lo : piece.hi] = codec.decode(total)
    for out in result.outputs:
        assert torch.equal(out, expected)
    assert (result.traffic.phase == "scale").any()


def _error(exchange: str, workers: int) -> float:
    gs = [torch.randn(4096, generator=torch.Generator().manual_seed(i)) + 1.0 for i in range(workers)]
    exact = weighted_mean(gs, None)
    result = simulate(gs, exchange=exchange, codec="qsgd:bits=4", seed=1)
    return float((result.outputs[0] - exact).norm() / exact.norm())


def test_requantize_error_grows_with_the_ring_but_shared_scale_does_not() -> None:
    # requantize rounds every partial sum again (P roundings of growing sums); with a shared scale
    # each worker's rounding is independent and the mean averages them out
    requantize = {p: _error("ring", p) for p in (2, 8)}
    shared = {p: _error("ring:strategy=shared_scale", p) for p in (2, 8)}
    assert requantize[8] > 1.2 * requantize[2]
    assert shared[8] < 0.8 * shared[2]
    assert requantize[8] > 2 * shared[8]


def test_quantized_means_are_close() -> None:
    gs = grads(4, 3000, seed=6)
    exact = weighted_mean(gs, None)
    for exchange, codec, tol in [("ring", "qsgd:bits=8", 0.05), ("ring:strategy=shared_scale", "qsgd:bits=8", 0.05),
                                 ("ps", "qsgd:bits=8", 0.05), ("ring", "fp16", 1e-3), ("ring", "bf16", 1e-2)]:  # fmt: skip
        out = simulate(gs, exchange=exchange, codec=codec).outputs[0]
        assert float((out - exact).norm() / exact.norm()) < tol, (exchange, codec)
