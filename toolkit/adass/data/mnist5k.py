"""``mnist5k``: 5,000 real MNIST digits bundled with the project (4,000 train / 1,000 test)."""

from __future__ import annotations

import os
import zipfile
from importlib import resources
from pathlib import Path

import numpy as np

from .base import DataError, DataNotFound, Dataset, images_to_tensor, labels_to_tensor
from .catalog import DATASETS

__all__ = ["FILE_NAME", "data_dir"]

FILE_NAME = "mnist5k.npz"
_ARRAYS = {
    "x_train": (4000, 28, 28),
    "y_train": (4000,),
    "x_test": (1000, 28, 28),
    "y_test": (1000,),
}


def data_dir() -> Path:
    """Folder of the bundled data: ``$ADASS_DATA_DIR`` if set, else this package's own folder, where
    ``mnist5k.npz`` ships as package data (in a wheel as in a source checkout)."""
    override = os.environ.get("ADASS_DATA_DIR")
    if override:
        return Path(override).expanduser()
    return Path(str(resources.files(__package__)))  # a regular package on disk: its folder


def _read(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise DataNotFound(
            f"mnist5k: file {path} not found; run data/prepare_mnist5k.py or set ADASS_DATA_DIR"
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in _ARRAYS if key in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DataError(f"mnist5k: {path}: cannot read ({type(err).__name__}: {err})") from None
    for key, shape in _ARRAYS.items():
        if key not in arrays:
            raise DataError(f"mnist5k: {path}: array {key!r} is missing")
        if arrays[key].shape != shape or arrays[key].dtype != np.uint8:
            raise DataError(
                f"mnist5k: {path}: {key} is {arrays[key].dtype}{arrays[key].shape}, expected uint8{shape}"
            )
    for key in ("y_train", "y_test"):
        if arrays[key].max() > 9:
            raise DataError(f"mnist5k: {path}: {key} has label {arrays[key].max()}, expected 0..9")
    return arrays


@DATASETS.register("mnist5k")
def load_mnist5k(*, seed: int = 0, name: str = "mnist5k") -> Dataset:
    """5,000 MNIST digits, 400 per class for training and 100 per class for testing."""
    del seed  # the split is fixed when the file is prepared, so runs compare on the same data
    arrays = _read(data_dir() / FILE_NAME)
    return Dataset(
        name=name,
        x_train=images_to_tensor(arrays["x_train"][:, None]),  # (4000, 1, 28, 28)
        y_train=labels_to_tensor(arrays["y_train"]),
        x_test=images_to_tensor(arrays["x_test"][:, None]),
        y_test=labels_to_tensor(arrays["y_test"]),
        shape=(1, 28, 28),
        classes=10,
    )
