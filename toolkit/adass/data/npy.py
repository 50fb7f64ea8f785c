"""``npy:DIR``: NumPy ``.npy`` arrays ``x_train``, ``y_train``, ``x_test`` and ``y_test`` in a folder or at a URL.

Features are ``(n, d)`` vectors, ``(n, H, W)`` one-channel images or ``(n, C, H, W)`` images: uint8
values are scaled to [0, 1] as pixels are, any other number type is read as float32. Labels are
whole numbers in ``[0, classes)``. A ``.npy`` file holds fixed-size rows after a short header, so a
replica that asks for some training rows reads only those, a block at a time (range reads from a
URL), so neither the file nor its page cache is ever held whole.
"""

from __future__ import annotations

import io

import numpy as np
import torch

from ..locations import Location
from ..registry import Param
from .base import DataError, Dataset, images_to_tensor, labels_to_tensor
from .catalog import DATASETS
from .files import find_file, open_file, read_bytes, require_dir
from .records import read_records
from .rows import FileRows

__all__ = ["FILE_NAMES", "npy_rows", "read_npy"]

#: array -> the file it is read from
FILE_NAMES = {key: f"{key}.npy" for key in ("x_train", "y_train", "x_test", "y_test")}


def _header(file: Location) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and data offset from the file's header (its first bytes only)."""
    with open_file("npy", file) as stream:
        try:
            version = np.lib.format.read_magic(stream)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read(stream)
        except (ValueError, OSError, EOFError) as err:
            raise DataError(f"npy: {file}: not a .npy file ({type(err).__name__})") from None
        offset = stream.tell()
    if fortran or dtype.hasobject:
        raise DataError(
            f"npy: {file}: a Fortran-ordered or object array; save it with np.save of a C-ordered array"
        )
    return shape, dtype, offset


def read_npy(file: Location, rows: np.ndarray | None = None) -> np.ndarray:
    """The array in ``file``, or its rows ``rows`` (read alone, a block at a time: range reads from a URL).

    Raises
    ------
    DataError
        Not a ``.npy`` file, a Fortran-ordered or object array, or a file shorter than its header says.
    """
    try:
        if rows is None:
            if file.local is not None:
                return np.load(file.local, allow_pickle=False)
            return np.load(io.BytesIO(read_bytes("npy", file)), allow_pickle=False)
        # not a memory map, even here: taking scattered rows from one touches (and maps) every page
        shape, dtype, offset = _header(file)
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= shape[0]):
            raise DataError(f"npy: {file}: rows {rows.min()}..{rows.max()} asked of {shape[0]} rows")
        row_bytes = int(np.prod(shape[1:])) * dtype.itemsize
        with open_file("npy", file, ranges=True) as stream:
            raw = read_records(stream, offset, row_bytes, rows)
        return raw.view(dtype).reshape(rows.size, *shape[1:])
    except (ValueError, OSError, EOFError) as err:  # a cut-off file, a header that is not numpy's
        raise DataError(f"npy: {file}: cannot read ({type(err).__name__}: {err})") from None


def npy_rows(
    file: Location,
    rows: np.ndarray | None = None,
    header: tuple[tuple[int, ...], np.dtype, int] | None = None,
) -> FileRows:
    """Rows ``rows`` (default: all) of the ``.npy`` file ``file``, left in the file until read;
    ``(n, H, W)`` arrays are read as ``(n, 1, H, W)`` one-channel images, as the loader reads them.
    ``header``: the file's shape, dtype and data offset where the caller has read them already."""
    shape, dtype, offset = header or _header(file)
    if len(shape) not in (2, 3, 4):
        raise DataError(f"npy: {file}: shape {shape}; expected (n, d), (n, H, W) or (n, C, H, W)")
    rows = np.arange(shape[0], dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= shape[0]):
        raise DataError(f"npy: {file}: rows {rows.min()}..{rows.max()} asked of {shape[0]} rows")
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    row_shape = (1, *shape[1:]) if len(shape) == 3 else tuple(shape[1:])
    return FileRows(file, offset, row_bytes, dtype, row_shape, rows, int(shape[0]), kind="npy")


def _features(x: np.ndarray) -> torch.Tensor:
    """``x`` (an array :func:`read_npy` made, nobody else's) as float32 features, copied only to convert."""
    if x.dtype == np.uint8:
        return images_to_tensor(x)
    return torch.from_numpy(np.asarray(x, dtype=np.float32))


def _labels(file: Location, y: np.ndarray) -> np.ndarray:
    if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.bool_)):
        raise DataError(f"npy: {file}: labels are {y.dtype}{y.shape}; expected (n,) whole numbers")
    return y.astype(np.int64)


@DATASETS.register(
    "npy",
    paths=("path",),
    reads_rows=True,
    keeps_in_file=True,
    path=Param("", "folder (or URL of one) with x_train.npy, y_train.npy, x_test.npy, y_test.npy"),
    classes=Param(0, "number of classes; 0: one more than the largest label", low=0, high=100_000),
)
def load_npy(
    path: str, classes: int, *, seed: int = 0, name: str = "npy", rows: np.ndarray | None = None,
    in_file: bool = False,
) -> Dataset:  # fmt: skip
    """NumPy arrays from a folder or URL; with ``rows``, only those training rows are read; with
    ``in_file``, none: the training features stay in their file (a :class:`FileRows`) until indexed."""
    del seed  # the files fix the split
    folder = require_dir("npy", path)
    files = {key: find_file("npy", folder, file_name, gz=False) for key, file_name in FILE_NAMES.items()}
    y_train = _labels(files["y_train"], read_npy(files["y_train"]))  # every label: the counts must agree
    y_test = _labels(files["y_test"], read_npy(files["y_test"]))
    x_test, train_header = read_npy(files["x_test"]), _header(files["x_train"])
    train_shape = train_header[0]
    for split, shape, y in (("train", train_shape, y_train), ("test", x_test.shape, y_test)):
        if y.shape[0] != shape[0]:
            raise DataError(
                f"npy: {files[f'y_{split}']}: {y.shape[0]} labels for {shape[0]} rows of x_{split}.npy"
            )
        if len(shape) not in (2, 3, 4):
            raise DataError(
                f"npy: {files[f'x_{split}']}: shape {shape}; expected (n, d), (n, H, W) or (n, C, H, W)"
            )
    if train_shape[1:] != x_test.shape[1:]:
        raise DataError(
            f"npy: {folder}: train rows are {train_shape[1:]} but test rows are {x_test.shape[1:]}"
        )
    x_train = npy_rows(files["x_train"], rows, train_header) if in_file else read_npy(files["x_train"], rows)
    classes = classes or int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1
    if rows is not None:
        y_train = y_train[rows]
    if x_test.ndim == 3:  # one-channel images: (n, 1, H, W) (rows in the file are read so already)
        x_test = x_test[:, None]
        x_train = x_train if in_file else x_train[:, None]
    return Dataset(name=name, x_train=x_train if in_file else _features(x_train), y_train=labels_to_tensor(y_train),
                   x_test=_features(x_test), y_test=labels_to_tensor(y_test), shape=tuple(x_test.shape[1:]),
                   classes=classes)  # fmt: skip
