"""Shared cases for the exchange tests: seeded worker gradients, the codec specs, and the functions
that spawned gloo processes run (they must live in an importable module)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from adass.exchange import GlooTransport, InProcHub, make_exchange
from adass.exchange.transport import Transfer, Transport
from adass.runtime import on_threads

CODECS = [
    "fp32",
    "fp16",
    "bf16",
    "qsgd:bits=8",
    "qsgd:bits=2,bucket=7",
    "randk:ratio=0.1",
    "randk:ratio=0.2+qsgd:bits=4",
    "topk:ratio=0.1",
    "topk:ratio=0.2+qsgd:bits=8",
    "ef(qsgd:bits=2)",
    "ef(topk:ratio=0.1)",
]


def grads(workers: int, n: int, seed: int = 0) -> list[torch.Tensor]:
    """``workers`` reproducible gradients of ``n`` values with a spread of magnitudes."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(n, generator=gen) * torch.rand(n, generator=gen).mul(2).exp() for _ in range(workers)]


def weighted_mean(gs: list[torch.Tensor], counts: list[float] | None) -> torch.Tensor:
    """The exact (float64) count-weighted mean, as float32."""
    stacked = torch.stack([g.to(torch.float64) for g in gs])
    w = (
        torch.ones(len(gs), dtype=torch.float64)
        if counts is None
        else torch.tensor(counts, dtype=torch.float64)
    )
    return ((stacked * w[:, None]).sum(0) / w.sum()).to(torch.float32)


def ring_against_all_reduce(rank: int, world: int, sizes: list[int], segment_bytes: int) -> dict:
    """In a spawned process: the ring's fp32 mean, the same reduced in place (``out=x``, as
    replicas call it) and torch's all_reduce mean, per size."""
    out = {}
    ring = make_exchange("ring", GlooTransport(segment_bytes=segment_bytes), "fp32", seed=1)
    for n in sizes:
        x = grads(world, n, seed=n)[rank]
        reference = x.clone()
        dist.all_reduce(reference)
        mean = ring.reduce(x)
        in_place = x.clone()
        ring.reduce(in_place, out=in_place)
        out[n] = (mean, reference / world, in_place)
    return out


def lossy_over_gloo(rank: int, world: int, cases: list[tuple[str, str]], n: int, counts: list[float],
                    in_place: bool = False) -> list:  # fmt: skip
    """In a spawned process: one reduce per (exchange, codec) case; the result per rank and case
    (``in_place``: the result overwrites the gradient, ``reduce(x, out=x)``)."""
    out = []
    for i, (spec, codec) in enumerate(cases):
        transport = GlooTransport(tag_base=10 * i)
        exchange = make_exchange(spec, transport, codec, seed=3)
        exchange.step = 2
        if getattr(exchange, "is_server", False):
            exchange.serve_step()
            out.append(None)
            continue
        x = grads(len(counts), n, seed=5)[rank]
        result = exchange.reduce(x, count=counts[rank], out=x if in_place else None)
        assert not in_place or result.data_ptr() == x.data_ptr()
        records = exchange.report().traffic
        out.append({"out": result, "wire": sum(r.wire_bytes for r in records),
                    "raw": sum(r.raw_bytes for r in records)})  # fmt: skip
    return out


def throttled_steps(rank: int, world: int, codecs: list[str], n: int, link: str) -> dict:
    """In a spawned process: per codec, two ring steps over a throttled gloo link (the second on a
    link idle since long before); per codec the second step's wall time and every record's
    (phase, seconds, sim_seconds) of it."""
    out = {}
    for i, codec in enumerate(codecs):
        exchange = make_exchange("ring", GlooTransport(link=link, throttle=True, tag_base=10 * i), codec)
        x = grads(world, n, seed=rank)[rank]
        exchange.reduce(x)
        exchange.report()  # the warm-up step's records are left out
        time.sleep(0.2)  # longer than a step: the link has long been free when the next one starts
        dist.barrier()
        start = time.perf_counter()
        exchange.reduce(x)
        wall_s = time.perf_counter() - start
        out[codec] = {
            "wall_s": wall_s,
            "records": [(r.phase, r.seconds, r.sim_seconds) for r in exchange.report().traffic],
        }
    return out


VALUES_META = Transfer("reduce_scatter", hop=1, chunk=2, step=3)


def values_between(transport: Transport, peer: int) -> dict | None:
    """Rank 0 sends ten agreed float32 values (standing for 8 dense ones) with ``isend_values``;
    rank 1 receives them with ``irecv_values``; the receiver returns what it saw."""
    if transport.rank == 0:
        transport.isend_values(peer, torch.arange(10, dtype=torch.float32), 8, VALUES_META).wait()
        return None
    into = torch.full((10,), -1.0)
    got = transport.irecv_values(peer, into, 8, VALUES_META).wait()
    records = transport.log.drain()
    return {"values": got.tensors["values"].tolist(), "into": into.tolist(), "numel": got.numel,
            "records": [(r.phase, r.hop, r.chunk, r.step, r.raw_bytes, r.wire_bytes) for r in records]}  # fmt: skip


def values_over_gloo(rank: int, world: int) -> dict | None:
    """In a spawned process: :func:`values_between` over gloo."""
    return values_between(GlooTransport(), 1 - rank)


def fails(rank: int, world: int) -> None:
    """In a spawned process: rank 1 raises, rank 0 waits on a receive that never comes."""
    if rank == 1:
        raise ValueError("deliberate failure")
    dist.recv(torch.empty(1), src=1)


def inproc_steps(
    spec: str, codec: str, n: int, counts: list[list[float]], seed: int = 3, epochs: list[int] | None = None,
    device: str = "cpu",
) -> list[list[torch.Tensor]]:  # fmt: skip
    """One exchange per in-process rank kept over several steps (``counts[step][rank]``, ``grads``
    seeded by the step, in epoch ``epochs[step]`` where given, on ``device``); the result of every
    step on every rank, ``[step][rank]`` (None on PS server ranks)."""
    world = len(counts[0])
    hub = InProcHub(world, timeout_s=60)
    results = [[None] * world for _ in counts]

    def work(rank: int) -> None:
        exchange = make_exchange(spec, hub.transport(rank, device=device), codec, seed=seed)
        for step, row in enumerate(counts):
            exchange.epoch = 0 if epochs is None else epochs[step]
            if getattr(exchange, "is_server", False):
                exchange.serve_step()  # a PS server rank: its result stays None
            else:
                results[step][rank] = exchange.reduce(grads(world, n, seed=step)[rank].to(device), row[rank])

    on_threads(world, work, [hub.abort])
    return results


def steps_over_gloo(
    rank: int, world: int, cases: list[tuple[str, str]], n: int, counts: list[list[float]],
    epochs: list[int] | None = None,
) -> list:  # fmt: skip
    """In a spawned process: per case, several steps as in ``inproc_steps``; per step the result,
    the call's wall time and timers, and the payloads and transport messages this rank sent."""
    out = []
    for i, (spec, codec) in enumerate(cases):
        transport = GlooTransport(tag_base=10 * i)
        exchange = make_exchange(spec, transport, codec, seed=3)
        steps = []
        for step, row in enumerate(counts):
            exchange.epoch = 0 if epochs is None else epochs[step]
            payloads, messages = transport.log.sent_messages, transport.log.wire_messages
            start = time.perf_counter()
            result = exchange.reduce(grads(world, n, seed=step)[rank], row[rank])
            wall_s = time.perf_counter() - start
            done = exchange.report()
            timers = {"encode_s": done.encode_s, "decode_s": done.decode_s, "comm_s": done.comm_s}
            steps.append({"out": result, "wall_s": wall_s, "timers": timers,
                          "payloads": transport.log.sent_messages - payloads,
                          "messages": transport.log.wire_messages - messages})  # fmt: skip
        exchange.report()  # the records of these steps are not asked for
        out.append(steps)
    return out


def stamped_values_over_gloo(rank: int, world: int, sizes: list[int], link: str) -> dict | None:
    """In a spawned process: rank 0 sends float32 tensors of ``sizes`` values over a throttled gloo
    link with ``isend_values``, rank 1 receives them; rank 0 returns the messages each send took,
    rank 1 what arrived and each record's (seconds, sim_seconds)."""
    transport = GlooTransport(link=link, throttle=True)
    meta = Transfer("reduce_scatter", hop=0, chunk=0, step=0)
    sent = [torch.arange(n, dtype=torch.float32) * (1 + i) for i, n in enumerate(sizes)]
    if rank == 0:
        messages = []
        for values in sent:
            before = transport.log.wire_messages
            transport.isend_values(1, values, values.numel(), meta).wait()
            messages.append(transport.log.wire_messages - before)
        return {"messages": messages}
    handles = [transport.irecv_values(0, torch.empty(n), n, meta) for n in sizes]
    got = [h.wait().tensors["values"].clone() for h in handles]
    records = transport.log.drain()
    return {"equal": [torch.equal(a, b) for a, b in zip(got, sent, strict=True)],
            "timing": [(r.seconds, r.sim_seconds) for r in records]}  # fmt: skip


def segmented_ring_over_gloo(rank: int, world: int, n: int, segment_bytes: list[int]) -> dict:
    """In a spawned process: a weighted fp32 ring step over gloo for each piece size in
    ``segment_bytes``; per size the result and the number of pieces this rank received (its
    transport records deliveries)."""
    out = {}
    x = grads(world, n, seed=5)[rank]
    for i, size in enumerate(segment_bytes):
        exchange = make_exchange("ring", GlooTransport(segment_bytes=size, tag_base=10 * i), "fp32")
        result = exchange.reduce(x, count=float(rank + 1)).clone()
        received = [r for r in exchange.report().traffic if r.dst == rank]
        out[size] = {"result": result, "pieces": len(received)}
    return out


class _Recording(GlooTransport):
    """A gloo endpoint that notes the order in which it posts its sends and receives."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.posted: list[str] = []

    def _post_recv(self, tensor: torch.Tensor, src: int, tag: int):
        self.posted.append("recv")
        return super()._post_recv(tensor, src, tag)

    def _post_send(self, tensor: torch.Tensor, dst: int, tag: int):
        self.posted.append("send")
        return super()._post_send(tensor, dst, tag)


def ring_pair_over_gloo(rank: int, world: int, n: int, codecs: list[str], segment_bytes: int) -> dict:
    """In a spawned process (P = 2): one weighted ring step per codec with the transport told its
    peer is on this machine, then on another host; per (codec, between hosts) the result and
    whether the first thing posted was a send or a receive."""
    out = {}
    x = grads(world, n, seed=7)[rank]
    for i, codec in enumerate(codecs):
        for j, between in enumerate((False, True)):
            transport = _Recording(
                segment_bytes=segment_bytes, tag_base=10 * (2 * i + j), between_hosts=between
            )
            result = make_exchange("ring", transport, codec, seed=1).reduce(x, count=float(rank + 1)).clone()
            out[(codec, between)] = {"result": result, "first": transport.posted[0]}
    return out


def ring_on_device(rank: int, world: int, n: int, codecs: list[str], placement: str) -> dict:
    """In a spawned process: one weighted ring step per codec on this rank's device, ``placement``
    ``cpu``, ``cuda`` (every rank on GPU 0, the group gloo: bodies go through host copies) or
    ``nccl`` (rank r on GPU r, bodies over nccl); the results on the host, where they were made and
    where the bodies travelled."""
    gpu = rank if placement == "nccl" else 0
    device = torch.device("cpu") if placement == "cpu" else torch.device("cuda", gpu)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    out = {}
    for i, codec in enumerate(codecs):
        transport = GlooTransport(tag_base=10 * i, device=device)
        exchange = make_exchange("ring:segment_kb=1", transport, codec, seed=3)
        x = grads(world, n, seed=2)[rank].to(device)
        result = exchange.reduce(x.clone(), float(rank + 1))
        in_place = exchange.reduce(x, float(rank + 1), out=x)
        out[codec] = {"result": result.cpu(), "in_place": in_place.cpu(), "device": str(result.device),
                      "wire": str(transport.wire)}  # fmt: skip
    return out
