"""Parameter Server: S server shards each own a contiguous slice; workers push encoded slices and
pull back what the servers made of them: the weighted mean gradient (``update=replica``, every
worker steps its own optimizer) or the shard's parameters after the server's own optimizer step
(``update=server``, :class:`ShardUpdate`). A worker's sample count travels in the header of each of
its pushes (``counts.py``).

Ranks ``0..W-1`` are workers and ``W..W+S-1`` servers (``W = world - S``): workers call
``reduce``, servers call ``serve_step`` once per step (or ``serve_epoch``). This file is the
synchronous server; ``ps_async.py`` adds the asynchronous and stale-synchronous ones
(``mode=async|ssp``), which the same spec builds. With ``colocated=true`` server shard s lives in
worker s's process instead and the world is the workers alone (``ps_colocated.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from ..codecs import Codec, make_codec
from ..codecs.base import ChunkKey, Payload
from ..memory import Memory
from ..memory.own import encode_own
from ..metrics import TrafficRecord
from ..registry import Param, SpecError
from .base import EXCHANGES, Exchange, output_buffer
from .chunking import ChunkLayout
from .counts import grid_count, require_positive, split_count, with_count
from .lowrank import ROUNDS, check_low_rank, factored_step
from .serving import Server, ShardUpdate
from .topology import ServerTopology, declares
from .transport import Transport

__all__ = ["MODES", "ParameterServer", "ShardUpdate", "variant"]

#: consistency models the spec may name
MODES = ("sync", "async", "ssp")


_EMPTY = Payload({}, numel=0)  # an empty slice travels as nothing but a frame
#: a low-rank push's header: its round ("p", "q" or "" for the whole gradient; a byte) and the raw
#: fp32 bytes it stands for (uint32: the gradient slice's in round p, none in round q), which the
#: server's reply records as its own
_ROUND_BYTES = 1 + 4

#: the subclass that a spec value selects, by (parameter, value): ``colocated=true``
#: (ps_colocated.py), ``mode=async`` and ``mode=ssp`` (ps_async.py)
_VARIANTS: dict[tuple[str, Any], type[ParameterServer]] = {}


def variant(param: str, *values: Any) -> Any:
    """Class decorator: build this subclass of :class:`ParameterServer` where the spec gives
    ``param`` one of ``values`` (``True`` where none is named)."""

    def decorate(kind: type[ParameterServer]) -> type[ParameterServer]:
        for value in values or (True,):
            _VARIANTS[(param, value)] = kind
        return kind

    return decorate


def _built_modes() -> list[str]:
    return ["sync", *(value for param, value in _VARIANTS if param == "mode")]


@EXCHANGES.register(
    "ps",
    servers=Param(1, "server shards, each owning a contiguous slice", low=1, high=64),
    pull=Param("fp32", "codec of what workers pull back"),
    update=Param(
        "replica",
        "who steps the optimizer: every replica on the pulled mean gradient, or "
        "each server on its slice (workers pull parameters)",
        choices=("replica", "server"),
    ),
    mode=Param(
        "sync",
        "consistency model: sync (every step waits for all workers), async (each push "
        "applied as it comes), ssp (async, no worker more than `staleness` steps ahead); "
        "async and ssp need update=server",
        choices=MODES,
    ),
    staleness=Param(
        0, "plan steps a worker's progress may run ahead of the slowest's (mode=ssp)", low=0, high=1024
    ),
    colocated=Param(
        False,
        "server shard s runs in worker s's process (servers <= workers): no extra ranks or Dask workers",
    ),
)
@declares(ServerTopology())
class ParameterServer(Exchange, Server):
    """Synchronous parameter server over any transport whose last ``servers`` ranks are servers.

    Parameters
    ----------
    servers : int
        Number of server shards S; the transport's world is workers + S.
    pull : str
        Codec spec of the pull (servers to workers); fp32 by default.
    update : {"replica", "server"}
        ``replica``: servers reply with the mean gradient and every worker steps its optimizer.
        ``server``: each server steps its :class:`ShardUpdate` (given to :meth:`own` before the first
        step) and workers pull parameters (:attr:`pulls_parameters`); a step whose counts add up to
        zero leaves the parameters as they are.
    mode, staleness
        The consistency model: this class runs ``sync``; ``async`` and ``ssp`` (with its bound
        ``staleness``) build :class:`~adass.exchange.ps_async.AsyncParameterServer`.
    colocated : bool
        Builds :class:`~adass.exchange.ps_colocated.ColocatedParameterServer` instead: no server
        ranks, shard s served inside worker s (``mode=sync`` only).
    transport, codec, memory, seed, run, epoch
        See :class:`~adass.exchange.base.Exchange`.
    """

    name = "ps"

    def __new__(cls, *args: Any, **params: Any) -> ParameterServer:
        if cls is not ParameterServer:  # a subclass named directly builds itself
            return super().__new__(cls)
        chosen = [kind for (param, value), kind in _VARIANTS.items() if params.get(param) == value]
        return super().__new__(chosen[0] if chosen else cls)

    def __init__(self, servers: int = 1, pull: str = "fp32", update: str = "replica", mode: str = "sync",
                 staleness: int = 0, colocated: bool = False, *, transport: Transport, codec: Codec | str,
                 memory: Memory | str | None = None, seed: int = 0, run: str = "",
                 epoch: int = 0) -> None:  # fmt: skip
        super().__init__(transport, codec, memory=memory, seed=seed, run=run, epoch=epoch)
        self.check(self.codec, self.memory, servers, pull, update, mode, staleness, colocated)
        self.servers, self.workers = servers, self.worker_count(transport.world, servers)
        self.pull_codec = make_codec(pull)
        self.pulls_parameters = update == "server"
        self.shard_update: ShardUpdate | None = None

    @classmethod
    def worker_count(cls, world: int, servers: int) -> int:
        """The workers among ``world`` ranks (SpecError where none is left)."""
        if world <= servers:
            raise SpecError(f"exchange 'ps:servers={servers}': a world of {world} ranks leaves no worker; "
                            f"need at least {servers + 1}")  # fmt: skip
        return world - servers

    @classmethod
    def check(cls, codec: Codec, memory: Memory | None = None, servers: int = 1, pull: str = "fp32",
              update: str = "replica", mode: str = "sync", staleness: int = 0,
              colocated: bool = False) -> None:  # fmt: skip
        if colocated and mode != "sync":
            raise SpecError(f"exchange 'ps': colocated=true is built for mode=sync; got mode={mode}")
        make_codec(pull)  # a bad pull spec fails here, with its own message
        if mode not in _built_modes():
            raise SpecError(f"exchange 'ps': mode={mode} is not built; built: {', '.join(_built_modes())}")
        if mode != "sync" and update != "server":
            raise SpecError(f"exchange 'ps': mode={mode} needs update=server (each server applies pushes "
                            f"as they come); got update={update}")  # fmt: skip
        if update == "server" and memory is not None and memory.owns_momentum:
            raise SpecError(f"exchange 'ps': update=server applies the momentum on the servers; memory "
                            f"{memory.name!r} applies it on the workers already (use memory ef or update=replica)")  # fmt: skip
        if codec.low_rank() is not None:
            owner = f"exchange 'ps' with codec {codec.name!r}"
            if update != "replica" or colocated or pull != "fp32":
                raise SpecError(
                    f"{owner}: the servers average factors, not gradients, so the codec needs "
                    "update=replica, pull=fp32 and dedicated servers (colocated=false)"
                )
            check_low_rank("exchange 'ps'", codec, memory)
        if staleness and mode != "ssp":
            raise SpecError(f"exchange 'ps': staleness={staleness} bounds mode=ssp only; "
                            f"with mode={mode} it must be 0")  # fmt: skip

    def own(self, shard_update: ShardUpdate) -> None:
        """Give this server rank (``update=server``) the parameters and optimizer state it owns."""
        if self.held_shard() is None or not self.pulls_parameters:
            raise RuntimeError(f"rank {self.rank} owns no parameters (a worker, or update=replica)")
        self.shard_update = shard_update

    def held_shard(self) -> tuple[int, int] | None:
        return (self.rank - self.workers, self.servers) if self.is_server else None

    def state_dict(self) -> dict[str, Any]:
        """Besides the error-feedback memory, a server's shard (parameters and optimizer state)."""
        state = super().state_dict()
        if self.shard_update is not None:
            state["shard"] = self.shard_update.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.shard_update is not None:
            if "shard" not in state:
                raise ValueError(f"server rank {self.rank}: the saved state holds no shard to resume from")
            self.shard_update.load_state_dict(state["shard"])

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
        if self.codec.low_rank() is not None:
            return self._reduce_low_rank(x, weight, output_buffer(out, x))
        layout = ChunkLayout(x.numel(), self.servers)
        pulls = [t.irecv(self.workers + s) for s in range(self.servers)]
        sends = []
        for s, (lo, hi) in enumerate(layout.chunks):
            with clock.encoding:
                push = encode_own(self.codec, self.memory, x[lo:hi], self._key(s, 0)) if hi > lo else _EMPTY
            sends.append(t.isend(self.workers + s, self._tag_push(s, push, weight), self._meta("push", 0, s)))
        return self._finish(
            layout, output_buffer(out, x), lambda s: self._take_pull(s, pulls[s].wait()), sends
        )

    def _reduce_low_rank(self, x: torch.Tensor, weight: float, out: torch.Tensor) -> torch.Tensor:
        """A step of a low-rank codec: the whole gradient as fp32 during its warm-up, else the ``P``
        and ``Q`` rounds (``adass.exchange.lowrank``), each a push of float32 slices and a pull of
        their weighted means."""

        def reduction(round_name: str, vector: torch.Tensor) -> torch.Tensor:
            return self._round(round_name, vector, weight, x.numel())

        if self.codec.low_rank().begin_step():
            factored_step(self.codec, self.memory, x, self._key(0, 0), reduction, out, 1.0, self.clock)
        else:
            out.copy_(self._round("", x, weight, x.numel()))
            self.codec.low_rank().warm(out, self._key(0, 0))
        self.step += 1
        self.clock.end()
        return out

    def _round(self, round_name: str, vector: torch.Tensor, weight: float, numel: int) -> torch.Tensor:
        """One push of ``vector``'s slices to the servers and the pull of their weighted means, as
        float32 (phases ``push`` and ``pull``, after ``round_name.`` where it names a round). A
        push's header names the round, so a server knows whether another follows. The raw bytes of
        round ``p``'s pushes and pulls are fp32's for the same shard of the ``numel`` gradient values;
        round ``q``'s none."""
        t, layout = self.transport, ChunkLayout(vector.numel(), self.servers)
        phase = f"{round_name}." if round_name else ""
        dense = ChunkLayout(numel, self.servers).chunks
        pulls = [t.irecv(self.workers + s) for s in range(self.servers)]
        sends = []
        for s, (lo, hi) in enumerate(layout.chunks):
            tensors = {"values": vector[lo:hi].clone()} if hi > lo else {}
            raw = 4 * (dense[s][1] - dense[s][0]) if round_name in ("", ROUNDS[0]) else 0
            push = Payload(tensors, hi - lo, {"round": round_name, "raw": raw}, _ROUND_BYTES)
            meta = self._meta(phase + "push", 0, s, raw)
            sends.append(t.isend(self.workers + s, with_count(push, weight), meta))
        result = torch.empty_like(vector)
        for s, (lo, hi) in enumerate(layout.chunks):
            reply = pulls[s].wait()
            if hi > lo:
                result[lo:hi] = reply.tensors["values"]
        for h in sends:
            h.wait()
        return result

    def _serve_rounds(self) -> torch.Tensor:
        """A server's step under a low-rank codec: weighted means of float32 pushes, replied as they
        are, round after round until one that is not ``p`` (``q``, or the whole gradient)."""
        t, shard = self.transport, self.rank - self.workers
        while True:
            pushes, counts = zip(*(split_count(t.irecv(w).wait()) for w in range(self.workers)), strict=True)
            round_name, raw, numel = pushes[0].header["round"], pushes[0].header["raw"], pushes[0].numel
            total = sum(counts)
            require_positive(total)
            mean = torch.zeros(numel, dtype=torch.float32, device=self.device)
            with self.clock.decoding:
                for c, push in zip(counts, pushes, strict=True):
                    if numel:
                        mean += push.tensors["values"].to(self.device) * (c / total)
            reply = Payload({"values": mean} if numel else {}, numel)
            phase = f"{round_name}.pull" if round_name else "pull"
            sends = [t.isend(w, reply, self._meta(phase, 0, shard, raw)) for w in range(self.workers)]
            for h in sends:
                h.wait()
            if round_name != ROUNDS[0]:
                return mean

    def _finish(
        self, layout: ChunkLayout, out: torch.Tensor, reply: Callable[[int], Payload], sends: list
    ) -> torch.Tensor:
        """Decode each shard's ``reply(s)`` into its slice of ``out``, wait for the pushes to leave
        and close the step."""
        for s, (lo, hi) in enumerate(layout.chunks):
            payload = reply(s)
            if hi > lo:
                with self.clock.decoding:
                    out[lo:hi] = self.pull_codec.decode(payload)
        for h in sends:
            h.wait()
        self.step += 1
        self.clock.end()
        return out

    def _tag_push(self, shard: int, push: Payload, weight: float) -> Payload:
        """What travels to ``shard``: the encoded slice with this worker's count beside its header."""
        return with_count(push, weight)

    def _take_pull(self, shard: int, payload: Payload) -> Payload:
        """The pull codec's payload in what ``shard`` replied (here the reply itself)."""
        return payload

    def serve_epoch(self, steps: int, worker_steps: Sequence[int] = ()) -> list[TrafficRecord]:
        """An epoch on a server rank: ``steps`` lock-step steps (every worker takes each), one
        :meth:`serve_step` at a time; returns what the rank received."""
        traffic = []
        for _ in range(steps):
            self.serve_step()
            traffic += self.report().traffic
        return traffic

    def serve_step(self) -> torch.Tensor:
        """Receive every worker's push, average (weighted by counts, in worker order), reply with the
        mean (``update=replica``) or with the shard's parameters after its step (``update=server``).

        Returns
        -------
        Tensor
            The mean gradient slice this shard computed.
        """
        if not self.is_server:
            raise RuntimeError(f"rank {self.rank} is a worker; call reduce() there")
        t, shard, clock = self.transport, self.rank - self.workers, self.clock
        clock.begin()
        if self.codec.low_rank() is not None:
            mean = self._serve_rounds()
            self.step += 1
            clock.end()
            return mean
        handles = [t.irecv(w) for w in range(self.workers)]
        mean, reply = self._serve(shard, [handle.wait() for handle in handles])
        sends = [t.isend(w, reply, self._meta("pull", 0, shard)) for w in range(self.workers)]
        for h in sends:
            h.wait()
        self.step += 1
        clock.end()
        return mean

    def _serve(self, shard: int, arrived: list[Payload]) -> tuple[torch.Tensor, Payload]:
        """Shard ``shard``'s work on every worker's push (in worker order): the weighted mean, and
        the reply (the mean, or the parameters after the shard's step) encoded for the pull."""
        counts, pushes = [], []
        for payload in arrived:
            push, count = split_count(payload)
            counts.append(count)
            pushes.append(push)
        total = sum(counts)  # in worker order, and exact: counts lie on a grid
        owner = self.shard_update
        if self.pulls_parameters and owner is None:
            raise RuntimeError(f"server rank {self.rank}: update=server, but own() gave it no parameters")
        if owner is None or total != 0:  # owners skip a step without samples (zero counts everywhere)
            require_positive(total)
        numel = pushes[0].numel
        mean = torch.zeros(numel, dtype=torch.float32, device=self.device)
        with self.clock.decoding:
            for c, push in zip(counts, pushes, strict=True):
                if numel and total:
                    mean += self.codec.decode(push) * (c / total)
        result = mean if owner is None else owner(mean if total else None, self.epoch)
        with self.clock.encoding:
            reply = self.pull_codec.encode(result, self._pull_key(shard)) if numel else _EMPTY
        return mean, reply

    def _pull_key(self, shard: int) -> ChunkKey:
        """The key of ``shard``'s reply this step: keyed by the server's rank in a dedicated world
        (W + shard) wherever the shard runs, so that a colocated shard draws what a dedicated one draws."""
        return replace(ChunkKey(self.seed, self.step, shard), rank=self.workers + shard, hop=1)
