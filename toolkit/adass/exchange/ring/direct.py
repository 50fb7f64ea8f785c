"""Summable codecs without a scale (fp16/bf16, random-k behind another codec, error feedback around
them): each rank encodes its share once, and payloads add along the ring without decoding.
"""

from __future__ import annotations

import torch

from ...codecs.base import Payload
from ..chunking import Piece
from .codec_reducer import CodecReducer
from .reducer import Context, Weighting

__all__ = ["DirectAdd"]


class DirectAdd(CodecReducer):
    """Summable codecs: each rank encodes its share once; payloads add along the ring."""

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        super().__init__(ctx, x, weighting, pieces)
        self.own: dict[int, Payload] = {}

    def _encode(self, piece: Piece) -> Payload:
        if self.memory is not None:  # the residual belongs to the weighted share
            return self.encode_own(self.share(piece), piece.pid)
        return self.codec.encode_scaled(self.x[piece.lo : piece.hi], self.key(piece.pid, 0), self.w.weight)

    def _own(self, piece: Piece) -> Payload:
        if piece.pid not in self.own:
            self.own[piece.pid] = self._encode(piece)
        return self.own[piece.pid]

    def _add(self, piece: Piece, received: Payload, hop: int) -> Payload:
        return self.codec.add(received, self._own(piece))

    def warm(self, piece: Piece, out: torch.Tensor) -> None:
        self._own(piece)
