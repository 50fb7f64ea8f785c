"""``sharedk`` inside exchanges: the ring shows every rank the same averaged result, so all ranks keep
choosing the same coordinates and the ring's result is the mean at them; the learnt state goes into
checkpoints; under a parameter server it stays shared-seed random-k."""

from __future__ import annotations

import pytest
import torch
from exchange_cases import grads

from adass.codecs import ChunkKey, make_codec
from adass.exchange import InProcHub, make_exchange
from adass.exchange.chunking import ChunkLayout
from adass.exchange.ring.plain import PlainRing
from adass.runtime import on_threads


def _build(spec: str, transport, codec: str):
    if spec == "plain_ring":  # not registered: it is there to read beside the fast ring
        return PlainRing(transport, codec, seed=11)
    return make_exchange(spec, transport, codec, seed=11)


def _run(spec: str, codec: str, world: int, n: int, steps: int,
         momentum: float | None = None) -> tuple[list, list[list[torch.Tensor]]]:  # fmt: skip
    """Exchanges of every rank (PS server included) after ``steps`` steps, and results [step][rank]."""
    servers = 1 if spec.startswith("ps") else 0
    hub = InProcHub(world + servers, timeout_s=60)
    exchanges = [_build(spec, hub.transport(r), codec) for r in range(world + servers)]
    for e in exchanges:
        if momentum is not None:
            e.take_momentum(momentum)
    outs = [[None] * world for _ in range(steps)]

    def work(rank: int) -> None:
        for s in range(steps):
            if rank >= world:
                exchanges[rank].serve_step()
            else:
                outs[s][rank] = exchanges[rank].reduce(grads(world, n, seed=s)[rank])

    on_threads(world + servers, work, [hub.abort])
    return exchanges, outs


@pytest.mark.parametrize("spec", ["ring", "plain_ring"])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_ring_result_is_the_mean_at_the_shared_coordinates(spec: str, world: int) -> None:
    n, steps = 257, 6
    exchanges, outs = _run(spec, "sharedk:ratio=0.1", world, n, steps)
    reference = make_codec("sharedk:ratio=0.1")  # replays the choices from the same results
    pieces = ChunkLayout(n, world).all_pieces()
    for step, per_rank in enumerate(outs):
        mean = torch.stack(grads(world, n, seed=step)).mean(0)
        expected = torch.zeros(n)
        for piece in pieces:
            idx = reference.indices(piece.numel, ChunkKey(11, step, piece.pid)) + piece.lo
            expected[idx] = mean[idx]
        for out in per_rank:
            assert torch.equal(out, per_rank[0])  # bit-identical on every rank
            assert torch.allclose(out, expected, atol=1e-6)
        for piece in pieces:
            reference.observe(per_rank[0][piece.lo : piece.hi], ChunkKey(11, step, piece.pid))
    # every rank learnt the same state, and it is no longer random-k's choice
    states = [e.codec.codec_state() for e in exchanges]
    assert all(torch.equal(s[c]["rate"], states[0][c]["rate"]) for s in states for c in states[0])


def test_fast_and_plain_rings_agree() -> None:
    fast = _run("ring", "sharedk:ratio=0.05,growth=linear", 3, 301, 5)[1]
    plain = _run("plain_ring", "sharedk:ratio=0.05,growth=linear", 3, 301, 5)[1]
    for a, b in zip(fast, plain, strict=True):
        assert torch.allclose(a[0], b[0], atol=1e-6)


def test_momentum_correction_and_8_bit_stack_stay_bit_identical() -> None:
    _, outs = _run("ring:strategy=shared_scale", "dmc(sharedk:ratio=0.1,warmup=2+qsgd:bits=8)", 4, 500, 5,
                   momentum=0.9)  # fmt: skip
    for per_rank in outs:
        assert all(torch.equal(out, per_rank[0]) for out in per_rank)
        assert 0 < int((per_rank[0] != 0).sum()) <= 500


def test_checkpoint_keeps_the_learnt_state() -> None:
    world, n, codec = 3, 200, "dmc(sharedk:ratio=0.1)"
    straight = _run("ring", codec, world, n, 8, momentum=0.9)[1]
    first, _ = _run("ring", codec, world, n, 4, momentum=0.9)
    states = [e.state_dict() for e in first]
    assert all(set(s) == {"memory", "codec"} for s in states)
    resumed = _resume("ring", codec, world, n, range(4, 8), states)
    for s in range(4):
        assert torch.allclose(resumed[s][0], straight[4 + s][0], atol=1e-6)


def _resume(spec: str, codec: str, world: int, n: int, steps: range, states: list[dict]) -> list:
    """Fresh exchanges loaded from each rank's checkpoint, run for ``steps``; results [step][rank]."""
    hub = InProcHub(world, timeout_s=60)
    exchanges = [make_exchange(spec, hub.transport(r), codec, seed=11) for r in range(world)]
    for e, state in zip(exchanges, states, strict=True):
        e.take_momentum(0.9)
        e.load_state_dict(state)
        e.step = steps.start
    outs = [[None] * world for _ in steps]

    def work(rank: int) -> None:
        for i, s in enumerate(steps):
            outs[i][rank] = exchanges[rank].reduce(grads(world, n, seed=s)[rank])

    on_threads(world, work, [hub.abort])
    return outs


def test_parameter_server_falls_back_to_shared_seed_random_k() -> None:
    world, n = 3, 150
    shared_ex, shared = _run("ps", "ef(sharedk:ratio=0.1)", world, n, 4)
    _, plain = _run("ps", "ef(randk:ratio=0.1,scale=false)", world, n, 4)
    for a, b in zip(shared, plain, strict=True):
        assert torch.equal(a[0], b[0])
    assert shared_ex[0].codec.codec_state() == {}  # nothing observed: nothing learnt


@pytest.mark.parametrize("exchange", ["ring", "ps"])
def test_one_step_simulation_is_shared_seed_random_k(exchange: str) -> None:
    from adass.exchange import simulate

    gs = grads(4, 300, seed=2)
    shared = simulate(gs, exchange=exchange, codec="sharedk:ratio=0.1", seed=3, step=7)
    plain = simulate(gs, exchange=exchange, codec="randk:ratio=0.1,scale=false", seed=3, step=7)
    for a, b in zip(shared.outputs, plain.outputs, strict=True):
        assert torch.equal(a, b)
    assert int(shared.traffic.wire_bytes.sum()) == int(plain.traffic.wire_bytes.sum())
