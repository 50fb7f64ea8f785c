"""Real processes over gloo on loopback: the ring equals torch's all_reduce, lossy codecs agree
with the in-process simulator bit for bit, and failures come back without leaving processes."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
from exchange_cases import (
    fails,
    grads,
    inproc_steps,
    lossy_over_gloo,
    ring_against_all_reduce,
    steps_over_gloo,
    throttled_steps,
    values_between,
    values_over_gloo,
)

from adass.exchange import InProcHub, Link, simulate
from adass.runtime.launch import run_processes


@pytest.mark.parametrize("world", [2, 3])
def test_ring_equals_torch_all_reduce(world: int) -> None:
    sizes = [0, 1, 7, 1000, 5001]
    results = run_processes(ring_against_all_reduce, world, (sizes, 4096), timeout_s=90)
    for n in sizes:
        ours = [r[n][0] for r in results]
        for rank, (mine, reference, in_place) in enumerate(r[n] for r in results):
            np.testing.assert_allclose(mine, reference, rtol=1e-6, atol=1e-6, err_msg=f"n={n}, rank {rank}")
            assert np.array_equal(mine, ours[0]) and np.array_equal(in_place, mine), (n, rank)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("in_place", [False, True])  # True: reduce(x, out=x), as replicas call it
def test_lossy_codecs_over_gloo_match_the_simulator(in_place: bool) -> None:
    cases = [("ring:segment_kb=1", "qsgd:bits=4"), ("ring:strategy=shared_scale", "randk:ratio=0.1+qsgd:bits=8"),
             ("ring", "topk:ratio=0.05"), ("ps", "qsgd:bits=8"), ("ring:segment_kb=1", "fp32")]  # fmt: skip
    if in_place:
        cases += [
            ("ring:segment_kb=1", "randk:ratio=0.1"),
            ("ring", "ef(qsgd:bits=2)"),
            ("ps", "fp32"),
            ("ring", "dmc(randk:ratio=0.3,scale=false,block=16+fp16)"),
        ]
    counts, n = [2.0, 1.0, 3.0], 3000
    results = run_processes(lossy_over_gloo, 3, (cases, n, counts, in_place), timeout_s=90)
    gs = grads(3, n, seed=5)
    for i, (spec, codec) in enumerate(cases):
        if spec == "ps":  # two workers and one server rank
            sim = simulate(gs[:2], exchange=spec, codec=codec, seed=3, step=2, counts=counts[:2])
            real = [results[r][i] for r in range(2)]
            assert results[2][i] is None
        else:
            sim = simulate(gs, exchange=spec, codec=codec, seed=3, step=2, counts=counts)
            real = [results[r][i] for r in range(3)]
        for rank, got in enumerate(real):
            assert np.array_equal(got["out"], sim.outputs[rank].numpy()), (spec, codec, rank)
        assert sum(r["wire"] for r in real) == sim.traffic[sim.traffic.dst < len(real)].wire_bytes.sum()
    assert multiprocessing.active_children() == []


def test_bare_codec_payloads_over_gloo_are_recorded_as_in_the_simulator() -> None:
    # requantized payloads travel bare; a random-k stack's stand for its k kept values
    cases = [("ring", "randk:ratio=0.2+qsgd:bits=4"), ("ring", "qsgd:bits=8"), ("ring", "fp16")]
    counts, n = [2.0, 1.0, 3.0], 3000
    results = run_processes(lossy_over_gloo, 3, (cases, n, counts), timeout_s=90)
    gs = grads(3, n, seed=5)
    for i, (spec, codec) in enumerate(cases):
        sim = simulate(gs, exchange=spec, codec=codec, seed=3, step=2, counts=counts)
        for rank in range(3):
            got, mine = results[rank][i], sim.traffic[sim.traffic.dst == rank]
            assert np.array_equal(got["out"], sim.outputs[rank].numpy()), (codec, rank)
            assert (got["raw"], got["wire"]) == (mine.raw_bytes.sum(), mine.wire_bytes.sum()), (codec, rank)
    assert multiprocessing.active_children() == []


def test_steps_with_changing_counts_over_gloo_match_the_simulator() -> None:
    # from the second step on, framed payloads of fixed-size codecs (top-k's all-gather too) are
    # posted with the layout seen before and travel as one message each; counts change, and results
    # stay bit for bit
    cases = [("ring:strategy=shared_scale", "qsgd:bits=8"), ("ring:segment_kb=1", "qsgd:bits=4"), ("ring", "fp16"),
             ("ring", "topk:ratio=0.05"), ("ring:segment_kb=1", "fp32")]  # fmt: skip
    counts, n = [[2.0, 1.0, 3.0], [2.0, 1.0, 3.0], [0.5, 4.0, 0.0]], 3000
    results = run_processes(steps_over_gloo, 3, (cases, n, counts), timeout_s=90)
    for i, (spec, codec) in enumerate(cases):
        sim = inproc_steps(spec, codec, n, counts)
        for step in range(len(counts)):
            for rank in range(3):
                got = results[rank][i][step]
                assert np.array_equal(got["out"], sim[step][rank].numpy()), (spec, codec, step, rank)
                timers = got["timers"]
                assert sum(timers.values()) <= got["wall_s"]
                if codec != "fp32":
                    assert timers["encode_s"] > 0 and timers["decode_s"] > 0
                if step > 0:  # one gloo message per payload
                    assert got["messages"] == got["payloads"], (spec, codec, step, rank)
    assert multiprocessing.active_children() == []


def test_ratio_warmup_over_gloo_changes_layouts_by_epoch_and_matches_the_simulator() -> None:
    # the kept count k falls from epoch to epoch: repeating transfers must not expect last epoch's
    # layout, and every rank keeps the same k
    cases = [("ring", "randk:ratio=0.05,warmup=2"), ("ring", "mc(randk:ratio=0.05,scale=false,warmup=2)"),
             ("ring", "topk:ratio=0.05,warmup=2"),
             ("ring:strategy=shared_scale", "dmc(randk:ratio=0.1,scale=false,warmup=2+qsgd:bits=8)")]  # fmt: skip
    counts, epochs, n = [[2.0, 1.0, 3.0]] * 4, [0, 0, 1, 2], 3000
    results = run_processes(steps_over_gloo, 3, (cases, n, counts, epochs), timeout_s=90)
    for i, (spec, codec) in enumerate(cases):
        sim = inproc_steps(spec, codec, n, counts, epochs=epochs)
        for step in range(len(counts)):
            for rank in range(3):
                assert np.array_equal(results[rank][i][step]["out"], sim[step][rank].numpy()), (
                    codec,
                    step,
                    rank,
                )
    assert multiprocessing.active_children() == []


def test_a_failing_rank_is_reported_and_nothing_is_left_running() -> None:
    with pytest.raises(RuntimeError, match="deliberate failure"):
        run_processes(fails, 2, timeout_s=60)
    assert multiprocessing.active_children() == []


def test_agreed_values_arrive_with_their_records() -> None:
    # gloo receives into the posted buffer; in process the payload arrives by reference
    hub = InProcHub(2)
    senders = [hub.transport(0), hub.transport(1)]
    assert values_between(senders[0], 1) is None
    inproc = values_between(senders[1], 0)
    real = run_processes(values_over_gloo, 2, timeout_s=60)[1]
    expected = [float(v) for v in range(10)]
    record = ("reduce_scatter", 1, 2, 3, 32, 40)  # raw: 8 dense values; wire: the 10 sent
    for got in (inproc, real):
        assert got["values"] == expected and got["numel"] == 8
        assert got["records"] == [record]
    assert real["into"] == expected
    assert multiprocessing.active_children() == []


def test_throttled_gloo_ring_takes_the_modelled_time_from_its_first_hop() -> None:
    # fp32 travels as bare agreed bodies, qsgd framed: both must be paced from their send time
    world, n, link = 3, 30_000, Link.parse("100mbit,1ms")
    codecs = ["fp32", "qsgd:bits=8"]
    results = run_processes(throttled_steps, world, (codecs, n, str(link)), timeout_s=90)
    for codec in codecs:
        for rank, result in enumerate(results):
            records = result[codec]["records"]
            assert len(records) == 2 * (world - 1)
            assert all(seconds >= sim * 0.999 for _, seconds, sim in records), (codec, rank, records)
        # each hop waits for the one before it, so the rank that left the barrier first waits for
        # the whole chain: the slowest rank's step takes at least the ring's modelled time
        hops = sum(sim for _, _, sim in results[0][codec]["records"])
        assert max(r[codec]["wall_s"] for r in results) >= hops * 0.999, codec
