"""``cifar10:DIR`` and ``cifar100:DIR``: the CIFAR "python version" batches (CIFAR-10's
``data_batch_1..5`` and ``test_batch``; CIFAR-100's ``train`` and ``test``, with fine and coarse labels).

``DIR`` is a folder or a URL of one. A batch is one pickle, read whole: a replica reads every batch
and keeps its own rows (the format has no way to read part of one)."""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np

from ..locations import Location
from ..registry import Param
from .base import DataError, Dataset, image_dataset
from .catalog import DATASETS
from .files import find_file, read_bytes, require_dir

__all__ = ["read_batch"]

TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
SUBFOLDER = "cifar-10-batches-py"
CLASSES = 10
SUBFOLDER_100 = "cifar-100-python"
#: CIFAR-100's label sets: the field of each batch and its number of classes
LABELS_100 = {"fine": ("fine_labels", 100), "coarse": ("coarse_labels", 20)}
_PIXELS = 3 * 32 * 32

# A pickle can run arbitrary code; the batches only need numpy's array reconstruction.
_ALLOWED_GLOBALS = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"),  # protocol 5
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.multiarray", "scalar"),  # numpy integers among the labels
    ("numpy._core.multiarray", "scalar"),
}


class _BatchUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def _field(batch: dict, key: str) -> Any:
    # batches pickled under Python 2 have bytes keys; ones written by Python 3 may have str keys
    for candidate in (key.encode(), key):
        if candidate in batch:
            return batch[candidate]
    return None


def read_batch(
    path: Location, labels_field: str = "labels", classes: int = CLASSES, kind: str = "cifar10"
) -> tuple[np.ndarray, np.ndarray]:
    """Read one pickled batch.

    Parameters
    ----------
    path : Location
        A batch file: a pickled dict with ``data`` ``(n, 3072)`` uint8 and ``labels_field`` (n ints).
    labels_field, classes, kind : str, int, str
        The labels' field, their number of classes and the dataset named in messages.

    Returns
    -------
    images : ndarray
        ``(n, 3, 32, 32)`` uint8.
    labels : ndarray
        ``(n,)`` int64 in ``[0, classes)``.

    Raises
    ------
    DataError
        Unreadable pickle, missing fields, wrong shapes or labels out of range.
    """
    raw = read_bytes(kind, path)
    try:
        batch = _BatchUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as err:  # a damaged pickle can fail in many ways
        raise DataError(f"{kind}: {path}: unreadable pickle ({type(err).__name__}: {err})") from None
    if not isinstance(batch, dict):
        raise DataError(f"{kind}: {path}: expected a pickled dict, found {type(batch).__name__}")
    data, labels = _field(batch, "data"), _field(batch, labels_field)
    if data is None or labels is None:
        raise DataError(f"{kind}: {path}: the batch needs 'data' and '{labels_field}'")
    data = np.asarray(data)
    labels = np.asarray(labels)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _PIXELS:
        raise DataError(f"{kind}: {path}: data is {data.dtype}{data.shape}, expected uint8(n, {_PIXELS})")
    if labels.ndim != 1 or labels.shape[0] != data.shape[0]:
        raise DataError(f"{kind}: {path}: {labels.size} labels for {data.shape[0]} images")
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        bad = labels.max() if labels.max() >= classes else labels.min()
        raise DataError(f"{kind}: {path}: label {bad} is out of range 0..{classes - 1}")
    # rows hold the red plane, then green, then blue, each 32x32 row-major
    return data.reshape(-1, 3, 32, 32), labels.astype(np.int64)


def _batch_folder(kind: str, path: str, subfolder: str) -> Location:
    folder = require_dir(kind, path)
    nested = folder / subfolder
    return nested if nested.is_dir() else folder


@DATASETS.register(
    "cifar10",
    paths=("path",),
    path=Param("", f"folder (or URL) with data_batch_1..5 and test_batch (or one holding {SUBFOLDER}/)"),
)
def load_cifar10(path: str, *, seed: int = 0, name: str = "cifar10") -> Dataset:
    """CIFAR-10 from the pickled python batches in a folder or at a URL."""
    del seed  # the files fix the split
    folder = _batch_folder("cifar10", path, SUBFOLDER)
    cifar100 = (folder / "train").is_file() or (folder / SUBFOLDER_100).is_dir()
    if cifar100 and not (folder / TRAIN_BATCHES[0]).exists():
        raise DataError(
            f"cifar10: {folder} holds CIFAR-100 files (train, test); load them with cifar100:{path}"
        )
    train = [read_batch(find_file("cifar10", folder, b, gz=False)) for b in TRAIN_BATCHES]
    x_test, y_test = read_batch(find_file("cifar10", folder, TEST_BATCH, gz=False))
    x_train, y_train = np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train])
    return image_dataset(name, x_train, y_train, x_test, y_test, CLASSES)


@DATASETS.register(
    "cifar100",
    paths=("path",),
    path=Param("", f"folder (or URL) with train and test (or one holding {SUBFOLDER_100}/)"),
    labels=Param("fine", "which labels to learn: fine (100 classes) or coarse (20 superclasses)",
                 choices=tuple(LABELS_100)),
)  # fmt: skip
def load_cifar100(path: str, labels: str, *, seed: int = 0, name: str = "cifar100") -> Dataset:
    """CIFAR-100 from the pickled python files ``train`` and ``test`` in a folder or at a URL."""
    del seed  # the files fix the split
    folder = _batch_folder("cifar100", path, SUBFOLDER_100)
    cifar10 = (folder / TRAIN_BATCHES[0]).is_file() or (folder / SUBFOLDER).is_dir()
    if cifar10 and not (folder / "train").exists():
        raise DataError(f"cifar100: {folder} holds CIFAR-10 batches; load them with cifar10:{path}")
    field, classes = LABELS_100[labels]
    x_train, y_train = read_batch(
        find_file("cifar100", folder, "train", gz=False), field, classes, "cifar100"
    )
    x_test, y_test = read_batch(find_file("cifar100", folder, "test", gz=False), field, classes, "cifar100")
    return image_dataset(name, x_train, y_train, x_test, y_test, classes)
