"""Quantizers in shared-scale mode: ranks agree on one scale per piece first, so integer codes add
exactly along the ring (with ``ceil(log2 P)`` bits of headroom).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ...codecs.base import Payload
from ...memory.own import compensate
from ..chunking import Piece
from .direct import DirectAdd
from .reducer import Context, Weighting

__all__ = ["SharedScale"]


class SharedScale(DirectAdd):
    """Quantizers in shared-scale mode: agree on the elementwise max scale, then codes add exactly.

    The ring gathers every rank's ``scales`` in one round, takes the max and hands it to ``agree``;
    each share is then encoded with its piece's agreed scale (when first needed, or by ``warm``).
    """

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        super().__init__(replace(ctx, codec=ctx.codec.with_shared_scale()), x, weighting, pieces)
        self.agreed_scale: dict[int, torch.Tensor] = {}
        self._sizes: list[int] = []

    def scales(self, pieces: list[Piece]) -> torch.Tensor | None:
        local = [self.codec.local_scale(compensate(self.memory, self.share(p), self.key(p.pid, 0)),
                                        self.key(p.pid, 0)).reshape(-1) for p in pieces]  # fmt: skip
        self._sizes = [s.numel() for s in local]
        return torch.cat(local).to(torch.float32) if local else torch.zeros(0, device=self.x.device)

    def agree(self, pieces: list[Piece], agreed: torch.Tensor) -> None:
        for p, scale in zip(pieces, agreed.split(self._sizes), strict=True):
            self.agreed_scale[p.pid] = scale

    def _encode(self, piece: Piece) -> Payload:
        return self.encode_own(self.share(piece), piece.pid, scale=self.agreed_scale[piece.pid])
