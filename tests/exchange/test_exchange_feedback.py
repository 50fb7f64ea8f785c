"""Error feedback kept by the exchange: ``ef(SPEC)`` is the codec of ``SPEC`` on the wire plus a
memory around each worker's own share, which checkpoints carry through ``Exchange.state_dict``."""

from __future__ import annotations

import threading

import pytest
import torch
from exchange_cases import grads

from adass.codecs import Memory, make_codec
from adass.exchange import InProcHub, make_exchange


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
    assert exchange.codec == make_codec("qsgd:bits=2")
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
