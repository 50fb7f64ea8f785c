"""Chunking: P chunks within one value of each other, pipeline pieces, stable ids."""

from __future__ import annotations

import pytest

from adass.exchange import ChunkLayout, chunk_bounds


@pytest.mark.parametrize("n", [0, 1, 2, 5, 7, 10, 64, 1001])
@pytest.mark.parametrize("parts", [1, 2, 3, 4, 7, 16])
def test_chunks_cover_and_differ_by_at_most_one(n: int, parts: int) -> None:
    bounds = chunk_bounds(n, parts)
    assert len(bounds) == parts
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
    sizes = [hi - lo for lo, hi in bounds]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == n


def test_bad_split_raises() -> None:
    with pytest.raises(ValueError):
        chunk_bounds(5, 0)


@pytest.mark.parametrize("n, parts, segment", [(100, 3, 7), (10, 4, None), (3, 5, 1), (0, 2, 4), (17, 1, 5)])
def test_layout_pieces(n: int, parts: int, segment: int | None) -> None:
    layout = ChunkLayout(n, parts, segment)
    pieces = layout.all_pieces()
    assert [p.pid for p in pieces] == list(range(len(pieces)))
    covered = [i for p in pieces for i in range(p.lo, p.hi)]
    assert covered == list(range(n))
    for c, (lo, hi) in enumerate(layout.chunks):
        row = layout.pieces[c]
        assert all(p.chunk == c and p.numel > 0 for p in row)
        assert sum(p.numel for p in row) == hi - lo
        if segment:
            assert all(p.numel <= segment for p in row)
        else:
            assert len(row) == (1 if hi > lo else 0)
