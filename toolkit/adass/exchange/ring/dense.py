"""Lossless summable codecs (fp32): raw float32 values travel and partial sums are made in place."""

from __future__ import annotations

import torch

from ...codecs.base import Payload
from ..chunking import Piece
from ..counts import TAIL, read_tail, write_tail
from .reducer import Context, PieceReducer, Weighting

__all__ = ["DenseAdd"]


class DenseAdd(PieceReducer):
    """Lossless summable codecs (fp32): the float32 values travel as they are and partial sums are
    made in the received buffers, so no step copies more than it must.

    A partial sum of piece ``p`` is its ``p.numel`` values followed, when counts travel, by two
    float32 slots holding the partial count (``counts.TAIL``). With a ``workspace`` (float32, as long
    as ``x`` plus the tails of every piece, kept by the ring from step to step), the first share
    and every partial sum of ``p`` live in one region of it (each chunk passes through a rank once
    per reduce-scatter), so a copying transport receives into memory that is already mapped. The
    owner's sum, scaled to the true total, is written straight into ``out``, and final payloads of
    other chunks, values only, are received into ``out`` too. Without a workspace (in process,
    where payloads travel by reference) partial sums are new tensors and the owner sends a copy of
    its values, so a caller changing its result cannot reach another rank's.
    """

    agreed = True
    spreads_nonfinite = True  # raw floats add, and IEEE sums keep a NaN or Inf non-finite

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        super().__init__(ctx, x, weighting, pieces)
        self.tail = TAIL if self.counted else 0
        size = self.workspace_size(pieces)
        self.workspace = None if ctx.workspace is None else ctx.workspace(size, x.device)

    def workspace_size(self, pieces: list[Piece]) -> int:
        """Length of the workspace for ``pieces``: every value of ``x``, and a tail per piece."""
        return self.x.numel() + self.tail * len(pieces)

    def _len(self, piece: Piece) -> int:
        """How many values of ``piece`` travel."""
        return piece.numel

    def _mine(self, piece: Piece) -> torch.Tensor:
        """This rank's values of ``piece`` that travel (before weighting)."""
        return self.x[piece.lo : piece.hi]

    def _region(self, piece: Piece) -> torch.Tensor:
        """Where partial sums of ``piece`` (values, then the count's slots) are made."""
        if self.workspace is None:
            return torch.empty(self._len(piece) + self.tail, dtype=torch.float32, device=self.x.device)
        lo = piece.lo + self.tail * piece.pid
        return self.workspace[lo : lo + piece.numel + self.tail]

    def _final(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        """Where the final values of ``piece`` are made or received: its part of ``out``."""
        return out[piece.lo : piece.hi]

    def first(self, piece: Piece) -> Payload:
        m, buf = self._len(piece), self._region(piece)
        torch.mul(self._mine(piece), self.w.weight, out=buf[:m])
        if self.tail:
            write_tail(buf[m:], self.w.count)
        return Payload({"values": buf}, numel=piece.numel)

    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        m, values = self._len(piece), received.tensors["values"]
        values[:m].add_(self._mine(piece), alpha=self.w.weight)
        if self.tail:
            write_tail(values[m:], read_tail(values[m:]) + self.w.count)
        return received

    def finish(self, piece: Piece, received: Payload | None, out: torch.Tensor) -> Payload:
        m, dst = self._len(piece), self._final(piece, out)
        if received is None:
            total = self.w.count
            torch.mul(self._mine(piece), self.w.weight, out=dst)
        else:
            values = received.tensors["values"]
            total = read_tail(values[m:]) + self.w.count if self.tail else None
            torch.add(values[:m], self._mine(piece), alpha=self.w.weight, out=dst)
        if self.counted:
            self.total = total
            factor = self.w.factor(total)
            if factor != 1.0:
                dst.mul_(factor)
        return Payload({"values": dst.clone() if self.workspace is None else dst}, numel=piece.numel)

    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        dst, values = out[piece.lo : piece.hi], payload.tensors["values"]
        if values.data_ptr() != dst.data_ptr() or values.numel() != dst.numel():
            dst.copy_(values)

    def reduce_buffer(self, piece: Piece) -> torch.Tensor:
        return self._region(piece)

    def gather_buffer(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        return self._final(piece, out)
