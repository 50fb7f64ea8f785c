"""What one replica holds: its training rows (its shard), the test split and, only where an epoch's
work is handed between replicas, the whole training split; and how a replica reads just that.

A replica of a distributed run reads its shard alone (:func:`read_shard`): the client has loaded the
data once, drawn the shards (:func:`~adass.data.sharding.shard_indices`, the same draw as always) and
fitted the standardization, and sends each replica its row numbers and the statistics. Loaders of
formats with fixed-size rows or row groups read only those rows; the others read their files whole
and keep them (:func:`~adass.data.catalog.load_dataset` with ``rows``). A shard larger than the
replica's memory stays in its file (``in_file``: a :class:`~adass.data.rows.FileRows`, each batch's
rows read as it trains), where the format has fixed-size rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .base import Dataset
from .catalog import load_dataset
from .feature_stats import Standardization
from .rows import FileRows

__all__ = ["Shard", "read_shard"]


@dataclass
class Shard:
    """One replica's data.

    Attributes
    ----------
    indices : Tensor
        ``(n,)`` int64 positions of its training rows in the whole training split, sorted.
    x, y : Tensor
        ``(n, *shape)`` features and ``(n,)`` labels of those rows; the features may stay in their
        file (a :class:`~adass.data.rows.FileRows`, indexed as the tensor would be).
    x_test, y_test : Tensor
        The whole test split.
    shape, classes : tuple of int, int
        One sample's shape and the number of classes.
    n_train : int
        Rows of the whole training split.
    x_all, y_all : Tensor or None
        The whole training split, held only where samples are handed between replicas (an epoch
        shared out by throughput); None otherwise.
    """

    indices: torch.Tensor
    x: torch.Tensor | FileRows
    y: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    shape: tuple[int, ...]
    classes: int
    n_train: int
    x_all: torch.Tensor | None = None
    y_all: torch.Tensor | None = None

    @classmethod
    def of(cls, dataset: Dataset, indices: torch.Tensor, whole: bool = True) -> Shard:
        """Rows ``indices`` of ``dataset``'s training split; with ``whole``, the split as well (no copy)."""
        return cls(indices, dataset.x_train[indices], dataset.y_train[indices], dataset.x_test, dataset.y_test,
                   tuple(dataset.shape), dataset.classes, dataset.n_train,
                   dataset.x_train if whole else None, dataset.y_train if whole else None)  # fmt: skip

    @property
    def n(self) -> int:
        return int(self.indices.numel())

    @property
    def nbytes(self) -> int:
        """Bytes of the tensors held (the whole training split counted once where it is held; rows left
        in their file count their row numbers)."""
        held = [self.indices, self.x, self.y, self.x_test, self.y_test, self.x_all, self.y_all]
        return sum(
            t.nbytes if isinstance(t, FileRows) else t.numel() * t.element_size()
            for t in held
            if t is not None
        )

    @property
    def in_file(self) -> bool:
        """Whether the training features stay in their file (read a batch at a time)."""
        return isinstance(self.x, FileRows)

    @classmethod
    def join(cls, pieces: list[Shard]) -> Shard:
        """One shard of consecutive pieces of training rows (the first one carries the test split)."""
        first = pieces[0]
        return replace(first, indices=torch.cat([p.indices for p in pieces]), x=torch.cat([p.x for p in pieces]),
                       y=torch.cat([p.y for p in pieces]))  # fmt: skip


def read_shard(
    spec: str,
    seed: int,
    indices: torch.Tensor,
    n_train: int,
    standardization: Standardization,
    whole: bool = False,
    in_file: bool = False,
) -> Shard:
    """Read the training rows ``indices`` of ``spec`` and its test split, standardized with the whole
    training split's ``standardization``; with ``whole``, the whole training split besides; with
    ``in_file``, the training rows' features stay in their file and are read as they are indexed.

    Raises
    ------
    DataError
        A file is missing (``DataNotFound``: not on this machine), truncated or inconsistent, or
        ``in_file`` asked of a format whose files are read whole.
    """
    if whole:
        return Shard.of(load_dataset(spec, seed=seed, standardization=standardization), indices)
    part = load_dataset(
        spec, seed=seed, rows=indices.numpy(), standardization=standardization, in_file=in_file
    )
    return Shard(indices, part.x_train, part.y_train, part.x_test, part.y_test, tuple(part.shape), part.classes,
                 n_train)  # fmt: skip
