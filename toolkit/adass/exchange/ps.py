"""Parameter Server: S server shards each own a contiguous slice; workers push encoded slices and
pull back what the servers made of them (the weighted mean gradient, or parameters after a step).
A worker's sample count travels in the header of each of its pushes (``counts.py``).

Ranks ``0..W-1`` are workers and ``W..W+S-1`` servers (``W = world - S``): workers call
``reduce``, servers call ``serve_step`` once per step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..codecs import Codec, make_codec
from ..codecs.base import Payload
from ..registry import Param, SpecError
from .base import EXCHANGES, Exchange, output_buffer
from .chunking import ChunkLayout
from .counts import grid_count, require_positive, split_count, with_count
from .feedback import encode_own
from .transport import Transport

__all__ = ["ParameterServer"]

Update = Callable[[int, torch.Tensor], torch.Tensor]  # (shard, mean gradient slice) -> what is pulled

_EMPTY = Payload({}, numel=0)  # an empty slice travels as nothing but a frame


@EXCHANGES.register(
    "ps",
    servers=Param(1, "server shards, each owning a contiguous slice", low=1, high=64),
    pull=Param("fp32", "codec of what workers pull back"),
)
class ParameterServer(Exchange):
    """Synchronous parameter server over any transport whose last ``servers`` ranks are servers.

    Parameters
    ----------
    servers : int
        Number of server shards S; the transport's world is workers + S.
    pull : str
        Codec spec of the pull (servers to workers); fp32 by default.
    transport, codec, seed, run, epoch
        See :class:`~adass.exchange.base.Exchange`.
    update : callable, optional
        Server side: ``update(shard, mean_grad_slice)`` returns what workers pull (e.g. the
        parameters after an optimizer step on that slice); by default the mean gradient itself.
    """

    name = "ps"

    def __init__(self, servers: int = 1, pull: str = "fp32", *, transport: Transport, codec: Codec | str,
                 seed: int = 0, run: str = "", epoch: int = 0, update: Update | None = None) -> None:  # fmt: skip
        super().__init__(transport, codec, seed=seed, run=run, epoch=epoch)
        if transport.world <= servers:
            raise SpecError(
                f"exchange 'ps:servers={servers}': a world of {transport.world} ranks leaves no worker; "
                f"need at least {servers + 1}"
            )
        self.servers, self.workers = servers, transport.world - servers
        self.pull_codec = make_codec(pull)
        self.update = update

    @classmethod
    def check(cls, codec: Codec, servers: int = 1, pull: str = "fp32") -> None:
        make_codec(pull)  # a bad pull spec fails here, with its own message

    @classmethod
    def extra_ranks(cls, servers: int = 1, **params: object) -> int:
        return servers

    @classmethod
    def stage(cls, phase: str, hop: int) -> str:
        return "pull" if phase == "pull" else "push"

    @property
    def is_server(self) -> bool:
        return self.rank >= self.workers

    def reduce(
        self, flat_grad: torch.Tensor, count: float | None = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        if self.is_server:
            raise RuntimeError(f"rank {self.rank} is a server; call serve_step() there")
        t, clock = self.transport, self.clock
        clock.begin()
        x = flat_grad.detach().reshape(-1).to(torch.float32)
        weight = 1.0 if count is None else grid_count(count)
        layout = ChunkLayout(x.numel(), self.servers)
        pulls = [t.irecv(self.workers + s) for s in range(self.servers)]
        sends = []
        for s, (lo, hi) in enumerate(layout.chunks):
            with clock.encoding:
                push = encode_own(self.codec, self.memory, x[lo:hi], self._key(s, 0)) if hi > lo else _EMPTY
            sends.append(t.isend(self.workers + s, with_count(push, weight), self._meta("push", 0, s)))
        out = output_buffer(out, x.numel())
        for (lo, hi), handle in zip(layout.chunks, pulls, strict=True):
            payload = handle.wait()
            if hi > lo:
                with clock.decoding:
                    out[lo:hi] = self.pull_codec.decode(payload)
        for h in sends:
            h.wait()
        self.step += 1
        clock.end()
        return out

    def serve_step(self) -> torch.Tensor:
        """Receive every worker's push, average (weighted by counts, in worker order), reply.

        Returns
        -------
        Tensor
            The mean gradient slice this shard computed.
        """
        if not self.is_server:
            raise RuntimeError(f"rank {self.rank} is a worker; call reduce() there")
        t, shard, clock = self.transport, self.rank - self.workers, self.clock
        clock.begin()
        handles = [t.irecv(w) for w in range(self.workers)]
        counts, pushes = [], []
        for handle in handles:
            push, count = split_count(handle.wait())
            counts.append(count)
            pushes.append(push)
        total = sum(counts)  # in worker order, and exact: counts lie on a grid
        require_positive(total)
        numel = pushes[0].numel
        mean = torch.zeros(numel, dtype=torch.float32)
        with clock.decoding:
            for c, push in zip(counts, pushes, strict=True):
                if numel:
                    mean += self.codec.decode(push) * (c / total)
        result = self.update(shard, mean) if self.update is not None else mean
        with clock.encoding:
            reply = self.pull_codec.encode(result, self._key(shard, 1)) if numel else _EMPTY
        sends = [t.isend(w, reply, self._meta("pull", 0, shard)) for w in range(self.workers)]
        for h in sends:
            h.wait()
        self.step += 1
        clock.end()
        return mean
