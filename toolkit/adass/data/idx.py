"""``idx:DIR``: MNIST-style IDX files (MNIST, Fashion-MNIST, KMNIST; 2-D files hold feature vectors).

``DIR`` is a folder or a URL of one (``https://host/mnist``, ``s3://bucket/mnist``). Records have a
fixed size, so a replica that asks for some training rows reads only those (range reads; a ``.gz``
file is decompressed as a stream, never held whole).
"""

from __future__ import annotations

import numpy as np

from ..locations import Location
from ..registry import Param
from .base import DataError, Dataset, image_dataset
from .catalog import DATASETS
from .files import find_file, open_file, read_bytes, require_dir
from .records import read_records

__all__ = ["FILE_NAMES", "read_idx"]

#: split -> (images file, labels file), the names every MNIST-style dataset uses
FILE_NAMES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_UBYTE = 0x08


def _header(path: Location, raw: bytes, allowed: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """The header's length and the shape it declares (``raw`` holds at least the file's first bytes)."""
    magic = raw[:4]
    expected = [bytes([0, 0, _UBYTE, k]) for k in allowed]
    if len(magic) == 4 and magic not in expected:
        wanted = " or ".join(e.hex() for e in expected)
        raise DataError(f"idx: {path}: magic number {magic.hex()} is wrong, expected {wanted}")
    ndim = magic[3] if len(magic) == 4 else allowed[0]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"idx: {path}: truncated header ({len(raw)} bytes)")
    return header, tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))


def _check_body(path: Location, shape: tuple[int, ...], body: int) -> None:
    if body != int(np.prod(shape)):
        raise DataError(f"idx: {path}: header declares shape {shape} ({int(np.prod(shape))} bytes) "
                        f"but the file holds {body} bytes of data")  # fmt: skip


def read_idx(path: Location, ndim: int | tuple[int, ...], rows: np.ndarray | None = None) -> np.ndarray:
    """Read one unsigned-byte IDX file with ``ndim`` dimensions, or some of its records.

    Parameters
    ----------
    path : Location
        The file (a path or a URL), optionally ending in ``.gz``.
    ndim : int or tuple of int
        Expected number of dimensions, or the allowed ones: 3 for images, 2 for feature vectors,
        1 for labels.
    rows : ndarray, optional
        Record numbers to read (range reads); all records when None.

    Returns
    -------
    ndarray
        uint8 array of the shape the header declares (with ``len(rows)`` records where given).

    Raises
    ------
    DataError
        Wrong magic number, or a header that does not match the file's length.
    """
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if rows is None:
        raw = read_bytes("idx", path)
        header, shape = _header(path, raw, allowed)
        _check_body(path, shape, len(raw) - header)
        return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)
    packed = path.name.endswith(".gz")
    try:
        with open_file("idx", path, ranges=True) as stream:
            start = stream.read(4 + 4 * max(allowed))
            header, shape = _header(path, start, allowed)
            if not packed:  # a plain file's length is known without reading it
                _check_body(path, shape, path.size() - header)
            rows = np.asarray(rows, dtype=np.int64)
            if rows.size and (rows.min() < 0 or rows.max() >= shape[0]):
                raise DataError(f"idx: {path}: rows {rows.min()}..{rows.max()} asked of {shape[0]} records")
            record = int(np.prod(shape[1:]))
            return read_records(stream, header, record, rows).reshape(rows.size, *shape[1:])
    except (OSError, EOFError) as err:
        raise DataError(f"idx: {path}: cannot read ({type(err).__name__}: {err})") from None


def _read_split(
    folder: Location, split: str, classes: int, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    images_name, labels_name = FILE_NAMES[split]
    images_path = find_file("idx", folder, images_name)
    labels_path = find_file("idx", folder, labels_name)
    labels = read_idx(labels_path, ndim=1)  # every label (a byte each): the counts must agree
    images = read_idx(images_path, ndim=(3, 2), rows=rows)  # (n, H, W) images or (n, d) feature vectors
    count = images.shape[0] if rows is None else _records(images_path)
    if labels.shape[0] != count:
        raise DataError(
            f"idx: {labels_path}: {labels.shape[0]} labels for {count} images in {images_path.name}"
        )
    if labels.size and labels.max() >= classes:
        raise DataError(f"idx: {labels_path}: label {labels.max()} is out of range 0..{classes - 1}; for "
                        f"more classes write idx:{folder},classes={int(labels.max()) + 1} (or more)")  # fmt: skip
    return images, labels if rows is None else labels[rows]


def _records(path: Location) -> int:
    """The record count an IDX file's header declares."""
    with open_file("idx", path) as stream:
        return int(np.frombuffer(stream.read(8), dtype=">u4", count=1, offset=4)[0])


@DATASETS.register(
    "idx",
    paths=("path",),
    reads_rows=True,
    path=Param(
        "", "folder (or URL of one) with the four IDX files (train-/t10k-images/labels, .gz optional)"
    ),
    classes=Param(10, "number of classes; labels must lie in 0..classes-1", low=2, high=1000),
)
def load_idx(
    path: str, classes: int, *, seed: int = 0, name: str = "idx", rows: np.ndarray | None = None
) -> Dataset:
    """MNIST-style IDX files from a folder or URL: images, or feature vectors in 2-D files; with
    ``rows``, only those training records are read."""
    del seed  # the files fix the split
    folder = require_dir("idx", path)
    x_train, y_train = _read_split(folder, "train", classes, rows)
    x_test, y_test = _read_split(folder, "test", classes)
    if x_train.shape[1:] != x_test.shape[1:]:
        raise DataError(
            f"idx: {folder}: train images are {x_train.shape[1:]} but test images are {x_test.shape[1:]}"
        )
    if x_train.ndim == 3:  # images get their one channel: (n, 1, H, W)
        x_train, x_test = x_train[:, None], x_test[:, None]
    return image_dataset(name, x_train, y_train, x_test, y_test, classes)
