"""Sample counts travel inside the exchange's payloads: no round of their own, exact weights that
may change from step to step, bit-identical results; and the split of a call's time by kind of work."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from exchange_cases import grads, inproc_steps, weighted_mean

from adass.exchange import InProcHub, make_exchange, simulate

COUNTS = [[2.0, 1.0, 3.0], [2.0, 1.0, 3.0], [0.5, 4.25, 0.0], [7.0, 7.0, 7.0]]  # per step, per rank


@pytest.mark.parametrize("exchange, codec", [
    ("ring", "fp32"), ("ring:segment_kb=1", "fp32"), ("ring", "fp16"), ("ring", "qsgd:bits=4"),
    ("ring:strategy=shared_scale", "qsgd:bits=8"), ("ring", "randk:ratio=0.1"), ("ring", "topk:ratio=0.1"),
    ("ps:servers=2", "qsgd:bits=8"),
])  # fmt: skip
def test_counts_need_no_messages_of_their_own(exchange: str, codec: str) -> None:
    workers = 4
    weighted = simulate(grads(workers, 3000), exchange=exchange, codec=codec, counts=[1, 2, 3, 4])
    plain = simulate(grads(workers, 3000), exchange=exchange, codec=codec)
    assert "count" not in set(weighted.traffic.phase)
    # the same transfers, each at most 8 bytes longer (the count)
    keys = ["phase", "hop", "src", "dst", "chunk"]
    assert weighted.traffic[keys].equals(plain.traffic[keys])
    extra = weighted.traffic.wire_bytes - plain.traffic.wire_bytes
    if exchange.startswith("ps"):  # a push always carries its count (1 without counts)
        assert (extra == 0).all()
    else:
        assert extra.isin([0, 8]).all() and (extra == 8).any()


@pytest.mark.parametrize("exchange", ["ring", "ring:segment_kb=1", "ring:strategy=allgather", "ps"])
def test_counts_weight_exactly_as_they_change_from_step_to_step(exchange: str) -> None:
    n = 1001
    workers = 2 if exchange == "ps" else 3  # the PS runs two workers and one server rank
    results = inproc_steps(exchange, "fp32", n, COUNTS)
    for step, row in enumerate(results):
        exact = weighted_mean(grads(3, n, seed=step)[:workers], COUNTS[step][:workers])
        for out in row[:workers]:
            assert torch.equal(out, row[0])
            torch.testing.assert_close(out, exact, rtol=1e-6, atol=1e-6)


def test_repeated_counts_add_the_weighted_shares_without_rescaling() -> None:
    # once the previous total is right, the owner's sum is the plain sum of x_i * count_i / total
    n, counts = 10, [[1.0, 3.0], [1.0, 3.0]]
    second = inproc_steps("ring", "fp32", n, counts)[1][0]
    x0, x1 = grads(2, n, seed=1)
    expected = torch.empty(n)
    expected[:5] = torch.add(x1[:5] * 0.75, x0[:5], alpha=0.25)  # chunk 0: rank 1 starts, rank 0 owns
    expected[5:] = torch.add(x0[5:] * 0.25, x1[5:], alpha=0.75)
    assert torch.equal(second, expected)


def test_half_precision_sums_stay_at_the_scale_of_the_mean() -> None:
    # shares are count / (previous total): after the first step, partial sums do not grow with counts
    n, counts = 500, [[100.0, 300.0], [100.0, 300.0]]
    workers = 2
    hub = InProcHub(workers)
    exchanges = [make_exchange("ring", hub.transport(r), "fp16") for r in range(workers)]
    big = [g.clamp(-1, 1) * 3e4 for g in grads(workers, n, seed=9)]  # 3e4 * 300 would overflow fp16
    outs = [None] * workers

    def work(rank: int) -> None:
        exchanges[rank].reduce(grads(workers, n, seed=8)[rank], counts[0][rank])
        outs[rank] = exchanges[rank].reduce(big[rank], counts[1][rank])

    threads = [threading.Thread(target=work, args=(r,)) for r in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    exact = weighted_mean(big, counts[1])
    assert torch.isfinite(outs[0]).all() and torch.equal(outs[0], outs[1])
    torch.testing.assert_close(outs[0], exact, rtol=0.0, atol=3e4 * 2**-9)  # a few fp16 roundings


@pytest.mark.parametrize("codec", ["fp32", "fp16", "bf16", "randk:ratio=0.1"])
def test_shared_scale_adds_codecs_without_a_scale_directly(codec: str) -> None:
    gs, counts = grads(4, 2000, seed=7), [3, 1, 2, 5]
    shared = simulate(gs, exchange="ring:strategy=shared_scale", codec=codec, counts=counts, seed=2)
    plain = simulate(gs, exchange="ring:strategy=requantize", codec=codec, counts=counts, seed=2)
    for a, b in zip(shared.outputs, plain.outputs, strict=True):
        assert torch.equal(a, b)
    assert "scale" not in set(shared.traffic.phase)
    assert shared.wire_bytes == plain.wire_bytes


@pytest.mark.parametrize("exchange, codec", [
    ("ring", "qsgd:bits=4"), ("ring:strategy=shared_scale", "qsgd:bits=8"), ("ring", "fp32"),
    ("ring", "topk:ratio=0.1"), ("ps", "qsgd:bits=8"),
])  # fmt: skip
def test_timers_split_the_call(exchange: str, codec: str) -> None:
    hub = InProcHub(2 if exchange == "ps" else 1)
    ex = make_exchange(exchange, hub.transport(0), codec)
    x = grads(1, 50_000, seed=3)[0]
    if exchange == "ps":  # a server rank answers in a thread
        server = make_exchange(exchange, hub.transport(1), codec)
        threads = [threading.Thread(target=server.serve_step) for _ in range(2)]
    for call in range(2):
        if exchange == "ps":
            threads[call].start()
        start = time.perf_counter()
        ex.reduce(x, 5.0)
        wall_s = time.perf_counter() - start
        if exchange == "ps":
            threads[call].join()
        done = ex.report()
        timers = {"encode_s": done.encode_s, "decode_s": done.decode_s, "comm_s": done.comm_s}
        assert set(timers) == {"encode_s", "decode_s", "comm_s"}
        assert all(v >= 0 for v in timers.values())
        assert sum(timers.values()) == pytest.approx(ex.clock.wall_s)
        assert ex.clock.wall_s <= wall_s  # reset per call: never more than this call took
        if codec != "fp32":
            assert timers["encode_s"] > 0 and timers["decode_s"] > 0
