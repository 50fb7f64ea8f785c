"""Reading some rows of a file of fixed-size records (IDX, ``.npy``): range reads, one block at a time.

A replica that needs rows ``[3, 4, 9, ...]`` of a file on a web server or an object store reads the
spans that hold them, never the whole file: neighbouring rows are read together (up to
``BLOCK_BYTES`` per read, gaps up to ``GAP_BYTES`` read through rather than skipped), and only the
wanted rows of each block are kept. A gzip stream is read the same way, by seeking forward, so a
packed file is decompressed once and never held whole.

>>> import io
>>> stream = io.BytesIO(b"HDR" + bytes(range(12)))  # a 3-byte header, 6 records of 2 bytes
>>> read_records(stream, 3, 2, np.array([4, 1])).tolist()
[[8, 9], [2, 3]]
"""

from __future__ import annotations

from typing import IO

import numpy as np

__all__ = ["BLOCK_BYTES", "GAP_BYTES", "read_records", "spans"]

#: the most bytes one read brings in (a row larger than this is read alone)
BLOCK_BYTES = 8 * 2**20
#: a gap between wanted rows up to this size is read through: one request instead of two
GAP_BYTES = 256 * 2**10


def spans(rows: np.ndarray, record_bytes: int, block_bytes: int = BLOCK_BYTES,
          gap_bytes: int = GAP_BYTES) -> list[tuple[int, int]]:  # fmt: skip
    """``(start, stop)`` positions in sorted ``rows``: each group is read with one request."""
    groups, start = [], 0
    for i in range(1, len(rows) + 1):
        ends = i == len(rows)
        if not ends:
            span = (int(rows[i]) - int(rows[start]) + 1) * record_bytes
            gap = (int(rows[i]) - int(rows[i - 1]) - 1) * record_bytes
        if ends or span > block_bytes or gap > gap_bytes:
            groups.append((start, i))
            start = i
    return groups


def _read_into(stream: IO[bytes], buffer: np.ndarray) -> None:
    """Fill ``buffer`` (uint8) from ``stream``: one buffer serves every block, so reading a shard
    holds the shard and one block, never a fresh block per read."""
    view, done = memoryview(buffer), 0
    while done < buffer.size:
        got = stream.readinto(view[done:])
        if not got:
            raise EOFError(f"the file ends {buffer.size - done} bytes early")
        done += got


def read_records(stream: IO[bytes], offset: int, record_bytes: int, rows: np.ndarray) -> np.ndarray:
    """Rows ``rows`` of a file of ``record_bytes``-byte records that starts at byte ``offset``.

    Parameters
    ----------
    stream : binary file
        Seekable (forward seeks suffice): a local file, an fsspec file, a gzip stream.
    offset, record_bytes : int
        Where record 0 starts and the size of one record.
    rows : ndarray
        ``(m,)`` record numbers, in any order.

    Returns
    -------
    ndarray
        ``(m, record_bytes)`` uint8, row ``i`` holding record ``rows[i]``.

    Raises
    ------
    EOFError
        The file ends before a wanted record.
    """
    rows = np.asarray(rows, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    wanted = rows[order]
    out = np.empty((rows.size, record_bytes), dtype=np.uint8)
    groups = spans(wanted, record_bytes)
    records = [int(wanted[stop - 1]) - int(wanted[start]) + 1 for start, stop in groups]
    buffer = np.empty(max(records, default=0) * record_bytes, dtype=np.uint8)
    for (start, stop), count in zip(groups, records, strict=True):
        first = int(wanted[start])
        stream.seek(offset + first * record_bytes)
        block = buffer[: count * record_bytes]
        _read_into(stream, block)
        out[order[start:stop]] = block.reshape(count, record_bytes)[wanted[start:stop] - first]
    return out
