"""Training rows that stay in their file: a replica whose shard is larger than its memory reads each
batch's rows as it trains.

A :class:`FileRows` stands where a ``(n, *shape)`` feature tensor would: indexing it with positions
(a tensor or array of them, or a slice) reads those rows from the file (range reads from a URL; see
:func:`~adass.data.records.read_records`), converts them as the loader would (bytes to [0, 1],
other numbers to float32) and standardizes them with the training split's statistics, so the tensor
it returns equals the same rows of the loaded split bit for bit. It holds the row numbers and an
open file, never the rows.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> np.save(folder / "x.npy", np.arange(12, dtype=np.float32).reshape(6, 2))
>>> rows = FileRows(Location(folder / "x.npy"), 128, 8, np.dtype(np.float32), (2,), np.array([5, 1, 3]), 6)
>>> tuple(rows.shape), rows[torch.tensor([2, 0])].tolist()
((3, 2), [[6.0, 7.0], [10.0, 11.0]])
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from ..locations import Location
from .base import DataError
from .feature_stats import Standardization
from .files import open_file
from .records import read_records

__all__ = ["FileRows"]


@dataclass
class FileRows:
    """Rows ``rows`` of a file of fixed-size records, read when indexed.

    Attributes
    ----------
    file : Location
        The file (a path or an fsspec URL).
    offset, row_bytes : int
        Where record 0 starts and one record's size.
    dtype : numpy dtype
        The type of the values stored (``uint8`` values are scaled to [0, 1] as pixels are).
    row_shape : tuple of int
        One sample's shape as the model sees it (``(1, H, W)`` for one-channel images).
    rows : ndarray
        ``(n,)`` int64 record numbers: position ``i`` of this object is record ``rows[i]``.
    file_rows : int
        Records in the file.
    standardization : Standardization or None
        Applied to every row read (None: rows as the loader scales them).
    kind : str
        The loader's name, for messages.
    """

    file: Location
    offset: int
    row_bytes: int
    dtype: np.dtype
    row_shape: tuple[int, ...]
    rows: np.ndarray
    file_rows: int
    standardization: Standardization | None = None
    kind: str = "npy"
    _stream: IO[bytes] | None = field(default=None, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    # -- what a feature tensor offers ------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        return torch.Size((int(self.rows.size), *self.row_shape))

    def __len__(self) -> int:
        return int(self.rows.size)

    def dim(self) -> int:
        return 1 + len(self.row_shape)

    def is_floating_point(self) -> bool:
        return True  # every row read is float32

    @property
    def nbytes(self) -> int:
        """Bytes held: the row numbers (the rows themselves stay in the file)."""
        return int(self.rows.nbytes)

    @property
    def file_bytes(self) -> int:
        """Bytes of the file's records these rows stand for (what holding them would take as stored)."""
        return int(self.rows.size) * self.row_bytes

    def __getitem__(self, key: Any) -> torch.Tensor:
        """The rows at positions ``key`` (tensor, array, list, int or slice), read now."""
        if isinstance(key, slice):
            records = self.rows[key]
        else:
            picked = key.cpu().numpy() if isinstance(key, torch.Tensor) else np.asarray(key)
            records = self.rows[picked.astype(np.int64, copy=False)].reshape(-1)
        return self._read(records)

    def index_select(self, dim: int, index: torch.Tensor) -> torch.Tensor:
        """The rows at positions ``index`` (``dim`` 0 only), read now: ``tensor.index_select``'s form."""
        if dim != 0:
            raise ValueError(f"rows in a file are selected along dimension 0, not {dim}")
        return self[index]

    def take(self, key: Any) -> FileRows:
        """Positions ``key`` of these rows, still in the file (nothing is read)."""
        picked = key.cpu().numpy() if isinstance(key, torch.Tensor) else key
        return replace(self, rows=np.asarray(self.rows[picked], dtype=np.int64).reshape(-1))

    def standardized(self, standardization: Standardization) -> FileRows:
        """These rows, standardized with ``standardization`` as they are read."""
        return replace(self, standardization=standardization)

    def blocks(self, block_bytes: int = 4 << 20):
        """The rows in order, ``block_bytes`` of features at a time (one block in memory at once)."""
        step = max(1, block_bytes // max(1, int(np.prod(self.row_shape, dtype=np.int64)) * 4))
        for start in range(0, len(self), step):
            yield self[start : start + step]

    # -- reading -------------------------------------------------------------------------------
    def _read(self, records: np.ndarray) -> torch.Tensor:
        try:
            if self.file.local is not None:
                raw = self._read_mapped(self.file.local, records)
            else:
                with self._lock:
                    if self._stream is None:
                        self._stream = open_file(self.kind, self.file, ranges=True)
                    raw = read_records(self._stream, self.offset, self.row_bytes, records)
        except (ValueError, OSError, EOFError) as err:
            raise DataError(
                f"{self.kind}: {self.file}: cannot read rows ({type(err).__name__}: {err})"
            ) from None
        values = raw.view(self.dtype).reshape(records.size, *self.row_shape)
        if self.dtype == np.uint8:
            x = torch.from_numpy(values.astype(np.float32)).div_(255.0)
        else:
            x = torch.from_numpy(values.astype(np.float32, copy=False))
        return x if self.standardization is None else self.standardization.apply_(x)

    def _read_mapped(self, path: Path, records: np.ndarray) -> np.ndarray:
        """Rows of a local file, gathered from a map of it that lasts this read only: its pages count
        in the process's resident memory while mapped, so none stay mapped between reads."""
        if records.size and int(records.max()) >= self.file_rows:
            raise EOFError(f"row {int(records.max())} asked of a file of {self.file_rows} rows")
        mapped = np.memmap(
            path, dtype=np.uint8, mode="r", offset=self.offset, shape=(self.file_rows, self.row_bytes)
        )
        rows = mapped[records]  # gathered: a copy
        del mapped  # the last reference: unmapped here
        return rows

    def close(self) -> None:
        """Close the file (it opens again at the next read)."""
        with self._lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_stream", "_lock")}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _stream=None, _lock=threading.Lock())
