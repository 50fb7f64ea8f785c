"""Traffic records: one per transfer, wire bytes equal to the payloads' real size, phases and hops
as the algorithms define them, and the step-time model."""

from __future__ import annotations

import time

import pytest
import torch
from exchange_cases import grads

from adass.codecs import Payload
from adass.exchange import InProcTransport, Link, simulate, topology_of
from adass.exchange.transport import Transfer
from adass.exchange.transport import inproc as inproc_module
from adass.metrics import TrafficRecord, columns


class _Spy(InProcTransport):
    """Keeps every payload it sends, with what the record will say about it."""

    sent: list[tuple[int, int, str, int, int]] = []

    def isend(self, dst: int, payload: Payload, meta: Transfer, repeat=None):
        real = payload.header_bytes + sum(t.numel() * t.element_size() for t in payload.tensors.values())
        _Spy.sent.append((self.rank, dst, meta.phase, meta.hop, real))
        return super().isend(dst, payload, meta, repeat)


@pytest.mark.parametrize("exchange, codec, counts", [
    ("ring", "qsgd:bits=4", None), ("ring:strategy=shared_scale", "randk:ratio=0.1+qsgd:bits=8", [1, 2, 3]),
    ("ring", "topk:ratio=0.1", [2, 2, 1]), ("ps:servers=2", "qsgd:bits=8", None), ("ring", "fp16", [1, 1, 1]),
])  # fmt: skip
def test_wire_bytes_are_the_payloads_real_size(monkeypatch, exchange: str, codec: str, counts) -> None:
    _Spy.sent = []
    monkeypatch.setattr(inproc_module, "InProcTransport", _Spy)
    result = simulate(grads(3, 777, seed=1), exchange=exchange, codec=codec, counts=counts)
    frame = result.traffic
    assert list(frame.columns) == columns(TrafficRecord)
    got = sorted(zip(frame.src, frame.dst, frame.phase, frame.hop, frame.wire_bytes, strict=True))
    assert got == sorted(_Spy.sent)
    assert result.wire_bytes == sum(s[-1] for s in _Spy.sent)
    link = Link.parse("1gbit,50us")
    assert all(
        s == pytest.approx(link.seconds(w)) for s, w in zip(frame.sim_seconds, frame.wire_bytes, strict=True)
    )
    assert (frame.seconds >= 0).all()


@pytest.mark.parametrize("counts", [None, [1, 3, 2, 5]])
def test_ring_phases_hops_and_bytes(counts) -> None:
    workers, n = 4, 4000
    result = simulate(grads(workers, n), exchange="ring", codec="fp32", counts=counts)
    t = result.traffic
    assert set(t.phase) == {"reduce_scatter", "all_gather"}  # counts ride inside, no round of their own
    for phase in ("reduce_scatter", "all_gather"):
        part = t[t.phase == phase]
        assert sorted(set(part.hop)) == list(range(workers - 1))
        assert len(part) == workers * (workers - 1)
        assert (part.dst == (part.src + 1) % workers).all()
        assert (part.raw_bytes == 4 * n // workers).all()
    # a partial sum carries its count in 8 bytes after the values; the finals are values only
    extra = 0 if counts is None else 8
    assert (t[t.phase == "reduce_scatter"].wire_bytes == 4 * n // workers + extra).all()
    assert (t[t.phase == "all_gather"].wire_bytes == 4 * n // workers).all()


def test_ps_phases_and_servers() -> None:
    result = simulate(grads(3, 100), exchange="ps:servers=2", codec="fp32", counts=[1, 2, 3])
    t = result.traffic
    assert set(t.phase) == {"push", "pull"}
    push, pull = t[t.phase == "push"], t[t.phase == "pull"]
    assert set(push.dst) == {3, 4} and set(push.src) == {0, 1, 2}
    assert set(pull.src) == {3, 4} and set(pull.dst) == {0, 1, 2}
    assert pull.wire_bytes.sum() == 3 * 4 * 100
    assert push.wire_bytes.sum() == 3 * 4 * 100 + len(push) * 8  # each push carries its count


def test_step_time_model() -> None:
    workers, n = 4, 1000
    link = Link.parse("1gbit,50us")
    ring = simulate(grads(workers, n), exchange="ring", codec="fp32", link=link)
    hop = link.seconds(4 * n // workers)
    assert ring.sim_seconds == pytest.approx(2 * (workers - 1) * hop)
    assert ring.step_seconds("10gbit,5us") == pytest.approx(
        2 * (workers - 1) * Link.parse("10gbit,5us").seconds(1000)
    )
    ps = simulate(grads(workers, n), exchange="ps", codec="fp32", link=link)
    # the server's ingress takes every push (each with its count) back to back, then its egress every pull
    push = link.seconds(workers * (4 * n + 8))
    pull = link.seconds(workers * 4 * n)
    assert ps.sim_seconds == pytest.approx(push + pull)
    assert list(ps.stages()) == ["push", "pull"]
    assert topology_of("ring").step_seconds([], link) == 0.0


def test_throttled_inproc_transfers_take_the_modelled_time() -> None:
    from adass.exchange import InProcHub

    hub = InProcHub(2)
    link = Link.parse("8mbit,2ms")  # 1000 bytes: 3 ms
    a, b = hub.transport(0, link, throttle=True), hub.transport(1, link, throttle=True)
    payload = Payload({"values": torch.zeros(250)}, numel=250)
    before_first = time.time()
    for hop in range(3):
        a.send(1, payload, Transfer("push", hop))
    after_third = time.time()
    for _ in range(3):
        b.recv(0)
    records = b.log.drain()
    assert [r.hop for r in records] == [0, 1, 2]
    assert all(r.seconds >= r.sim_seconds * 0.999 for r in records)
    # queued behind the first two: the link frees three transfers after the first send, and the third
    # message's own clock starts when it was sent, at most ``after_third - before_first`` later
    assert records[-1].seconds >= 3 * records[-1].sim_seconds * 0.999 - (after_third - before_first)
    assert b.log.received_bytes == 3000 and a.log.sent_messages == 3
