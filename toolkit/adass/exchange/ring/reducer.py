"""What every ring reducer shares: how a rank's values enter the sum (:class:`Weighting`), what a
reducer is given (:class:`Context`), and the reducer protocols: :class:`Reducer`, per-piece
arithmetic (:class:`PieceReducer`), and :class:`CodecReducer` for payloads made by the codec.

A reducer says what a rank sends first, what it forwards after adding its own share at a hop, and
what the chunk's owner makes of the full sum; the ring schedule (``schedule.py``) does the moving.
Sample counts travel inside the same payloads (``counts.py``): each rank adds its count to the
partial sum it forwards, so the owner of a chunk ends with the step's total and no separate round
of counts is needed.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import torch

from ...codecs import Codec, Memory
from ...codecs.base import ChunkKey, Payload
from ..chunking import ChunkLayout, Piece
from ..counts import split_count, with_count
from ..feedback import encode_own
from ..transport.bare import BareLayout

if TYPE_CHECKING:
    from .schedule import RingExchange

__all__ = ["FINAL_HOP", "CodecReducer", "Context", "KeyFn", "PieceReducer", "Reducer", "Weighting"]

KeyFn = Callable[[int, int], ChunkKey]  # (piece id, hop) -> codec key of this rank
FINAL_HOP = 1 << 16  # the hop in the key of an owner's final encoding: draws of its own


@dataclass(frozen=True)
class Weighting:
    """How this rank's values enter the sum, and the count that travels with them.

    Shares are ``x * count / hint``, where ``hint`` is a total every rank assumed before the step
    (the previous step's), so partial sums stay near the scale of the mean (fp16 keeps its range).
    The owner of a chunk learns the true ``total`` from the payloads and scales the sum by
    ``hint / total`` (nothing to do when the hint was right).

    Attributes
    ----------
    weight : float
        Multiplies this rank's values: ``count / hint``, or ``1 / P`` for equal weights.
    count : float or None
        This rank's count (on the grid of ``counts.grid_count``); None: equal weights, no count
        travels.
    hint : float
        The total the weights assumed.
    """

    weight: float
    count: float | None = None
    hint: float = 1.0

    def factor(self, total: float) -> float:
        """What the sum is multiplied by once the step's ``total`` is known (NaN if not positive)."""
        if self.count is None or total == self.hint:
            return 1.0
        return self.hint / total if total > 0 else math.nan


@dataclass(frozen=True)
class Context:
    """What a ring gives its reducer for one step.

    Attributes
    ----------
    codec : Codec
        The codec whose payloads travel.
    key : KeyFn
        ``key(piece id, hop)``: this rank's codec key of a piece.
    memory : Memory or None
        Error feedback around this rank's own share (see ``feedback.py``); None: none.
    workspace : callable or None
        ``workspace(size)``: a float32 buffer of ``size`` values kept from step to step, for
        reducers that make partial sums in place; None where payloads travel by reference (in
        process), so partial sums must be new tensors.
    """

    codec: Codec
    key: KeyFn
    memory: Memory | None = None
    workspace: Callable[[int], torch.Tensor] | None = None


class Reducer(ABC):
    """How a ring reduces this rank's flat ``x``: one object per step, built from a :class:`Context`.

    Attributes
    ----------
    total : float or None
        The step's total count, once a final payload has shown it (None before, or unweighted).
    """

    spreads_nonfinite = False  # whether a NaN or Inf in any rank's x reaches every rank's result

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        self.codec, self.key, self.memory = ctx.codec, ctx.key, ctx.memory
        self.x, self.w = x, weighting
        self.total: float | None = None
        self._shares: dict[int, torch.Tensor] = {}

    @abstractmethod
    def run(self, ring: RingExchange, layout: ChunkLayout, out: torch.Tensor) -> None:
        """Reduce ``x`` into ``out`` (the weighted mean over ranks) on ``ring``; set :attr:`total`."""

    def encode_own(self, values: torch.Tensor, pid: int, scale: torch.Tensor | None = None) -> Payload:
        """The codec payload of this rank's own ``values`` of piece ``pid`` (hop 0's key); with a
        memory, compensated and the memory updated."""
        return encode_own(self.codec, self.memory, values, self.key(pid, 0), scale)

    @property
    def counted(self) -> bool:
        return self.w.count is not None

    def share(self, piece: Piece) -> torch.Tensor:
        """This rank's weighted values of ``piece`` (a new tensor, computed once)."""
        if piece.pid not in self._shares:
            self._shares[piece.pid] = self.x[piece.lo : piece.hi] * self.w.weight
        return self._shares[piece.pid]

    def scales(self, pieces: list[Piece]) -> torch.Tensor | None:
        """This rank's scales to agree on before the first hop (None: nothing to agree)."""
        return None

    def agree(self, pieces: list[Piece], agreed: torch.Tensor) -> None:
        """Take the elementwise max over ranks of what ``scales`` returned."""
        return None


class PieceReducer(Reducer):
    """Per-piece arithmetic of a ring reduce-scatter and all-gather, which the ring schedule
    (``RingExchange.reduce_pieces``) drives."""

    agreed = False  # both sides know every payload's size: it travels as one bare tensor

    def run(self, ring: RingExchange, layout: ChunkLayout, out: torch.Tensor) -> None:
        ring.reduce_pieces(layout, self, out)

    def warm(self, piece: Piece, out: torch.Tensor) -> None:
        """Work on ``piece`` that needs nothing from other ranks, done while transfers fly (``out``
        is the step's output, which may be the input: only a reducer done reading this rank's values
        of ``piece`` may write its part)."""
        return None

    @abstractmethod
    def first(self, piece: Piece) -> Payload:
        """What this rank sends for ``piece`` at hop 0: its own share (and count)."""

    @abstractmethod
    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        """The partial sum forwarded at ``hop``: ``received`` plus this rank's share (and count)."""

    def finish(self, piece: Piece, received: Payload | None, out: torch.Tensor) -> Payload:
        """The owner's final payload: the full sum, encoded once (``received`` is None for P = 1)."""
        return self.first(piece) if received is None else self.combine(piece, received, -1)

    @abstractmethod
    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        """Write the values of a final payload into ``out``, scaled to the step's total."""

    # -- what receives may know in advance (``agreed`` reducers) --------------------------------
    def wire_numel(self, piece: Piece) -> int:
        """The dense length the travelling payloads of ``piece`` stand for (their ``numel``)."""
        return piece.numel

    def reduce_buffer(self, piece: Piece) -> torch.Tensor:
        """For an ``agreed`` reducer: the contiguous tensor a partial sum of ``piece`` is received
        into, posted early. (Other reducers' framed payloads are posted with the layouts the transport
        remembers from earlier steps.)"""
        raise NotImplementedError(f"{type(self).__name__} payloads are framed")

    def gather_buffer(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        """As ``reduce_buffer``, for the final payloads of the all-gather."""
        raise NotImplementedError(f"{type(self).__name__} payloads are framed")


class CodecReducer(PieceReducer):
    """Reducers whose payloads come from the codec: the count travels beside the codec's header.

    Where the codec promises one layout and header per chunk length (``Codec.template``), or per
    chunk length and chunk key (``Codec.keyed_template``: random-k, whose header names the key that
    both sides of a ring transfer know), every payload travels bare (``bare.py``): just the tensors'
    bytes, with the count in front, as an ``agreed`` transfer into a buffer posted early. Otherwise
    payloads are framed.
    """

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        super().__init__(ctx, x, weighting, pieces)
        self._bare_layouts: dict[int, BareLayout | None] = {}
        self._keyed_layouts: dict[int, BareLayout | None] = {}  # by piece, for this step's keys

    @property
    def wire_codec(self) -> Codec:
        """The codec whose payloads travel."""
        return self.codec

    @cached_property
    def agreed(self) -> bool:  # type: ignore[override]
        return self._bare(0) is not None or self.wire_codec.keyed_template(0, self.key(0, 0)) is not None

    def _bare(self, numel: int) -> BareLayout | None:
        if numel not in self._bare_layouts:
            template = self.wire_codec.template(numel)
            self._bare_layouts[numel] = None if template is None else BareLayout(template, self.counted)
        return self._bare_layouts[numel]

    def _layout(self, piece: Piece) -> BareLayout | None:
        """The bare layout of ``piece``'s payloads: the codec's for the length, else (a header that
        follows from the chunk key, as random-k's) the one of the piece's key this step."""
        numel = self.wire_numel(piece)
        bare = self._bare(numel)
        if bare is not None or not self.agreed:
            return bare
        if piece.pid not in self._keyed_layouts:
            template = self.wire_codec.keyed_template(numel, self.key(piece.pid, 0))
            self._keyed_layouts[piece.pid] = None if template is None else BareLayout(template, self.counted)
        return self._keyed_layouts[piece.pid]

    def _out(self, piece: Piece, payload: Payload, count: float | None) -> Payload:
        """What travels for a codec payload of ``piece`` and its partial count."""
        bare = self._layout(piece)
        if bare is not None:
            return bare.pack(payload, count)
        return with_count(payload, count) if self.counted else payload  # type: ignore[arg-type]

    def _in(self, piece: Piece, received: Payload) -> tuple[Payload, float | None]:
        """The codec payload and the partial count (None if unweighted) of what arrived."""
        bare = self._layout(piece)
        if bare is not None:
            return bare.unpack(received)
        return split_count(received) if self.counted else (received, None)

    @abstractmethod
    def _own(self, piece: Piece) -> Payload:
        """The codec payload of this rank's share of ``piece`` (hop 0)."""

    @abstractmethod
    def _add(self, piece: Piece, received: Payload, hop: int) -> Payload:
        """The codec payload of ``received`` plus this rank's share (``hop`` -1: the owner's final)."""

    def first(self, piece: Piece) -> Payload:
        return self._out(piece, self._own(piece), self.w.count)

    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        inner, count = self._in(piece, received)
        total = self._add(piece, inner, hop)
        return self._out(piece, total, None if count is None else count + self.w.count)

    def decode_into(self, piece: Piece, payload: Payload, dst: torch.Tensor) -> None:
        """The dense values of ``piece`` from a final codec payload (without the count), written
        into ``dst`` (the piece's part of the output)."""
        self.codec.decode_into(payload, dst)

    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        dst = out[piece.lo : piece.hi]
        inner, total = self._in(piece, payload)
        self.decode_into(piece, inner, dst)
        if total is not None:
            self.total = total
            factor = self.w.factor(total)
            if factor != 1.0:
                dst.mul_(factor)

    def reduce_buffer(self, piece: Piece) -> torch.Tensor:
        bare = self._layout(piece)
        if bare is None:
            return super().reduce_buffer(piece)
        return bare.empty(self.x.device)

    def gather_buffer(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        return self.reduce_buffer(piece)
