"""The ring exchange: one step is a schedule (``schedule.py``, or ``allgather.py`` for payloads that
cannot add) driving a reducer's per-piece arithmetic, both chosen by the codec's capabilities
(``table.py``); ``plain.py`` is the same ring without the speed.

Sample counts travel inside the reduce-scatter payloads and the owner scales its sum to their total,
so a weighted mean costs no round of its own; a shared scale is agreed in one round before the first
hop.
"""

from __future__ import annotations

import torch

from ...codecs import Codec
from ...memory import Memory, build_pair
from ...registry import Param
from ..base import EXCHANGES, Exchange, output_buffer, require
from ..chunking import ChunkLayout, Piece
from ..counts import grid_count, require_positive
from ..lowrank import check_low_rank
from ..topology import Topology, declares
from ..transport import Transfer, Transport
from .choice import choose
from .hops import Hops
from .reducer import Context, Reducer, Weighting

__all__ = ["RingExchange"]


@EXCHANGES.register(
    "ring",
    strategy=Param("requantize", "how quantized chunks are summed at each hop",
                   choices=("requantize", "shared_scale", "allgather")),
    segment_kb=Param(0, "pipeline piece size in KiB on the wire; 0: the transport's choice", low=0, high=1 << 21),
)  # fmt: skip
@declares(Topology())
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
    transport, codec, memory, seed, run, epoch
        See :class:`~adass.exchange.base.Exchange`.

    Attributes
    ----------
    reducer : Row
        The row of ``table.REDUCERS`` chosen for the codec and strategy (``reducer.name``: dense,
        sparse, direct, shared_scale, requantize or allgather); it builds each step's reducer and
        names the schedule that drives it.

    Notes
    -----
    With counts, shares are ``x * count / hint``, with ``hint`` the previous step's total (the world
    size at first), and the owner of a chunk multiplies the sum by ``hint / total``; when the counts
    repeat, as they do within an epoch, the factor is 1 and nothing is rescaled.
    """

    name = "ring"

    def __init__(self, strategy: str = "requantize", segment_kb: int = 0, *, transport: Transport,
                 codec: Codec | str, memory: Memory | str | None = None, seed: int = 0, run: str = "",
                 epoch: int = 0) -> None:  # fmt: skip
        codec, memory = build_pair(codec, memory)
        self.check(codec, memory, strategy=strategy, segment_kb=segment_kb)
        super().__init__(transport, codec, memory=memory, seed=seed, run=run, epoch=epoch)
        self.strategy = strategy
        # plain error feedback around a lossless codec never keeps a residual, so its shares may skip
        # the memory; momentum correction's velocity must see every share
        through_memory = self.memory is not None and (
            self.memory.owns_momentum or not self.codec.traits.lossless
        )
        self.reducer = choose(self.codec, strategy, through_memory)
        seg_bytes = segment_kb * 1024 if segment_kb else transport.segment_bytes
        per_value = self.codec.bytes_per_value()
        self.segment = max(1, int(seg_bytes / per_value)) if seg_bytes and per_value > 0 else None
        self._buffer: torch.Tensor | None = None
        self._hint = float(transport.world)  # the total the first weighted step assumes
        self._n = 0  # the length of this step's gradient

    @classmethod
    def check(cls, codec: Codec, memory: Memory | None = None, strategy: str = "requantize",
              segment_kb: int = 0) -> None:  # fmt: skip
        owner, name = f"exchange 'ring:strategy={strategy}'", codec.name
        if codec.low_rank() is not None:  # its factors add as fp32 whatever the strategy
            check_low_rank(owner, codec, memory)
            return
        if strategy == "shared_scale":
            require(
                codec.traits.summable or codec.traits.can_share_scale or codec.traits.needs_shared_scale,
                f"{owner}: codec {name!r} is not summable (workers keep different coordinates), so "
                "its codes cannot add; use ring:strategy=requantize, which falls back to an all-gather",
            )
        if strategy == "requantize":
            require(
                not codec.traits.needs_shared_scale,
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
        out = output_buffer(out, x)
        weighting = self._weighting(count)
        layout = ChunkLayout(x.numel(), self.transport.world, self.segment)
        self._n = x.numel()
        pieces = layout.all_pieces()
        reducer = self.reducer.build(self._context(), x, weighting, pieces)
        self._agree(reducer, pieces)
        self.reducer.schedule(Hops(self.transport, self.clock, self.meta, self.repeat), layout, reducer, out)
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

    def _workspace(self, size: int, device: torch.device) -> torch.Tensor:
        """A float32 buffer of ``size`` values on ``device`` kept from step to step (reducers that
        sum in place)."""
        if self._buffer is None or self._buffer.numel() != size or self._buffer.device != device:
            self._buffer = torch.empty(size, dtype=torch.float32, device=device)
        return self._buffer

    def repeat(self, phase: str, hop: int, pid: int) -> tuple | None:
        """The name of a framed transfer that recurs every step with one layout (the payloads of a
        fixed-size codec, for one gradient length and one share kept: a ratio warm-up changes the
        layout from epoch to epoch), or None."""
        return (
            (phase, hop, pid, self._n, self.codec.bytes_per_value()) if self.codec.traits.fixed_size else None
        )

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
