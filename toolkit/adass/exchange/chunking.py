"""Chunking of a flat buffer: P chunks whose sizes differ by at most one, each cut further into
pipeline pieces; every rank derives the same layout from the length alone.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ChunkLayout", "Piece", "chunk_bounds"]


def chunk_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``(lo, hi)`` ranges covering ``range(n)``; the first ``n % parts`` are
    one longer than the rest (so sizes differ by at most one; some are empty when ``n < parts``).

    Examples
    --------
    >>> chunk_bounds(10, 4)
    [(0, 3), (3, 6), (6, 8), (8, 10)]
    """
    if parts < 1 or n < 0:
        raise ValueError(f"cannot split {n} values into {parts} parts")
    base, extra = divmod(n, parts)
    bounds, lo = [], 0
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


@dataclass(frozen=True)
class Piece:
    """One pipeline piece: its id (unique within a layout, the codec's chunk id), its chunk and range."""

    pid: int
    chunk: int
    lo: int
    hi: int

    @property
    def numel(self) -> int:
        return self.hi - self.lo


class ChunkLayout:
    """``n`` values in ``parts`` chunks, each cut into pieces of at most ``segment`` values.

    Empty chunks have no pieces, so nothing travels for them. Piece ids run over the chunks in
    order, which keeps them stable from step to step (error-feedback memory is kept per id).

    Parameters
    ----------
    n : int
        Length of the flat buffer.
    parts : int
        Number of chunks (the ring's P, or the number of PS servers).
    segment : int, optional
        Largest piece, in values; None or 0: one piece per chunk.
    """

    def __init__(self, n: int, parts: int, segment: int | None = None) -> None:
        self.n, self.parts = n, parts
        self.chunks = chunk_bounds(n, parts)
        self.pieces: list[list[Piece]] = []
        pid = 0
        for c, (lo, hi) in enumerate(self.chunks):
            count = 0 if hi == lo else (1 if not segment else -(-(hi - lo) // segment))
            row = []
            for s_lo, s_hi in chunk_bounds(hi - lo, count) if count else []:
                row.append(Piece(pid, c, lo + s_lo, lo + s_hi))
                pid += 1
            self.pieces.append(row)

    def all_pieces(self) -> list[Piece]:
        """Every piece, in id order."""
        return [p for row in self.pieces for p in row]

    def __repr__(self) -> str:
        return f"ChunkLayout(n={self.n}, parts={self.parts}, pieces={sum(map(len, self.pieces))})"
