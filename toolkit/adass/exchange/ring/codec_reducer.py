"""Reducers whose payloads the codec makes (:class:`CodecReducer`): the count travels beside the
codec's header, and payloads of a promised layout travel bare.
"""

from __future__ import annotations

from abc import abstractmethod
from functools import cached_property

import torch

from ...codecs import Codec
from ...codecs.base import Payload
from ..chunking import Piece
from ..counts import split_count, with_count
from ..transport.bare import BareLayout
from .reducer import Context, PieceReducer, Weighting

__all__ = ["CodecReducer"]


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
