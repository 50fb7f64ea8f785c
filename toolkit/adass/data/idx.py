"""``idx:DIR``: MNIST-style IDX files (MNIST, Fashion-MNIST, KMNIST; 2-D files hold feature vectors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..registry import Param
from .base import DataError, Dataset, image_dataset
from .catalog import DATASETS
from .files import find_file, read_bytes, require_dir

__all__ = ["FILE_NAMES", "read_idx"]

#: split -> (images file, labels file), the names every MNIST-style dataset uses
FILE_NAMES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_UBYTE = 0x08


def read_idx(path: Path, ndim: int | tuple[int, ...]) -> np.ndarray:
    """Read one unsigned-byte IDX file with ``ndim`` dimensions.

    Parameters
    ----------
    path : Path
        The file, optionally ending in ``.gz``.
    ndim : int or tuple of int
        Expected number of dimensions, or the allowed ones: 3 for images, 2 for feature vectors,
        1 for labels.

    Returns
    -------
    ndarray
        uint8 array of the shape the header declares.

    Raises
    ------
    DataError
        Wrong magic number, or a header that does not match the file's length.
    """
    raw = read_bytes("idx", path)
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    magic = raw[:4]
    expected = [bytes([0, 0, _UBYTE, k]) for k in allowed]
    if len(magic) == 4 and magic not in expected:
        wanted = " or ".join(e.hex() for e in expected)
        raise DataError(f"idx: {path}: magic number {magic.hex()} is wrong, expected {wanted}")
    ndim = magic[3] if len(magic) == 4 else allowed[0]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"idx: {path}: truncated header ({len(raw)} bytes)")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    body = len(raw) - header
    if body != int(np.prod(shape)):
        raise DataError(
            f"idx: {path}: header declares shape {shape} ({int(np.prod(shape))} bytes) "
            f"but the file holds {body} bytes of data"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _read_split(folder: Path, split: str, classes: int) -> tuple[np.ndarray, np.ndarray]:
    images_name, labels_name = FILE_NAMES[split]
    images_path = find_file("idx", folder, images_name)
    labels_path = find_file("idx", folder, labels_name)
    images = read_idx(images_path, ndim=(3, 2))  # (n, H, W) images or (n, d) feature vectors
    labels = read_idx(labels_path, ndim=1)
    if labels.shape[0] != images.shape[0]:
        raise DataError(
            f"idx: {labels_path}: {labels.shape[0]} labels for {images.shape[0]} images in {images_path.name}"
        )
    if labels.size and labels.max() >= classes:
        raise DataError(f"idx: {labels_path}: label {labels.max()} is out of range 0..{classes - 1}; for "
                        f"more classes write idx:{folder},classes={int(labels.max()) + 1} (or more)")  # fmt: skip
    return images, labels


@DATASETS.register(
    "idx",
    paths=("path",),
    path=Param("", "folder with the four IDX files (train-/t10k-images/labels, .gz optional)"),
    classes=Param(10, "number of classes; labels must lie in 0..classes-1", low=2, high=1000),
)
def load_idx(path: str, classes: int, *, seed: int = 0, name: str = "idx") -> Dataset:
    """MNIST-style IDX files from a local folder: images, or feature vectors in 2-D files."""
    del seed  # the files fix the split
    folder = require_dir("idx", path)
    x_train, y_train = _read_split(folder, "train", classes)
    x_test, y_test = _read_split(folder, "test", classes)
    if x_train.shape[1:] != x_test.shape[1:]:
        raise DataError(
            f"idx: {folder}: train images are {x_train.shape[1:]} but test images are {x_test.shape[1:]}"
        )
    if x_train.ndim == 3:  # images get their one channel: (n, 1, H, W)
        x_train, x_test = x_train[:, None], x_test[:, None]
    return image_dataset(name, x_train, y_train, x_test, y_test, classes)
