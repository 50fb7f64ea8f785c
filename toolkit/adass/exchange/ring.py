"""Ring All-Reduce: reduce-scatter (P-1 hops) then all-gather (P-1 hops) over pipelined pieces.

Rank ``r`` owns chunk ``r``: at reduce-scatter hop ``s`` it sends chunk ``r-s-1`` to ``r+1`` and
receives chunk ``r-s-2`` from ``r-1``; at all-gather hop ``s`` it forwards chunk ``r-s``. The owner's
final payload is what every rank decodes, so all ranks end with bit-identical results.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..codecs import Codec, ErrorFeedback, StackCodec
from ..codecs.base import Payload
from ..registry import Param
from .base import EXCHANGES, Exchange, count_payload, output_buffer, require
from .chunking import ChunkLayout, Piece
from .strategies import DenseAdd, DirectAdd, FloatMerge, Policy, Requantize, SharedScale, ring_plan
from .transport import RecvHandle, Transfer, Transport

__all__ = ["RingExchange"]


@EXCHANGES.register(
    "ring",
    strategy=Param("requantize", "how quantized chunks are summed at each hop",
                   choices=("requantize", "shared_scale", "allgather")),
    segment_kb=Param(0, "pipeline piece size in KiB; 0: the transport's choice", low=0, high=1 << 21),
)  # fmt: skip
class RingExchange(Exchange):
    """Ring All-Reduce with a codec; ``reduce`` returns the (count-weighted) mean on every rank.

    Parameters
    ----------
    strategy : {"requantize", "shared_scale", "allgather"}
        For quantizers: decode-add-re-encode at every hop, or agree on one scale per bucket first
        (an extra small max-exchange, phase ``scale``) so integer codes add exactly. Summable codecs
        (fp32/fp16/bf16, random-k) add directly under ``requantize``; codecs that are neither
        (top-k) fall back to an all-gather of every rank's payloads, as ``allgather`` does always.
    segment_kb : int
        Largest pipeline piece, in KiB of fp32 values; 0 takes ``transport.segment_bytes``
        (whole chunks in process, 64 MiB over gloo).
    transport, codec, seed, run, epoch
        See :class:`~adass.exchange.base.Exchange`.
    """

    name = "ring"

    def __init__(self, strategy: str = "requantize", segment_kb: int = 0, *, transport: Transport,
                 codec: Codec | str, seed: int = 0, run: str = "", epoch: int = 0) -> None:  # fmt: skip
        super().__init__(transport, codec, seed=seed, run=run, epoch=epoch)
        self.check(self.codec, strategy=strategy, segment_kb=segment_kb)
        self.strategy = strategy
        self.plan = ring_plan(self.codec, strategy)
        seg_bytes = segment_kb * 1024 if segment_kb else transport.segment_bytes
        self.segment = max(1, seg_bytes // 4) if seg_bytes else None
        self._buffer: torch.Tensor | None = None

    @classmethod
    def check(cls, codec: Codec, strategy: str = "requantize", segment_kb: int = 0) -> None:
        owner = f"exchange 'ring:strategy={strategy}'"
        if strategy == "shared_scale":
            require(
                codec.summable or codec.can_share_scale or codec.needs_shared_scale,
                f"{owner}: codec {codec.name!r} is not summable (workers keep different coordinates), so "
                "its codes cannot add; use ring:strategy=requantize, which falls back to an all-gather",
            )
            require(
                codec.can_share_scale or codec.needs_shared_scale,
                f"{owner}: codec {codec.name!r} has no shared scale to agree on; "
                "use ring:strategy=requantize, which adds it directly",
            )
        if strategy == "requantize":
            require(
                not codec.needs_shared_scale,
                f"{owner}: codec {codec.name!r} needs an agreed scale; use ring:strategy=shared_scale "
                "or drop shared=true",
            )
            if isinstance(codec, ErrorFeedback) and isinstance(codec.inner, StackCodec):
                require(
                    ring_plan(codec, strategy) != "requantize",
                    f"{owner}: error feedback around {codec.inner.name!r} cannot requantize the value "
                    "vector hop by hop; use ring:strategy=shared_scale",
                )

    def reduce(
        self, flat_grad: torch.Tensor, count: float | None = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = flat_grad.detach().reshape(-1).to(torch.float32)
        out = output_buffer(out, x.numel())
        weight = self._weight(count)
        layout = ChunkLayout(x.numel(), self.transport.world, self.segment)
        if self.plan == "allgather":
            self._gather_payloads(layout, x * weight, out)
        else:
            policy = self._policy(x, weight)
            policy.prepare(layout.all_pieces())
            self._allreduce(layout, policy, ("reduce_scatter", "all_gather"), out)
        self.step += 1
        return out

    def _policy(self, x: torch.Tensor, weight: float) -> Policy:
        if self.plan == "dense":
            return DenseAdd(x, weight, None if self.transport.by_reference else self._workspace(x.numel()))
        if self.plan == "add":
            return DirectAdd(self.codec, x, weight, self._key)
        if self.plan == "shared":
            return SharedScale(self.codec, x, weight, self._key, self._agree_max)
        return Requantize(self.codec, x, weight, self._key)

    def _expect(self, policy: Policy, phase: str, hop: int, piece: Piece) -> Transfer | None:
        """The transfer a receive expects, where the policy lets it travel unframed."""
        return self._meta(phase, hop, piece.chunk) if policy.agreed else None

    def _workspace(self, n: int) -> torch.Tensor:
        """A float32 buffer of ``n`` values kept from step to step (for the dense plan)."""
        if self._buffer is None or self._buffer.numel() != n:
            self._buffer = torch.empty(n, dtype=torch.float32)
        return self._buffer

    def _weight(self, count: float | None) -> float:
        """This rank's weight ``count / total``; the total comes from an all-to-all of counts."""
        world, rank = self.transport.world, self.rank
        if count is None:
            return 1.0 / world
        sends = [self.transport.isend(dst, count_payload(count), self._meta("count", 0, 0, 8))
                 for dst in range(world) if dst != rank]  # fmt: skip
        counts = [float(count) if src == rank else float(self.transport.recv(src).tensors["count"][0])
                  for src in range(world)]  # fmt: skip
        for h in sends:
            h.wait()
        total = sum(counts)  # the same order on every rank, so the same total
        if not total > 0:
            raise ValueError(f"sample counts {counts} add up to {total}; need a positive total")
        return float(count) / total

    def _agree_max(self, scales: torch.Tensor) -> torch.Tensor:
        """Elementwise max of every rank's ``scales`` (same length everywhere), phase ``scale``."""
        world = self.transport.world
        layout = ChunkLayout(scales.numel(), world, None)
        policy = FloatMerge(scales, torch.maximum)
        agreed = torch.empty_like(scales)
        self._allreduce(layout, policy, ("scale", "scale"), agreed, gather_hop0=max(0, world - 1))
        return agreed

    def _allreduce(self, layout: ChunkLayout, policy: Policy, phases: tuple[str, str], out: torch.Tensor,
                   gather_hop0: int = 0) -> None:  # fmt: skip
        """Reduce-scatter then all-gather; the all-gather's receives are posted before the last
        reduce-scatter hop (every chunk they write has been read by then), ahead of their data."""
        posted: list[tuple[int, Piece, RecvHandle]] = []

        def post_gather() -> None:
            posted.extend(self._post_gather(layout, policy, phases[1], out, gather_hop0))

        finals = self._reduce_scatter(layout, policy, phases[0], out, post_gather)
        self._all_gather(layout, finals, policy, phases[1], out, gather_hop0, posted)

    def _reduce_scatter(self, layout: ChunkLayout, policy: Policy, phase: str, out: torch.Tensor,
                        before_last: Callable[[], None]) -> dict[int, Payload]:  # fmt: skip
        """Run P-1 hops; return this rank's final payloads of its own chunk, by piece id."""
        world, r, t = self.transport.world, self.rank, self.transport
        if world == 1:
            return {p.pid: policy.finish(p, None, out) for p in layout.pieces[r]}
        right, left = (r + 1) % world, (r - 1) % world
        framed = not policy.agreed
        # every receive is posted now: a receive posted while data flows on its link waits for it
        pending = [[(p, t.irecv(left, like=policy.like(p), into=policy.reduce_buffer(p),
                                expect=self._expect(policy, phase, s, p)))
                    for p in layout.pieces[(r - s - 2) % world]] for s in range(world - 1)]  # fmt: skip
        sends = [t.isend(right, policy.first(p), self._meta(phase, 0, p.chunk), framed)
                 for p in layout.pieces[(r - 1) % world]]  # fmt: skip
        finals = {}
        for s in range(world - 1):
            if s == world - 2:
                before_last()
            for p, handle in pending[s]:
                received = handle.wait()
                if s < world - 2:
                    partial = policy.combine(p, received, s + 1)
                    sends.append(t.isend(right, partial, self._meta(phase, s + 1, p.chunk), framed))
                else:
                    finals[p.pid] = policy.finish(p, received, out)
        for h in sends:
            h.wait()
        return finals

    def _post_gather(self, layout: ChunkLayout, policy: Policy, phase: str, out: torch.Tensor,
                     hop0: int) -> list[tuple[int, Piece, RecvHandle]]:  # fmt: skip
        """Post every all-gather receive: at hop ``s`` chunk ``r-s-1`` arrives from the left."""
        world, r, t = self.transport.world, self.rank, self.transport
        left = (r - 1) % world
        return [(s, p, t.irecv(left, like=policy.like(p), into=policy.gather_buffer(p, out),
                               expect=self._expect(policy, phase, hop0 + s, p)))
                for s in range(world - 1) for p in layout.pieces[(r - s - 1) % world]]  # fmt: skip

    def _all_gather(self, layout: ChunkLayout, finals: dict[int, Payload], policy: Policy, phase: str,
                    out: torch.Tensor, hop0: int, pending: list[tuple[int, Piece, RecvHandle]]) -> None:  # fmt: skip
        """Forward the owners' final payloads P-1 hops; place every chunk's values into ``out``."""
        world, r, t = self.transport.world, self.rank, self.transport
        for p in layout.pieces[r]:
            policy.place(p, finals[p.pid], out)
        if world == 1:
            return
        right, framed = (r + 1) % world, not policy.agreed
        sends = [t.isend(right, finals[p.pid], self._meta(phase, hop0, p.chunk), framed)
                 for p in layout.pieces[r]]  # fmt: skip
        for s, p, handle in pending:
            received = handle.wait()
            if s < world - 2:
                sends.append(t.isend(right, received, self._meta(phase, hop0 + s + 1, p.chunk), framed))
            policy.place(p, received, out)
        for h in sends:
            h.wait()

    def _gather_payloads(self, layout: ChunkLayout, share: torch.Tensor, out: torch.Tensor) -> None:
        """Fallback for codecs that cannot add: all-gather every rank's payloads, sum in rank order."""
        world, r, t = self.transport.world, self.rank, self.transport
        pieces = layout.all_pieces()
        mine = [self.codec.encode(share[p.lo : p.hi], self._key(p.pid, 0)) for p in pieces]
        got: dict[int, list] = {r: mine}
        if world > 1:
            right, left = (r + 1) % world, (r - 1) % world
            like = mine if self.codec.fixed_size else [None] * len(pieces)
            pending = [(s, (r - s - 1) % world, i, t.irecv(left, like=like[i]))
                       for s in range(world - 1) for i in range(len(pieces))]  # fmt: skip
            sends = [
                t.isend(right, pl, self._meta("all_gather", 0, p.chunk))
                for p, pl in zip(pieces, mine, strict=True)
            ]
            for s, origin, i, handle in pending:
                received = handle.wait()
                got.setdefault(origin, []).append(received)
                if s < world - 2:
                    sends.append(t.isend(right, received, self._meta("all_gather", s + 1, pieces[i].chunk)))
            for h in sends:
                h.wait()
        for i, p in enumerate(pieces):
            acc = self.codec.decode(got[0][i])
            for origin in range(1, world):
                acc += self.codec.decode(got[origin][i])
            out[p.lo : p.hi] = acc
