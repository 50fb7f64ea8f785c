"""``parquet:PATH[,test=PATH,label=COLUMN,features=A;B;C]``: Parquet tables (paths or URLs).

One sample per row: the ``label`` column names its class (whole numbers or words; classes are the
sorted distinct labels of both files), the ``features`` columns (``;``-separated; by default every
other numeric column) its features. A replica that asks for some training rows reads only the row
groups that hold them, one at a time, and keeps its rows; the label column is read whole (the
classes and the holdout split need every label).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from ..locations import Location
from ..registry import Param
from .base import DataError, Dataset, labels_to_tensor
from .catalog import DATASETS
from .delimited import label_values
from .files import require_file
from .svmlight import holdout_split

__all__ = ["read_rows"]


def _open(file: Location, files: contextlib.ExitStack) -> pq.ParquetFile:
    """``file`` as a ParquetFile whose stream ``files`` closes."""
    try:
        return files.enter_context(
            pq.ParquetFile(
                files.enter_context(file.open("rb", **({} if file.local else {"cache_type": "none"})))
            )
        )
    except (pa.ArrowException, OSError, ValueError) as err:
        raise DataError(f"parquet: {file}: cannot read it as Parquet ({type(err).__name__})") from None


def _columns(file: Location, table: pq.ParquetFile, label: str, features: str) -> list[str]:
    schema = table.schema_arrow
    if label not in schema.names:
        raise DataError(f"parquet: {file}: label={label} names no column; it has {', '.join(schema.names)}")
    if features:
        named = [name.strip() for name in features.split(";") if name.strip()]
        missing = [name for name in named if name not in schema.names]
        if missing:
            raise DataError(
                f"parquet: {file}: features name no column {missing[0]!r}; it has {', '.join(schema.names)}"
            )
        return named
    numeric = [
        f.name
        for f in schema
        if f.name != label and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    ]
    if not numeric:
        raise DataError(
            f"parquet: {file}: no numeric column besides label={label}; name them with features=A;B"
        )
    return numeric


def read_rows(table: pq.ParquetFile, columns: list[str], rows: np.ndarray | None) -> np.ndarray:
    """Features ``(m, len(columns))`` float32 of the file rows ``rows`` (any order; all rows when None),
    read one row group at a time: only the groups that hold a wanted row."""
    meta = table.metadata
    starts = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
    wanted = np.arange(starts[-1]) if rows is None else np.asarray(rows, dtype=np.int64)
    out = np.empty((wanted.size, len(columns)), dtype=np.float32)
    group_of = np.searchsorted(starts, wanted, side="right") - 1
    for group in np.unique(group_of):
        here = np.flatnonzero(group_of == group)
        part = table.read_row_group(int(group), columns=columns)
        local = wanted[here] - starts[group]
        out[here] = np.column_stack([part.column(c).to_numpy(zero_copy_only=False)[local] for c in columns])
    return out


def _labels(file: Location, table: pq.ParquetFile, label: str) -> np.ndarray:
    values = table.read(columns=[label]).column(label)
    if values.null_count:
        raise DataError(f"parquet: {file}: {values.null_count} samples have an empty label")
    return values.to_numpy(zero_copy_only=False)


@DATASETS.register(
    "parquet",
    paths=("path", "test"),
    reads_rows=True,
    path=Param("", "training table: a Parquet file (path or URL)"),
    test=Param("", "test table with the same columns; without it a seeded holdout of the training table"),
    label=Param("label", "the label column's name"),
    features=Param("", "feature columns, ;-separated; empty: every numeric column but the label"),
    holdout=Param(0.2, "share held out for test when no test table is given", low=0.01, high=0.9),
)
def load_parquet(
    path: str, test: str, label: str, features: str, holdout: float, *, seed: int = 0, name: str = "parquet",
    rows: np.ndarray | None = None,
) -> Dataset:  # fmt: skip
    """A Parquet table; labels mapped to 0..K-1 in sorted order; with ``rows``, only the row groups
    holding those training rows are read."""
    if not path:
        raise DataError("parquet: no file given; write parquet:PATH or parquet:PATH,test=PATH")
    files = [require_file("parquet", path)] + ([require_file("parquet", test)] if test else [])
    with contextlib.ExitStack() as opened:
        tables = [_open(f, opened) for f in files]
        return _load(files, tables, label, features, holdout, seed, name, rows)


def _load(
    files: list[Location], tables: list[pq.ParquetFile], label: str, features: str, holdout: float, seed: int,
    name: str, rows: np.ndarray | None,
) -> Dataset:  # fmt: skip
    test = len(files) > 1
    columns = _columns(files[0], tables[0], label, features)
    if test and _columns(files[1], tables[1], label, ";".join(columns)) != columns:
        raise DataError(f"parquet: {files[1]}: its columns differ from the training file {files[0]}'s")
    values = label_values(
        [_labels(f, t, label) for f, t in zip(files, tables, strict=True)], files[0], "parquet"
    )
    classes = np.unique(np.concatenate(values))
    codes = [np.searchsorted(classes, v) for v in values]
    if test:
        unseen = ~np.isin(values[1], values[0])
        if unseen.any():
            raise DataError(f"parquet: {files[1]}: {int(unseen.sum())} test samples carry labels that the "
                            f"training file {files[0]} never uses; label both files alike")  # fmt: skip
        train_rows, test_rows, test_table = np.arange(codes[0].size), np.arange(codes[1].size), tables[1]
        y_train, y_test = codes
    else:  # the training split is a seeded share of the file's rows
        train_rows, test_rows = holdout_split(codes[0], holdout, seed)
        test_table, y_train, y_test = tables[0], codes[0][train_rows], codes[0][test_rows]
    if rows is not None:
        train_rows, y_train = train_rows[rows], y_train[rows]
    try:
        x_train = read_rows(tables[0], columns, train_rows)
        x_test = read_rows(test_table, columns, test_rows)
    except (pa.ArrowException, OSError, ValueError) as err:
        raise DataError(
            f"parquet: {files[0]}: cannot read its features ({type(err).__name__}: {err})"
        ) from None
    return Dataset(name=name, x_train=torch.from_numpy(x_train), y_train=labels_to_tensor(y_train),
                   x_test=torch.from_numpy(x_test), y_test=labels_to_tensor(y_test), shape=(len(columns),),
                   classes=int(classes.size))  # fmt: skip
