"""Ring All-Reduce: reduce-scatter (P-1 hops) then all-gather (P-1 hops) over pipelined pieces.

Rank ``r`` owns chunk ``r``: at reduce-scatter hop ``s`` it sends chunk ``r-s-1`` to ``r+1`` and
receives chunk ``r-s-2`` from ``r-1``; at all-gather hop ``s`` it forwards chunk ``r-s``. The owner's
final payload is what every rank decodes, so all ranks end with bit-identical results. Sample counts
travel inside the reduce-scatter payloads and the owner scales its sum to their total, so a weighted
mean costs no round of its own; a shared scale is agreed in one round before the first hop.
"""

from __future__ import annotations

import torch

from ...codecs import Codec, ErrorFeedback, StackCodec
from ...codecs.base import Payload
from ...registry import Param
from ..base import EXCHANGES, Exchange, output_buffer, require
from ..chunking import ChunkLayout, Piece
from ..counts import grid_count, require_positive, split_count, with_count
from ..transport import RecvHandle, SendHandle, Transport
from ..transport.layouts import LayoutMemory
from .reducer import DenseAdd, DirectAdd, Policy, Requantize, SharedScale, SparseAdd, Weighting, ring_plan

__all__ = ["RingExchange"]

_RS, _AG = "reduce_scatter", "all_gather"


@EXCHANGES.register(
    "ring",
    strategy=Param("requantize", "how quantized chunks are summed at each hop",
                   choices=("requantize", "shared_scale", "allgather")),
    segment_kb=Param(0, "pipeline piece size in KiB on the wire; 0: the transport's choice", low=0, high=1 << 21),
)  # fmt: skip
class RingExchange(Exchange):
    """Ring All-Reduce with a codec; ``reduce`` returns the (count-weighted) mean on every rank.

    Parameters
    ----------
    strategy : {"requantize", "shared_scale", "allgather"}
        For quantizers: decode-add-re-encode at every hop, or agree on one scale per bucket first
        (one small all-to-all of scales, phase ``scale``) so integer codes add exactly. The strategy
        concerns quantizers only: codecs that add without a scale (fp32/fp16/bf16, random-k) add
        directly under either, so both give the same bytes for them. Codecs that cannot add (top-k)
        fall back to an all-gather of every rank's payloads under ``requantize``, as ``allgather``
        does always.
    segment_kb : int
        Largest pipeline piece, in KiB of the codec's payload (``codec.bytes_per_value()`` per
        value: 1 MiB is 256Ki values in fp32, about 1Mi in 8-bit QSGD, 25Mi under random-k at 1%);
        0 takes ``transport.segment_bytes`` (whole chunks in process, 64 MiB over gloo).
    transport, codec, seed, run, epoch
        See :class:`~adass.exchange.base.Exchange`.

    Notes
    -----
    With counts, shares are ``x * count / hint``, with ``hint`` the previous step's total (the world
    size at first), and the owner of a chunk multiplies the sum by ``hint / total``; when the counts
    repeat, as they do within an epoch, the factor is 1 and nothing is rescaled.
    """

    name = "ring"

    def __init__(self, strategy: str = "requantize", segment_kb: int = 0, *, transport: Transport,
                 codec: Codec | str, seed: int = 0, run: str = "", epoch: int = 0) -> None:  # fmt: skip
        super().__init__(transport, codec, seed=seed, run=run, epoch=epoch)
        self.check(self.codec, strategy=strategy, segment_kb=segment_kb)
        self.strategy = strategy
        self.plan = ring_plan(self.codec, strategy)
        seg_bytes = segment_kb * 1024 if segment_kb else transport.segment_bytes
        per_value = self.codec.bytes_per_value()
        self.segment = max(1, int(seg_bytes / per_value)) if seg_bytes and per_value > 0 else None
        self._buffer: torch.Tensor | None = None
        self._hint = float(transport.world)  # the total the first weighted step assumes
        self._layouts = LayoutMemory(enabled=self.codec.fixed_size)

    @classmethod
    def check(cls, codec: Codec, strategy: str = "requantize", segment_kb: int = 0) -> None:
        owner = f"exchange 'ring:strategy={strategy}'"
        if strategy == "shared_scale":
            require(
                codec.summable or codec.can_share_scale or codec.needs_shared_scale,
                f"{owner}: codec {codec.name!r} is not summable (workers keep different coordinates), so "
                "its codes cannot add; use ring:strategy=requantize, which falls back to an all-gather",
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
        self.clock.begin()
        x = flat_grad.detach().reshape(-1).to(torch.float32)
        out = output_buffer(out, x.numel())
        weighting = self._weighting(count)
        layout = ChunkLayout(x.numel(), self.transport.world, self.segment)
        self._layouts.start(x.numel())
        if self.plan == "allgather":
            total = self._gather_payloads(layout, x, weighting, out)
        else:
            policy = self._policy(x, weighting, layout)
            self._agree(policy, layout.all_pieces())
            self._allreduce(layout, policy, out)
            total = policy.total
        self.step += 1
        self.clock.end()
        self._learn(weighting, total, x.numel())
        return out

    def _weighting(self, count: float | None) -> Weighting:
        if count is None:
            return Weighting(1.0 / self.transport.world)
        count = grid_count(count)
        return Weighting(count / self._hint, count, self._hint)

    def _learn(self, weighting: Weighting, total: float | None, n: int) -> None:
        """Check the step's total; keep it as the next step's hint where every rank knows it
        (each rank owns a piece when ``n >= P``), so hints stay the same on every rank."""
        if weighting.count is None or total is None:
            return
        require_positive(total)  # raised after the step's transfers, so no peer is left waiting
        if n >= self.transport.world:
            self._hint = total

    def _policy(self, x: torch.Tensor, weighting: Weighting, layout: ChunkLayout) -> Policy:
        if self.plan == "dense":
            if self.transport.by_reference:
                return DenseAdd(x, weighting, None)
            size = DenseAdd.workspace_size(x.numel(), len(layout.all_pieces()), weighting.count is not None)
            return DenseAdd(x, weighting, self._workspace(size))
        if self.plan == "sparse":
            pieces, counted = layout.all_pieces(), weighting.count is not None
            workspace = None if self.transport.by_reference else self._workspace(
                SparseAdd.sparse_workspace_size(self.codec, pieces, counted))  # type: ignore[arg-type]
            return SparseAdd(self.codec, x, weighting, self._key, pieces, workspace)  # type: ignore[arg-type]
        if self.plan == "add":
            return DirectAdd(self.codec, x, weighting, self._key)
        if self.plan == "shared":
            return SharedScale(self.codec, x, weighting, self._key)
        return Requantize(self.codec, x, weighting, self._key)

    def _workspace(self, size: int) -> torch.Tensor:
        """A float32 buffer of ``size`` values kept from step to step (dense and sparse plans)."""
        if self._buffer is None or self._buffer.numel() != size:
            self._buffer = torch.empty(size, dtype=torch.float32)
        return self._buffer

    def _agree(self, policy: Policy, pieces: list[Piece]) -> None:
        """Agree on the policy's scales (if it has any) before the first hop."""
        with self.clock.encoding:
            scales = policy.scales(pieces)
        if scales is not None:
            agreed = self._agree_max(scales)
            with self.clock.encoding:
                policy.agree(pieces, agreed)

    def _agree_max(self, scales: torch.Tensor) -> torch.Tensor:
        """Elementwise max of every rank's ``scales`` (same length everywhere), in one round: each
        rank sends its vector to every other one (phase ``scale``), into receives posted at once."""
        world, r, t = self.transport.world, self.rank, self.transport
        if world == 1 or scales.numel() == 0:
            return scales
        n, meta = scales.numel(), self._meta("scale", 0, 0)
        recvs = [t.irecv_values(src, torch.empty_like(scales), n, meta) for src in range(world) if src != r]
        sends = [t.isend_values(dst, scales, n, meta) for dst in range(world) if dst != r]
        agreed = scales.clone()
        for handle in recvs:
            torch.maximum(agreed, handle.wait().tensors["values"], out=agreed)
        for h in sends:
            h.wait()
        return agreed

    def _allreduce(self, layout: ChunkLayout, policy: Policy, out: torch.Tensor) -> None:
        """Reduce-scatter then all-gather; each final leaves as soon as the owner has made it."""
        world, r, clock = self.transport.world, self.rank, self.clock
        if world == 1:
            for p in layout.pieces[r]:
                with clock.encoding:
                    final = policy.finish(p, None, out)
                with clock.decoding:
                    policy.place(p, final, out)
            return
        # Receives are posted early, so data lands in place as it comes. Where the left and right
        # neighbours are one rank (P = 2), though, both directions share one link (on gloo one
        # pair: one socket, one lock), and a receive posted first makes the send behind it wait
        # while the peer's data is read: there each stage's sends go out before its receives.
        sends_first = (r - 1) % world == (r + 1) % world
        pending = None if sends_first else self._post_reduce_scatter(layout, policy, out)
        sends = []
        for p in layout.pieces[(r - 1) % world]:
            with clock.encoding:
                first = policy.first(p)
            sends.append(self._send(policy, first, _RS, 0, p))
        if pending is None:
            pending = self._post_reduce_scatter(layout, policy, out)
        with clock.encoding:  # this rank's own work for later hops, while hop 0 is on the link
            for p in layout.all_pieces():
                policy.warm(p, out)
        gathers: list[tuple[int, Piece, RecvHandle]] = []
        finals: list[tuple[Piece, Payload]] = []
        for s in range(world - 1):
            last = s == world - 2
            if last and not sends_first:
                gathers = self._post_all_gather(layout, policy, out)
            for p, handle in pending[s]:
                received = self._arrived(policy, _RS, s, p, handle)
                with clock.encoding:
                    sent = policy.finish(p, received, out) if last else policy.combine(p, received, s + 1)
                sends.append(
                    self._send(policy, sent, _AG, 0, p) if last else self._send(policy, sent, _RS, s + 1, p)
                )
                if last:
                    finals.append((p, sent))
        if sends_first:  # after the finals went out
            gathers = self._post_all_gather(layout, policy, out)
        with clock.decoding:
            for p, final in finals:
                policy.place(p, final, out)
        for g, p, handle in gathers:
            received = self._arrived(policy, _AG, g, p, handle)
            if g < world - 2:
                sends.append(self._send(policy, received, _AG, g + 1, p))
            with clock.decoding:
                policy.place(p, received, out)
        for h in sends:
            h.wait()

    def _post_reduce_scatter(self, layout: ChunkLayout, policy: Policy,
                             out: torch.Tensor) -> list[list[tuple[Piece, RecvHandle]]]:  # fmt: skip
        """Post every reduce-scatter receive: per hop, the pieces of the chunk arriving then."""
        world, r = self.transport.world, self.rank
        return [[(p, self._post(policy, _RS, s, p, out)) for p in layout.pieces[(r - s - 2) % world]]
                for s in range(world - 1)]  # fmt: skip

    def _post_all_gather(self, layout: ChunkLayout, policy: Policy,
                         out: torch.Tensor) -> list[tuple[int, Piece, RecvHandle]]:  # fmt: skip
        """Post every all-gather receive; only once the last reduce-scatter hop has begun, when
        every chunk they write into (``out`` may be the input) has been read."""
        world, r = self.transport.world, self.rank
        return [(g, p, self._post(policy, _AG, g, p, out))
                for g in range(world - 1) for p in layout.pieces[(r - g - 1) % world]]  # fmt: skip

    def _send(self, policy: Policy, payload: Payload, phase: str, hop: int, piece: Piece) -> SendHandle:
        """Send ``payload`` of ``piece`` at ``hop`` of ``phase`` to the right neighbour."""
        right = (self.rank + 1) % self.transport.world
        meta = self._meta(phase, hop, piece.chunk)
        if policy.agreed:
            return self.transport.isend_values(right, payload.tensors["values"], payload.numel, meta)
        joined = self._layouts.joined((phase, hop, piece.pid), payload)
        return self.transport.isend(right, payload, meta, joined=joined)

    def _post(self, policy: Policy, phase: str, hop: int, piece: Piece, out: torch.Tensor) -> RecvHandle:
        """Post the receive of ``piece`` at ``hop`` of ``phase``, with its layout where known."""
        left = (self.rank - 1) % self.transport.world
        if policy.agreed:  # (in process the buffer goes unused: payloads arrive by reference)
            into = policy.reduce_buffer(piece) if phase == _RS else policy.gather_buffer(piece, out)
            meta = self._meta(phase, hop, piece.chunk)
            return self.transport.irecv_values(left, into, policy.wire_numel(piece), meta)
        like = self._layouts.expected((phase, hop, piece.pid))
        return self.transport.irecv(left, like=like, joined=like is not None)

    def _arrived(self, policy: Policy, phase: str, hop: int, piece: Piece, handle: RecvHandle) -> Payload:
        """Wait for a receive; remember the layout of a framed payload."""
        received = handle.wait()
        if not policy.agreed:
            self._layouts.received((phase, hop, piece.pid), received)
        return received

    def _gather_payloads(self, layout: ChunkLayout, x: torch.Tensor, weighting: Weighting,
                         out: torch.Tensor) -> float | None:  # fmt: skip
        """Fallback for codecs that cannot add: all-gather every rank's payloads (each with its
        rank's count), sum in rank order; return the total count where it is known."""
        world, r, t, clock = self.transport.world, self.rank, self.transport, self.clock
        counted = weighting.count is not None
        pieces = layout.all_pieces()
        with clock.encoding:
            share = x * weighting.weight
            mine = [self.codec.encode(share[p.lo : p.hi], self._key(p.pid, 0)) for p in pieces]
        got: dict[int, list[Payload]] = {r: mine}
        counts = {r: weighting.count}
        if world > 1:
            right, left = (r + 1) % world, (r - 1) % world
            like = mine if self.codec.fixed_size else [None] * len(pieces)
            pending = [(s, (r - s - 1) % world, i, t.irecv(left, like=like[i]))
                       for s in range(world - 1) for i in range(len(pieces))]  # fmt: skip
            sends = [t.isend(right, with_count(pl, weighting.count) if counted else pl,
                             self._meta(_AG, 0, p.chunk)) for p, pl in zip(pieces, mine, strict=True)]  # fmt: skip
            for s, origin, i, handle in pending:
                received = handle.wait()
                if s < world - 2:
                    sends.append(t.isend(right, received, self._meta(_AG, s + 1, pieces[i].chunk)))
                if counted:
                    received, counts[origin] = split_count(received)
                got.setdefault(origin, []).append(received)
            for h in sends:
                h.wait()
        total = sum(counts[o] for o in range(world)) if counted and pieces else None  # exact: grid counts
        factor = 1.0 if total is None else weighting.factor(total)
        with clock.decoding:
            for i, p in enumerate(pieces):
                acc = self.codec.decode(got[0][i])
                for origin in range(1, world):
                    acc += self.codec.decode(got[origin][i])
                out[p.lo : p.hi] = acc if factor == 1.0 else acc * factor
        return total
