"""Requantize: decode the partial sum, add this rank's share, re-encode for the next hop; the owner
encodes the full sum once and the all-gather forwards those bytes unchanged.

With error feedback every rank encodes each chunk once per step: the first rank its own share, every
later rank the partial sum with its share added. Each keeps what its own encoding lost, partial sum
included, and adds it to its share of that chunk next step (the double-pass compensation of Tang et
al., "DoubleSqueeze", ICML 2019, along a ring). The errors of a sum add, so what the ring delivered
plus what every memory keeps is exactly what was wanted. A memory that saw only the first encoding
leaves every hop's error uncompensated; at 2 bits that made training diverge.
"""

from __future__ import annotations

import torch

from ...codecs import Codec
from ...codecs.base import Payload
from ..chunking import Piece
from .codec_reducer import CodecReducer
from .reducer import FINAL_HOP, Context, Weighting

__all__ = ["Requantize"]


class Requantize(CodecReducer):
    """Decode the partial sum, add this rank's share, re-encode for the next hop.

    Where the codec keeps coordinates that follow from the chunk key (``randk+qsgd``,
    ``Codec.keyed_values``), the ring works on the aligned k-value vector: shares are the kept
    values, the codec of the values requantizes them, and only the final values are scattered
    back. With error feedback the share is compensated by the memory, and whatever this rank
    encodes (its share, or the partial sum with its share added) leaves what it lost there.
    """

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        super().__init__(ctx, x, weighting, pieces)
        self.keyed = self.codec.keyed_values()
        if self.keyed is not None and self.memory is not None:
            raise TypeError(f"{self.codec.name}: error feedback cannot requantize kept values in a ring")
        values_codec = self.codec if self.keyed is None else self.keyed.values
        if values_codec is None:
            raise TypeError(
                f"{self.codec.name}: kept values that travel as float32 add; nothing to requantize"
            )
        self.values_codec: Codec = values_codec
        self.plain = self.keyed is None and self.memory is None  # the share is x * weight, added on the fly
        self.values: dict[int, torch.Tensor] = {}
        self.rest: dict[int, Payload] = {}

    def _share(self, piece: Piece) -> torch.Tensor:
        """What this rank adds at each hop: its values (the kept ones where coordinates are keyed),
        compensated by the memory."""
        pid = piece.pid
        if pid not in self.values:
            if self.keyed is not None:
                self.values[pid], self.rest[pid] = self.keyed.selector.split(
                    self.share(piece), self.key(pid, 0)
                )
            elif self.memory is not None:
                self.values[pid] = self.memory.compensate(self.share(piece), self.key(pid, 0))
            else:
                self.values[pid] = self.share(piece)
        return self.values[pid]

    def _keep_loss(self, piece: Piece, wanted: torch.Tensor, sent: Payload) -> None:
        """With a memory: what encoding ``wanted`` as ``sent`` lost becomes the chunk's residual."""
        if self.memory is not None:
            self.memory.update(wanted, self.codec.decode(sent), self.key(piece.pid, 0))

    @property
    def wire_codec(self) -> Codec:
        return self.values_codec

    def wire_numel(self, piece: Piece) -> int:
        return piece.numel if self.keyed is None else self.keyed.selector.k_for(piece.numel)

    def warm(self, piece: Piece, out: torch.Tensor) -> None:
        if not self.plain:
            self._share(piece)

    def _own(self, piece: Piece) -> Payload:
        share = self._share(piece)
        payload = self.values_codec.encode(share, self.key(piece.pid, 0))
        self._keep_loss(piece, share, payload)
        return payload

    def _add(self, piece: Piece, received: Payload, hop: int) -> Payload:
        key = self.key(piece.pid, hop if hop >= 0 else FINAL_HOP)
        if self.plain:  # the weighted share is made on the fly, inside the codec's one pass
            return self.values_codec.requantize(received, self.x[piece.lo : piece.hi], key, self.w.weight)
        payload = self.values_codec.requantize(received, self._share(piece), key)
        if self.memory is not None:  # what this hop should have added: the share and the sum so far
            self._keep_loss(piece, self.codec.decode(received).add_(self._share(piece)), payload)
        return payload

    def decode_into(self, piece: Piece, payload: Payload, dst: torch.Tensor) -> None:
        if self.keyed is None:
            self.values_codec.decode_into(payload, dst)
            return
        self._share(piece)  # the selector's coordinates of this piece
        self.keyed.selector.expand(self.values_codec.decode(payload), self.rest[piece.pid], out=dst)
