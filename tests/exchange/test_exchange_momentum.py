"""Momentum correction kept by the exchange (``mc(SPEC)``): each worker's memory applies the momentum
to its own share, so the ring's (and the parameter server's) mean is the momentum buffer of the mean
gradient; the velocities go into checkpoints; a ratio warm-up changes k, and the bytes, by epoch."""

from __future__ import annotations

import io
import threading

import pytest
import torch
from exchange_cases import grads

from adass.codecs import make_codec, warmup_ratio
from adass.exchange import InProcHub, make_exchange
from adass.memory import MomentumCorrection

MOMENTUM = 0.9


def _exchanges(spec: str, codec: str, world: int, momentum: float | None = MOMENTUM) -> list:
    """One exchange per rank of ``spec`` (PS server ranks included), owning ``momentum``."""
    hub = InProcHub(world + (1 if spec.startswith("ps") else 0))
    exchanges = [make_exchange(spec, hub.transport(r), codec, seed=5) for r in range(hub.world)]
    if momentum is not None:
        assert all(e.take_momentum(momentum) for e in exchanges)
    return exchanges


def _steps(exchanges: list, world: int, steps: range, n: int, epoch: int = 0) -> list[list[torch.Tensor]]:
    """Run ``steps`` on every rank in threads (servers serve); outputs per step, per worker."""
    outs: dict[tuple[int, int], torch.Tensor] = {}

    def work(rank: int) -> None:
        exchanges[rank].epoch = epoch
        for s in steps:
            if rank >= world:
                exchanges[rank].serve_step()
            else:
                outs[(s, rank)] = exchanges[rank].reduce(grads(world, n, seed=s)[rank])

    threads = [threading.Thread(target=work, args=(r,)) for r in range(len(exchanges))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [[outs[(s, r)] for r in range(world)] for s in steps]


@pytest.mark.parametrize("spec", ["ring", "ps"])
@pytest.mark.parametrize(
    "codec", ["mc(fp32)", "mc(randk:ratio=1.0,scale=false)", "dmc(fp32)", "dmc(randk:ratio=1.0,scale=false)"]
)
def test_every_coordinate_sent_gives_the_momentum_buffer_of_the_mean(spec: str, codec: str) -> None:
    world, n = 3, 101
    outputs = _steps(_exchanges(spec, codec, world), world, range(5), n)
    buffer = torch.zeros(n)
    for step, per_rank in enumerate(outputs):
        buffer = MOMENTUM * buffer + torch.stack(grads(world, n, seed=step)).mean(0)
        for out in per_rank:
            assert torch.allclose(out, buffer, rtol=1e-5, atol=1e-5)


def test_only_momentum_correction_takes_the_momentum() -> None:
    hub = InProcHub(2)
    mc = make_exchange("ring", hub.transport(0), "mc(randk:ratio=0.1,scale=false)")
    assert mc.take_momentum(0.7) and isinstance(mc.memory, MomentumCorrection) and mc.memory.momentum == 0.7
    assert not make_exchange("ring", hub.transport(0), "ef(randk:ratio=0.1,scale=false)").take_momentum(0.7)
    assert not make_exchange("ring", hub.transport(0), "fp32").take_momentum(0.7)


@pytest.mark.parametrize(
    ("spec", "codec"),
    [("ring", "mc(randk:ratio=0.1,scale=false)"), ("ring:strategy=shared_scale", "mc(randk:ratio=0.2,scale=false+qsgd:bits=8)"),
     ("ring", "mc(topk:ratio=0.1)"), ("ps", "mc(randk:ratio=0.1,scale=false)"),
     ("ring", "dmc(randk:ratio=0.1,scale=false)"),
     ("ring:strategy=shared_scale", "dmc(randk:ratio=0.2,scale=false+qsgd:bits=8)")],
)  # fmt: skip
def test_a_checkpointed_velocity_continues_as_if_never_stopped(spec: str, codec: str) -> None:
    world, n = 3, 257
    expected = _steps(_exchanges(spec, codec, world), world, range(4), n)
    first = _exchanges(spec, codec, world)
    _steps(first, world, range(2), n)
    states = []
    for e in first[:world]:
        buffer = io.BytesIO()
        torch.save(e.state_dict(), buffer)
        buffer.seek(0)
        states.append(torch.load(buffer, weights_only=True))
    assert all(len(s["memory"]["velocities"]) > 0 for s in states)
    resumed, forgetful = _exchanges(spec, codec, world), _exchanges(spec, codec, world)
    for e, f, state in zip(resumed, forgetful, states, strict=False):
        e.load_state_dict(state)
        f.load_state_dict({"memory": {**state["memory"], "velocities": {}}})  # residuals alone
    for e in resumed + forgetful:
        e.step = 2
    got = _steps(resumed, world, range(2, 4), n)
    for step_expected, step_got in zip(expected[2:], got, strict=True):
        for a, b in zip(step_expected, step_got, strict=True):
            assert torch.equal(a, b)
    assert not torch.equal(
        _steps(forgetful, world, range(2, 3), n)[0][0], expected[2][0]
    )  # velocity mattered


@pytest.mark.parametrize("spec", ["ring", "ps"])
@pytest.mark.parametrize("epoch", [0, 1, 3])
def test_warmup_sends_what_the_epochs_ratio_sends(spec: str, epoch: int) -> None:
    """With warm-up, an epoch moves the same bytes and gives the same mean as the plain codec at that
    epoch's ratio: every rank keeps the same k, and the traffic reports the real payloads."""
    world, n, target, warmup = 4, 1000, 0.01, 3
    ratio = warmup_ratio(target, warmup, epoch)
    warm = _exchanges(spec, f"mc(randk:ratio={target},scale=false,warmup={warmup})", world)
    plain = _exchanges(spec, f"mc(randk:ratio={ratio!r},scale=false)", world)
    got, want = _steps(warm, world, range(2), n, epoch), _steps(plain, world, range(2), n, epoch)
    for a, b in zip(got, want, strict=True):
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)
    sent = [sum(r.wire_bytes for r in e.report().traffic) for e in warm]
    assert sent == [sum(r.wire_bytes for r in e.report().traffic) for e in plain]
    codec = make_codec(f"randk:ratio={target},warmup={warmup}")
    codec.set_epoch(epoch)
    assert codec.k_for(n) == max(1, round(ratio * n))
