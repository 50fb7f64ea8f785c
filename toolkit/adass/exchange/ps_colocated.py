"""Colocated parameter server (``ps:colocated=true``): server shard s runs inside worker s's process,
as BytePS and ps-lite deployments place it, so a run needs no ranks (and no Dask workers) besides
the replicas.

Every rank is a worker; ranks ``0..S-1`` also serve one shard each. A step on rank r: post the
receives (pulls from the other shards; pushes from the other workers where r serves), push every
slice but its own shard's, serve its shard, then take the pulls. A worker's slice for its own shard
and the reply to it stay in the process (no message), so a step sends ``2 (W - 1) S`` messages
instead of a dedicated server's ``2 W S``. The arithmetic is the dedicated server's, in the same
order and with the same codec keys, so both give bit-identical results.
"""

from __future__ import annotations

from typing import Any

import torch

from ..codecs import Codec
from ..codecs.base import Payload
from ..memory import Memory
from ..memory.own import encode_own
from .base import output_buffer
from .chunking import ChunkLayout
from .counts import grid_count, with_count
from .ps import _EMPTY, ParameterServer, variant
from .topology import topology_of
from .transport import RecvHandle, Transport

__all__ = ["ColocatedParameterServer"]


@variant("colocated")
class ColocatedParameterServer(ParameterServer):
    """A parameter server whose shard s is served by worker s (``servers`` <= workers = world).

    Built by ``ps:...,colocated=true``; parameters as for
    :class:`~adass.exchange.ps.ParameterServer`. Under ``update=server`` the ranks that serve a shard
    own its parameters and optimizer state (:meth:`own`), which their own checkpoint holds.
    """

    def __init__(self, servers: int = 1, pull: str = "fp32", update: str = "replica", mode: str = "sync",
                 staleness: int = 0, colocated: bool = True, *, transport: Transport, codec: Codec | str,
                 memory: Memory | str | None = None, seed: int = 0, run: str = "",
                 epoch: int = 0) -> None:  # fmt: skip
        super().__init__(servers, pull, update, mode, staleness, colocated, transport=transport, codec=codec,
                         memory=memory, seed=seed, run=run, epoch=epoch)  # fmt: skip

    @classmethod
    def worker_count(cls, world: int, servers: int) -> int:
        topology_of(cls.name).check_workers(world, servers, colocated=True)
        return world

    @property
    def is_server(self) -> bool:
        return False  # every rank is a worker first; serving happens inside reduce()

    def held_shard(self) -> tuple[int, int] | None:
        return (self.rank, self.servers) if self.rank < self.servers else None

    def serve_step(self) -> Any:
        raise RuntimeError("a colocated parameter server has no server ranks; every rank calls reduce()")

    def reduce(
        self, flat_grad: torch.Tensor, count: float | None = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        t, clock = self.transport, self.clock
        clock.begin()
        x = flat_grad.detach().reshape(-1).to(torch.float32)
        weight = 1.0 if count is None else grid_count(count)
        layout = ChunkLayout(x.numel(), self.servers)
        held = self.held_shard()
        mine = None if held is None else held[0]
        # every receive is posted before anything leaves. Receives from one peer complete in the
        # order they were posted, and a peer sends its push before its shard's reply: pushes first
        arriving = {w: t.irecv(w) for w in range(self.workers) if w != self.rank} if mine is not None else {}
        pulls = {s: t.irecv(s) for s in range(self.servers) if s != mine}
        sends, own_push = [], _EMPTY
        for s, (lo, hi) in enumerate(layout.chunks):
            with clock.encoding:
                push = encode_own(self.codec, self.memory, x[lo:hi], self._key(s, 0)) if hi > lo else _EMPTY
            push = with_count(push, weight)
            if s == mine:
                own_push = push  # stays in the process
            else:
                sends.append(t.isend(s, push, self._meta("push", 0, s)))
        replies: dict[int, Payload] = {}
        if mine is not None:
            replies[mine] = self._serve_own(mine, own_push, arriving, sends)
        return self._finish(layout, output_buffer(out, x),
                            lambda s: replies[s] if s == mine else pulls[s].wait(), sends)  # fmt: skip

    def _serve_own(
        self, shard: int, own_push: Payload, arriving: dict[int, RecvHandle], sends: list
    ) -> Payload:
        """Serve this rank's shard: the pushes in worker order (its own from the process), the
        reply sent to every other worker; returns the reply this worker keeps."""
        arrived = [own_push if w == self.rank else arriving[w].wait() for w in range(self.workers)]
        _, reply = self._serve(shard, arrived)
        for w in range(self.workers):
            if w != self.rank:
                sends.append(self.transport.isend(w, reply, self._meta("pull", 0, shard)))
        return reply
