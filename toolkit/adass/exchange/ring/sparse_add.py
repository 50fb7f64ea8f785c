"""Plain random-k: the kept values line up across ranks (their coordinates follow from the chunk
key), so the ring reduces them in place as dense values, and only they travel.
"""

from __future__ import annotations

import torch

from ...codecs.base import Payload
from ..chunking import Piece
from .dense import DenseAdd
from .reducer import Context, Weighting

__all__ = ["SparseAdd"]


class SparseAdd(DenseAdd):
    """Plain random-k (``Codec.keyed_values`` with float32 values): every rank keeps the same ``k``
    coordinates of a piece (they follow from the chunk key), so the kept values line up and the ring reduces them as :class:`DenseAdd` reduces
    dense values. Only the ``k`` float32 values travel (and, with counts, the two slots of
    ``counts.TAIL``): the receiver derives the coordinates itself, so no header is needed.

    The owner's final is the sum scaled to the true total (so finals need no count); every rank
    scatters a final into its part of ``out`` with the codec's ``n/k`` gain, which is the codec's
    own decode. With a workspace (float32, :meth:`workspace_size` values, kept by the
    ring), partial sums live in one region per piece and finals in another; without one (in
    process) they are new tensors.
    """

    spreads_nonfinite = False  # a NaN outside the kept coordinates never travels

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        keyed = ctx.codec.keyed_values()
        if keyed is None or keyed.values is not None:
            raise TypeError(f"{ctx.codec.name}: SparseAdd needs kept values that travel as float32")
        self.selector = keyed.selector
        self.kept = {p.pid: self.selector.k_for(p.numel) for p in pieces}
        super().__init__(ctx, x, weighting, pieces)
        self._offsets: dict[int, tuple[int, int]] = {}
        at, final = 0, sum(self.kept.values()) + self.tail * len(pieces)
        for p in pieces:  # partial sums first, then the finals
            self._offsets[p.pid] = (at, final)
            at, final = at + self.kept[p.pid] + self.tail, final + self.kept[p.pid]
        self._values: dict[int, torch.Tensor] = {}
        self._rest: dict[int, Payload] = {}
        self._cleared: set[int] = set()

    def workspace_size(self, pieces: list[Piece]) -> int:
        """Length of the workspace for ``pieces``: every piece's partial sum (with its tail) and final."""
        return 2 * sum(self.kept[p.pid] for p in pieces) + self.tail * len(pieces)

    def _len(self, piece: Piece) -> int:
        return self.kept[piece.pid]

    def _mine(self, piece: Piece) -> torch.Tensor:
        """This rank's values at the piece's shared coordinates (drawn once per piece)."""
        pid = piece.pid
        if pid not in self._values:
            self._values[pid], self._rest[pid] = self.selector.split(
                self.x[piece.lo : piece.hi], self.key(pid, 0)
            )
        return self._values[pid]

    def warm(self, piece: Piece, out: torch.Tensor) -> None:
        """Draw the piece's coordinates and take its kept values; then its part of ``out``, no
        longer read, is cleared for the final's scatter."""
        self._mine(piece)
        if piece.pid not in self._cleared:
            out[piece.lo : piece.hi].zero_()
            self._cleared.add(piece.pid)

    def _region(self, piece: Piece) -> torch.Tensor:
        if self.workspace is None:
            return super()._region(piece)
        lo = self._offsets[piece.pid][0]
        return self.workspace[lo : lo + self.kept[piece.pid] + self.tail]

    def _final(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        if self.workspace is None:
            return torch.empty(self.kept[piece.pid], dtype=torch.float32, device=self.x.device)
        lo = self._offsets[piece.pid][1]
        return self.workspace[lo : lo + self.kept[piece.pid]]

    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        self.warm(piece, out)  # the coordinates' key, and zeros where nothing is kept
        self.selector.scatter(payload.tensors["values"], self._rest[piece.pid], out[piece.lo : piece.hi])
