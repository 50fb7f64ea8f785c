"""The arithmetic of the all-gather fallback for codecs whose payloads cannot add (top-k: ranks keep
different coordinates): each rank encodes its own pieces once; once every rank's payloads are in,
each rank decodes and sums them in rank order, so every rank ends with the same bits.
"""

from __future__ import annotations

import torch

from ...codecs.base import Payload
from ..chunking import Piece
from ..counts import split_count, with_count
from .reducer import Context, Reducer, Weighting

__all__ = ["GatherSum"]


class GatherSum(Reducer):
    """Every rank's payloads (each with its rank's count), summed in rank order by each rank.

    The all-gather schedule (``allgather.py``) sends :meth:`first` of every piece, hands each payload
    that arrives to :meth:`take`, and asks for :meth:`sum_into` once all are in.
    """

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        super().__init__(ctx, x, weighting, pieces)
        self._mine: dict[int, Payload] = {}  # piece id -> this rank's payload
        self._got: dict[int, dict[int, Payload]] = {}  # origin -> piece id -> payload
        self._counts: dict[int, float] = {}  # origin -> its count

    def first(self, piece: Piece) -> Payload:
        """This rank's own payload of ``piece`` (encoded once, through the memory if any), with its count."""
        payload = self.encode_own(self.share(piece), piece.pid)
        self._mine[piece.pid] = payload
        return with_count(payload, self.w.count) if self.counted else payload  # type: ignore[arg-type]

    def take(self, origin: int, piece: Piece, received: Payload) -> None:
        """Keep rank ``origin``'s payload of ``piece`` (and the count that came with it)."""
        if self.counted:
            received, self._counts[origin] = split_count(received)
        self._got.setdefault(origin, {})[piece.pid] = received

    def sum_into(self, pieces: list[Piece], rank: int, world: int, out: torch.Tensor) -> None:
        """Write the decoded sum of every rank's payloads of ``pieces`` (in rank order; this one is
        ``rank`` of ``world``) into ``out``, scaled to the step's total; set :attr:`total`."""
        got = {**self._got, rank: self._mine}
        total = None
        if self.counted and pieces:
            counts = {**self._counts, rank: self.w.count}
            total = sum(counts[o] for o in range(world))  # exact: grid counts
        factor = 1.0 if total is None else self.w.factor(total)
        for p in pieces:
            acc = self.codec.decode(got[0][p.pid])
            for origin in range(1, world):
                acc += self.codec.decode(got[origin][p.pid])
            out[p.lo : p.hi] = acc if factor == 1.0 else acc * factor
        self.total = total
