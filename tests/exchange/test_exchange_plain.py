"""The fast ring against the plain one (``exchange/ring/plain.py``): blocking hops of decode, add,
encode. Bit for bit where both do the same arithmetic; close where the fast ring rounds earlier."""

from __future__ import annotations

import threading

import pytest
import torch
from exchange_cases import grads

from adass.exchange import InProcHub, make_exchange
from adass.exchange.ring.plain import PlainRing


def _means(build, gs: list[torch.Tensor], steps: int = 2) -> list[list[torch.Tensor]]:
    """Every rank's result of ``steps`` reduces of ``gs`` (equal weights), per step."""
    hub = InProcHub(len(gs))
    outs: dict[tuple[int, int], torch.Tensor] = {}

    def work(rank: int) -> None:
        exchange = build(hub.transport(rank))
        for s in range(steps):
            outs[(s, rank)] = exchange.reduce(gs[rank] * (s + 1))

    threads = [threading.Thread(target=work, args=(r,)) for r in range(len(gs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [[outs[(s, r)] for r in range(len(gs))] for s in range(steps)]


def _both(codec: str, workers: int, n: int) -> tuple[list, list, list]:
    gs = grads(workers, n, seed=workers * 1000 + n)
    fast = _means(lambda t: make_exchange("ring", t, codec, seed=5), gs)
    plain = _means(lambda t: PlainRing(t, codec, seed=5), gs)
    return fast, plain, gs


SIZES = [(1, 100), (2, 1001), (3, 2), (3, 1000), (4, 3), (5, 1237)]


@pytest.mark.parametrize(
    "codec", ["fp32", "qsgd:bits=4", "qsgd:bits=2,bucket=7", "randk:ratio=0.1,scale=false"]
)
@pytest.mark.parametrize(("workers", "n"), SIZES)
def test_the_fast_ring_gives_the_plain_rings_bits(codec: str, workers: int, n: int) -> None:
    fast, plain, _ = _both(codec, workers, n)
    for fast_step, plain_step in zip(fast, plain, strict=True):
        for a, b in zip(fast_step, plain_step, strict=True):
            assert torch.equal(a, b)
        assert all(torch.equal(plain_step[0], b) for b in plain_step)


@pytest.mark.parametrize("codec", ["fp16", "bf16"])
@pytest.mark.parametrize(("workers", "n"), SIZES)
def test_half_precision_rings_agree_to_the_rounding_of_each_share(codec: str, workers: int, n: int) -> None:
    # The fast ring rounds each rank's share to half precision before adding it, the plain ring
    # adds the float32 share to the decoded partial sum: the two differ by up to two roundings per
    # hop, each at most eps of a partial sum, which is at most the mean of |g| over the ranks.
    eps = {"fp16": 2.0**-11, "bf16": 2.0**-8}[codec]
    fast, plain, gs = _both(codec, workers, n)
    mean_abs = torch.stack([g.abs() for g in gs]).mean(0)
    for s, (fast_step, plain_step) in enumerate(zip(fast, plain, strict=True)):
        bound = 2 * workers * eps * (s + 1) * mean_abs + 1e-6
        for a, b in zip(fast_step, plain_step, strict=True):
            assert ((a - b).abs() <= bound).all()


def test_the_plain_ring_averages_with_equal_weights_only() -> None:
    hub = InProcHub(1)
    with pytest.raises(ValueError, match="equal weights"):
        PlainRing(hub.transport(0), "fp32").reduce(torch.ones(4), count=2.0)
