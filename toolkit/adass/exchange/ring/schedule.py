"""Ring All-Reduce: reduce-scatter (P-1 hops) then all-gather (P-1 hops) over pipelined pieces.

Rank ``r`` owns chunk ``r``: at reduce-scatter hop ``s`` it sends chunk ``r-s-1`` to ``r+1`` and
receives chunk ``r-s-2`` from ``r-1``; at all-gather hop ``s`` it forwards chunk ``r-s``. The owner's
final payload is what every rank decodes, so all ranks end with bit-identical results. Sample counts
travel inside the reduce-scatter payloads and the owner scales its sum to their total, so a weighted
mean costs no round of its own; a shared scale is agreed in one round before the first hop. What
each hop computes is the reducer's (``reducer.py``), chosen by the codec's capabilities
(``table.py``); ``plain.py`` is the same ring without the speed.
"""

from __future__ import annotations

import torch

from ...codecs import Codec, make_codec
from ...codecs.base import Payload
from ...registry import Param
from ..base import EXCHANGES, Exchange, output_buffer, require
from ..chunking import ChunkLayout, Piece
from ..counts import grid_count, require_positive
from ..transport import RecvHandle, SendHandle, Transfer, Transport
from .reducer import Context, PieceReducer, Reducer, Weighting
from .table import choose

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

    Attributes
    ----------
    reducer : Row
        The row of ``table.REDUCERS`` chosen for the codec and strategy (``reducer.name``: dense,
        sparse, direct, shared_scale, requantize or allgather); it builds each step's reducer.

    Notes
    -----
    With counts, shares are ``x * count / hint``, with ``hint`` the previous step's total (the world
    size at first), and the owner of a chunk multiplies the sum by ``hint / total``; when the counts
    repeat, as they do within an epoch, the factor is 1 and nothing is rescaled.
    """

    name = "ring"

    def __init__(self, strategy: str = "requantize", segment_kb: int = 0, *, transport: Transport,
                 codec: Codec | str, seed: int = 0, run: str = "", epoch: int = 0) -> None:  # fmt: skip
        codec = make_codec(codec) if isinstance(codec, str) else codec
        self.check(codec, strategy=strategy, segment_kb=segment_kb)
        super().__init__(transport, codec, seed=seed, run=run, epoch=epoch)
        self.strategy = strategy
        # plain error feedback around a lossless codec never keeps a residual, so its shares may skip
        # the memory; momentum correction's velocity must see every share
        through_memory = self.memory is not None and (self.memory.owns_momentum or not self.codec.lossless)
        self.reducer = choose(self.codec, strategy, through_memory)
        seg_bytes = segment_kb * 1024 if segment_kb else transport.segment_bytes
        per_value = self.codec.bytes_per_value()
        self.segment = max(1, int(seg_bytes / per_value)) if seg_bytes and per_value > 0 else None
        self._buffer: torch.Tensor | None = None
        self._hint = float(transport.world)  # the total the first weighted step assumes
        self._n = 0  # the length of this step's gradient

    @classmethod
    def check(cls, codec: Codec, strategy: str = "requantize", segment_kb: int = 0) -> None:
        owner, name = f"exchange 'ring:strategy={strategy}'", codec.name
        codec, memory = codec.error_feedback()
        if strategy == "shared_scale":
            require(
                codec.summable or codec.can_share_scale or codec.needs_shared_scale,
                f"{owner}: codec {name!r} is not summable (workers keep different coordinates), so "
                "its codes cannot add; use ring:strategy=requantize, which falls back to an all-gather",
            )
        if strategy == "requantize":
            require(
                not codec.needs_shared_scale,
                f"{owner}: codec {name!r} needs an agreed scale; use ring:strategy=shared_scale "
                "or drop shared=true",
            )
            if memory is not None and codec.keyed_values() is not None:
                require(
                    choose(codec, strategy, True).name != "requantize",
                    f"{owner}: error feedback around {codec.name!r} cannot requantize the value "
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
        self._n = x.numel()
        pieces = layout.all_pieces()
        reducer = self.reducer.build(self._context(), x, weighting, pieces)
        self._agree(reducer, pieces)
        reducer.run(self, layout, out)
        with self.clock.decoding:  # a codec that learns from the shared result (sharedk) does so here
            self._observe(out, pieces)
        total = reducer.total
        if self.memory is not None:
            # the owner scaled the sums by hint / total: restate the memory in the step's true units
            self.memory.settle(1.0 if total is None else weighting.factor(total))
        self.step += 1
        self.clock.end()
        self._learn(weighting, total, x.numel())
        return out

    @property
    def spreads_nonfinite(self) -> bool:  # type: ignore[override]
        """Whether the chosen reducer carries a NaN or Inf of any rank into every result (dense)."""
        return self.reducer.build.spreads_nonfinite

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

    def _context(self) -> Context:
        """What this step's reducer is given: a kept workspace unless payloads travel by reference."""
        workspace = None if self.transport.by_reference else self._workspace
        return Context(self.codec, self._key, self.memory, workspace)

    def _workspace(self, size: int) -> torch.Tensor:
        """A float32 buffer of ``size`` values kept from step to step (reducers that sum in place)."""
        if self._buffer is None or self._buffer.numel() != size:
            self._buffer = torch.empty(size, dtype=torch.float32)
        return self._buffer

    def repeat(self, phase: str, hop: int, pid: int) -> tuple | None:
        """The name of a framed transfer that recurs every step with one layout (the payloads of a
        fixed-size codec, for one gradient length and one share kept: a ratio warm-up changes the
        layout from epoch to epoch), or None."""
        return (phase, hop, pid, self._n, self.codec.bytes_per_value()) if self.codec.fixed_size else None

    def meta(self, phase: str, hop: int, chunk: int) -> Transfer:
        """What travels with a transfer of ``chunk`` at ``hop`` of ``phase`` this step."""
        return self._meta(phase, hop, chunk)

    def _agree(self, reducer: Reducer, pieces: list[Piece]) -> None:
        """Agree on the reducer's scales (if it has any) before the first hop."""
        with self.clock.encoding:
            scales = reducer.scales(pieces)
        if scales is not None:
            agreed = self._agree_max(scales)
            with self.clock.encoding:
                reducer.agree(pieces, agreed)

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

    def reduce_pieces(self, layout: ChunkLayout, reducer: PieceReducer, out: torch.Tensor) -> None:
        """Reduce-scatter then all-gather of ``layout``'s pieces with ``reducer``'s arithmetic; each
        final leaves as soon as the owner has made it."""
        world, r, clock = self.transport.world, self.rank, self.clock
        if world == 1:
            for p in layout.pieces[r]:
                with clock.encoding:
                    final = reducer.finish(p, None, out)
                with clock.decoding:
                    reducer.place(p, final, out)
            return
        # Receives are posted early, so data lands in place as it comes. Where the left and right
        # neighbours are one rank (P = 2), both directions share one gloo pair (one socket). On
        # loopback a receive posted first there makes the send behind it wait while the peer's
        # data is read, so each stage's sends go out first. Between hosts it is the other way
        # round: sends posted first go out one direction at a time, and 4 MB both ways at 1 Gbit
        # took 69 ms against 41 ms with the receives first (35 ms one way).
        sends_first = world == 2 and not self.transport.between_hosts
        pending = None if sends_first else self._post_reduce_scatter(layout, reducer, out)
        sends = []
        for p in layout.pieces[(r - 1) % world]:
            with clock.encoding:
                first = reducer.first(p)
            sends.append(self._send(reducer, first, _RS, 0, p))
        if pending is None:
            pending = self._post_reduce_scatter(layout, reducer, out)
        with clock.encoding:  # this rank's own work for later hops, while hop 0 is on the link
            for p in layout.all_pieces():
                reducer.warm(p, out)
        gathers: list[tuple[int, Piece, RecvHandle]] = []
        finals: list[tuple[Piece, Payload]] = []
        for s in range(world - 1):
            last = s == world - 2
            if last and not sends_first:
                gathers = self._post_all_gather(layout, reducer, out)
            for p, handle in pending[s]:
                received = handle.wait()
                with clock.encoding:
                    sent = reducer.finish(p, received, out) if last else reducer.combine(p, received, s + 1)
                sends.append(
                    self._send(reducer, sent, _AG, 0, p) if last else self._send(reducer, sent, _RS, s + 1, p)
                )
                if last:
                    finals.append((p, sent))
        if sends_first:  # after the finals went out
            gathers = self._post_all_gather(layout, reducer, out)
        with clock.decoding:
            for p, final in finals:
                reducer.place(p, final, out)
        for g, p, handle in gathers:
            received = handle.wait()
            if g < world - 2:
                sends.append(self._send(reducer, received, _AG, g + 1, p))
            with clock.decoding:
                reducer.place(p, received, out)
        for h in sends:
            h.wait()

    def _post_reduce_scatter(self, layout: ChunkLayout, reducer: PieceReducer,
                             out: torch.Tensor) -> list[list[tuple[Piece, RecvHandle]]]:  # fmt: skip
        """Post every reduce-scatter receive: per hop, the pieces of the chunk arriving then."""
        world, r = self.transport.world, self.rank
        return [[(p, self._post(reducer, _RS, s, p, out)) for p in layout.pieces[(r - s - 2) % world]]
                for s in range(world - 1)]  # fmt: skip

    def _post_all_gather(self, layout: ChunkLayout, reducer: PieceReducer,
                         out: torch.Tensor) -> list[tuple[int, Piece, RecvHandle]]:  # fmt: skip
        """Post every all-gather receive; only once the last reduce-scatter hop has begun, when
        every chunk they write into (``out`` may be the input) has been read."""
        world, r = self.transport.world, self.rank
        return [(g, p, self._post(reducer, _AG, g, p, out))
                for g in range(world - 1) for p in layout.pieces[(r - g - 1) % world]]  # fmt: skip

    def _send(
        self, reducer: PieceReducer, payload: Payload, phase: str, hop: int, piece: Piece
    ) -> SendHandle:
        """Send ``payload`` of ``piece`` at ``hop`` of ``phase`` to the right neighbour."""
        right = (self.rank + 1) % self.transport.world
        meta = self._meta(phase, hop, piece.chunk)
        if reducer.agreed:
            return self.transport.isend_values(right, payload.tensors["values"], payload.numel, meta)
        return self.transport.isend(right, payload, meta, repeat=self.repeat(phase, hop, piece.pid))

    def _post(
        self, reducer: PieceReducer, phase: str, hop: int, piece: Piece, out: torch.Tensor
    ) -> RecvHandle:
        """Post the receive of ``piece`` at ``hop`` of ``phase``."""
        left = (self.rank - 1) % self.transport.world
        if reducer.agreed:  # (in process the buffer goes unused: payloads arrive by reference)
            into = reducer.reduce_buffer(piece) if phase == _RS else reducer.gather_buffer(piece, out)
            meta = self._meta(phase, hop, piece.chunk)
            return self.transport.irecv_values(left, into, reducer.wire_numel(piece), meta)
        return self.transport.irecv(left, repeat=self.repeat(phase, hop, piece.pid))
