"""Error feedback kept by the exchange: ``ef(SPEC)`` is the codec of ``SPEC`` on the wire plus a
memory around each worker's own share, which checkpoints carry through ``Exchange.state_dict``."""

from __future__ import annotations

import threading

import pytest
import torch
from exchange_cases import grads, weighted_mean

from adass.codecs import make_codec
from adass.exchange import InProcHub, make_exchange
from adass.exchange.chunking import ChunkLayout
from adass.memory import Memory


def _steps(exchanges: list, steps: range, n: int) -> list[list[torch.Tensor]]:
    """Run ``steps`` on every rank's exchange in threads; outputs per step, per rank."""
    outs: dict[tuple[int, int], torch.Tensor] = {}

    def work(rank: int) -> None:
        for s in steps:
            outs[(s, rank)] = exchanges[rank].reduce(grads(len(exchanges), n, seed=s)[rank])

    threads = [threading.Thread(target=work, args=(r,)) for r in range(len(exchanges))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [[outs[(s, r)] for r in range(len(exchanges))] for s in steps]


def _ring(hub: InProcHub, spec: str, codec: str) -> list:
    return [make_exchange(spec, hub.transport(r), codec, seed=3) for r in range(hub.world)]


@pytest.mark.parametrize("spec", ["ring", "ring:strategy=shared_scale", "ps"])
def test_ef_travels_as_its_inner_codec_with_a_memory_on_the_exchange(spec: str) -> None:
    hub = InProcHub(3)
    exchange = make_exchange(spec, hub.transport(0), "ef(qsgd:bits=2)")
    # the memory's variant travels: nearest rounding, which keeps the residual bounded
    assert exchange.codec == make_codec("qsgd:bits=2,rounding=nearest")
    assert isinstance(exchange.memory, Memory)
    plain = make_exchange(spec, hub.transport(0), "qsgd:bits=2")
    assert plain.memory is None and plain.state_dict() == {}


@pytest.mark.parametrize(
    ("spec", "codec"),
    [("ring", "ef(qsgd:bits=2)"), ("ring:strategy=shared_scale", "ef(qsgd:bits=2)"),
     ("ring", "ef(topk:ratio=0.1)"), ("ring", "ef(randk:ratio=0.1,scale=false)")],
)  # fmt: skip
def test_a_checkpointed_memory_continues_as_if_never_stopped(spec: str, codec: str) -> None:
    n, world = 257, 3
    through = _ring(InProcHub(world), spec, codec)
    expected = _steps(through, range(4), n)
    first = _ring(InProcHub(world), spec, codec)
    _steps(first, range(2), n)
    states = [e.state_dict() for e in first]
    assert all(len(s["memory"]["residuals"]) > 0 for s in states)
    resumed = _ring(InProcHub(world), spec, codec)
    for e, state in zip(resumed, states, strict=True):
        e.load_state_dict(state)
        e.step = 2
    got = _steps(resumed, range(2, 4), n)
    for step_expected, step_got in zip(expected[2:], got, strict=True):
        for a, b in zip(step_expected, step_got, strict=True):
            assert torch.equal(a, b)
    fresh = _ring(InProcHub(world), spec, codec)
    for e in fresh:
        e.step = 2
    assert not torch.equal(_steps(fresh, range(2, 3), n)[0][0], expected[2][0])  # the memory mattered


@pytest.mark.parametrize(
    ("spec", "codec"),
    [("ring", "ef(randk:ratio=0.3,scale=false)"), ("ring", "ef(topk:ratio=0.3)"),
     ("ring", "mc(randk:ratio=0.3,scale=false)"), ("ring", "dmc(randk:ratio=0.3,scale=false)"),
     ("ring:strategy=requantize", "ef(qsgd:bits=2)"),
     ("ring:strategy=requantize", "ef(qsgd:bits=4,bucket=16)"), ("ring:strategy=requantize", "mc(qsgd:bits=8)"),
     ("ring:strategy=shared_scale", "ef(qsgd:bits=2)")],
)  # fmt: skip
def test_what_was_sent_and_what_is_kept_add_up_when_counts_change(spec: str, codec: str) -> None:
    """The ring scales each step's sum by hint / total once the total is known; the memories are
    restated in those units, so the outputs of all steps plus every rank's residual are the sum of
    the steps' weighted means, however the counts change (at momentum 0, mc keeps the same sums).
    Under ``requantize`` every rank keeps what its hop's encoding of the partial sum lost, so
    nothing is lost there either."""
    world, n = 3, 120
    counts = [[2.0, 1.0, 3.0], [2.0, 1.0, 3.0], [0.5, 4.0, 0.0], [1.0, 1.0, 1.0], [8.0, 2.0, 6.0]]
    hub = InProcHub(world)
    exchanges = [make_exchange(spec, hub.transport(r), codec, seed=3) for r in range(world)]
    outs: dict[tuple[int, int], torch.Tensor] = {}

    def work(rank: int) -> None:
        for s, row in enumerate(counts):
            outs[(s, rank)] = exchanges[rank].reduce(grads(world, n, seed=s)[rank], row[rank])

    threads = [threading.Thread(target=work, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wanted = sum(weighted_mean(grads(world, n, seed=s), row).double() for s, row in enumerate(counts))
    sent = sum(outs[(s, 0)].double() for s in range(len(counts)))
    kept = torch.zeros(n, dtype=torch.float64)
    for e in exchanges:
        for piece in ChunkLayout(n, world, None).all_pieces():
            residual = e.memory.residuals.get(piece.pid)
            if residual is not None:
                kept[piece.lo : piece.hi] += residual.double()
    assert torch.allclose(sent + kept, wanted, rtol=1e-4, atol=1e-4)
