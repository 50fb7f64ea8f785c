"""``csv:PATH[,test=PATH]``: a table of numbers, one sample per row, one column of class labels.

Delimiter (comma, semicolon, tab, ...) and a header row are recognised from the file: a first row
with any cell that is not a number is the header. The label column is the last one unless
``label`` names another (``first``, ``last``, a header name, or a column number counted from 0).
Labels may be words or whole numbers; classes are the sorted distinct labels of both files. Every
other column must be numeric and complete: a cell that is empty or not a number is refused, naming
its column and line, never quoting the file. ``PATH`` may be a URL; text has no fixed-size rows, so a
replica reads the whole file and keeps its own rows.
"""

from __future__ import annotations

import codecs
import csv

import numpy as np
import pandas as pd
import torch

from ..failures import one_line
from ..locations import Location
from ..registry import Param
from .base import DataError, Dataset, labels_to_tensor
from .catalog import DATASETS
from .files import require_file
from .svmlight import holdout_split
from .validation import check_fits

__all__ = ["label_values", "read_table"]

_SNIFF_BYTES = 64 * 1024  # read to tell the delimiter and the header


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _layout(path: Location) -> tuple[str, bool]:
    """The delimiter of ``path`` and whether its first row is a header, from its first lines."""
    try:
        with path.open("rb") as raw:
            head = raw.read(_SNIFF_BYTES)
        sample = codecs.getincrementaldecoder("utf-8-sig")().decode(
            head, final=False
        )  # a cut last character waits
    except (UnicodeDecodeError, OSError) as err:
        raise DataError(f"csv: {path}: cannot read it as text ({type(err).__name__})") from None
    lines = [line for line in sample.splitlines() if line.strip()]
    if not lines:
        raise DataError(f"csv: {path}: no samples")
    try:
        delimiter = csv.Sniffer().sniff("\n".join(lines[:50]), delimiters=",;\t| ").delimiter
    except csv.Error:
        delimiter = ","  # one column, or nothing to tell
    first = next(csv.reader([lines[0]], delimiter=delimiter, skipinitialspace=True))
    return delimiter, not all(_number(cell.strip()) for cell in first if cell.strip())


def _line(row: int, header: bool) -> int:
    return row + (2 if header else 1)


def _label_column(spec: str, header: list[str] | None, width: int, path: Location) -> int:
    if spec in ("last", "first"):
        return width - 1 if spec == "last" else 0
    if spec.lstrip("-").isdigit():
        column = int(spec)
        if not -width <= column < width:
            raise DataError(
                f"csv: {path}: label={spec} is not a column; the file has {width} (0..{width - 1})"
            )
        return column % width
    if header is None or spec not in header:
        names = f"its header has {len(header)} names" if header else "it has no header row"
        raise DataError(f"csv: {path}: label={spec} names no column ({names}); use first, last or a number")
    return header.index(spec)


def read_table(path: Location, label: str) -> tuple[np.ndarray, np.ndarray, list[str] | None]:
    """Features ``(n, d)`` float32, labels ``(n,)`` (numbers or text), and the header (None without one)."""
    delimiter, has_header = _layout(path)
    size = path.size()
    check_fits(6.0 * size, f"csv: {path}: {size / 2**20:.0f} MiB of text")
    try:
        with path.open("rb") as stream:
            frame = pd.read_csv(stream, sep=r"\s+" if delimiter == " " else delimiter, header=0 if has_header else None,
                                skipinitialspace=True, encoding="utf-8-sig", low_memory=False)  # fmt: skip
    except pd.errors.ParserError as err:  # its message counts fields and lines, quoting nothing
        raise DataError(f"csv: {path}: cannot read it as a table ({one_line(err)})") from None
    except (ValueError, OSError, UnicodeDecodeError) as err:
        raise DataError(f"csv: {path}: cannot read it as a table ({type(err).__name__})") from None
    if frame.empty:
        raise DataError(f"csv: {path}: {'a header and ' if has_header else ''}no samples")
    width = frame.shape[1]
    if width < 2:
        raise DataError(f"csv: {path}: one column; a sample needs features and a label")
    header = [str(c).strip() for c in frame.columns] if has_header else None
    target = _label_column(label, header, width, path)
    features = frame.drop(columns=frame.columns[target])
    numeric = features.apply(pd.to_numeric, errors="coerce")
    bad = numeric.isna().to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        col = int(np.flatnonzero(bad[row])[0])
        column = col + (col >= target)  # the column's number in the file
        what = "is empty" if pd.isna(features.iloc[row, col]) else "is not a number"
        raise DataError(f"csv: {path}: {int(bad.sum())} cells are empty or not numbers; the first: line "
                        f"{_line(row, has_header)}, column {column} (from 0) {what}")  # fmt: skip
    values = numeric.to_numpy(dtype=np.float32)
    if not np.isfinite(values).all():
        raise DataError(f"csv: {path}: {int((~np.isfinite(values)).sum())} infinite feature values")
    labels = frame.iloc[:, target]
    if labels.isna().any():
        raise DataError(f"csv: {path}: {int(labels.isna().sum())} samples have an empty label")
    return values, labels.to_numpy(), header


def label_values(parts: list[np.ndarray], path: Location, kind: str = "csv") -> list[np.ndarray]:
    """Each file's labels as whole numbers when every label is a number, else as text."""
    numbers = [pd.to_numeric(pd.Series(part), errors="coerce").to_numpy(dtype=np.float64) for part in parts]
    if all(not np.isnan(v).any() for v in numbers):
        fractional = sum(int((v != np.round(v)).sum()) for v in numbers)
        if fractional:
            raise DataError(f"{kind}: {path}: {fractional} labels are not whole numbers (regression targets?); "
                            f"a label names a class")  # fmt: skip
        return numbers
    return [np.array([str(t).strip() for t in part]) for part in parts]


@DATASETS.register(
    "csv",
    paths=("path", "test"),
    path=Param("", "training file: a table of numbers with a header row or none (, ; tab | or space)"),
    test=Param("", "test file with the same columns; without it a seeded holdout of the training file"),
    label=Param("last", "the label column: first, last, a header name or a column number from 0"),
    holdout=Param(0.2, "share held out for test when no test file is given", low=0.01, high=0.9),
)
def load_csv(
    path: str, test: str, label: str, holdout: float, *, seed: int = 0, name: str = "csv"
) -> Dataset:
    """A CSV (or other delimited) table; labels mapped to 0..K-1 in sorted order."""
    if not path:
        raise DataError("csv: no file given; write csv:PATH or csv:PATH,test=PATH")
    files = [require_file("csv", path)] + ([require_file("csv", test)] if test else [])
    parts = [read_table(f, label) for f in files]
    if test:
        (_, _, head_train), (_, _, head_test) = parts
        if parts[0][0].shape[1] != parts[1][0].shape[1] or head_train != head_test:
            raise DataError(f"csv: {files[1]}: its columns differ from the training file {files[0]}'s")
    values = label_values([labels for _, labels, _ in parts], files[0])
    classes = np.unique(np.concatenate(values))
    codes = [np.searchsorted(classes, v) for v in values]
    if test:
        unseen = ~np.isin(values[1], values[0])
        if unseen.any():
            raise DataError(f"csv: {files[1]}: {int(unseen.sum())} test samples carry labels that the training "
                            f"file {files[0]} never uses; label both files alike")  # fmt: skip
        x_train, x_test = parts[0][0], parts[1][0]
        y_train, y_test = codes
    else:
        train_idx, test_idx = holdout_split(codes[0], holdout, seed)
        x_train, y_train, x_test, y_test = (
            parts[0][0][train_idx], codes[0][train_idx], parts[0][0][test_idx], codes[0][test_idx]
        )  # fmt: skip
    return Dataset(
        name=name,
        x_train=torch.from_numpy(np.array(x_train, dtype=np.float32)),  # a copy: writable
        y_train=labels_to_tensor(y_train),
        x_test=torch.from_numpy(np.array(x_test, dtype=np.float32)),
        y_test=labels_to_tensor(y_test),
        shape=(int(x_train.shape[1]),),
        classes=int(classes.size),
    )
