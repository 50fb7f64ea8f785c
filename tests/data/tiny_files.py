"""Tiny dataset files in every format that reads rows alone (npy, Parquet, IDX), written by the tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

IDX_NAMES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def arrays(
    n_train: int = 60, n_test: int = 12, shape: tuple[int, ...] = (4, 3), seed: int = 0
) -> dict[str, np.ndarray]:
    """uint8 features and labels 0..2 of a train and a test split."""
    rng = np.random.default_rng(seed)
    return {
        "x_train": rng.integers(0, 256, (n_train, *shape), dtype=np.uint8),
        "y_train": (np.arange(n_train) % 3).astype(np.uint8),
        "x_test": rng.integers(0, 256, (n_test, *shape), dtype=np.uint8),
        "y_test": (np.arange(n_test) % 3).astype(np.uint8),
    }


def idx_bytes(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    return header + array.astype(np.uint8).tobytes()


def write_idx(folder: Path, data: dict[str, np.ndarray]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for key, array in data.items():
        (folder / IDX_NAMES[key]).write_bytes(idx_bytes(array))
    return folder


def write_npy(folder: Path, data: dict[str, np.ndarray], dtype: type = np.float32) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for key, array in data.items():
        np.save(folder / f"{key}.npy", array.astype(dtype) if key.startswith("x") else array.astype(np.int64))
    return folder


def write_parquet(path: Path, n: int = 60, d: int = 3, row_group_size: int = 8, seed: int = 0) -> Path:
    """A table with float columns ``f0..`` and an integer label ``y`` in several row groups."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"f{j}": rng.normal(loc=j, size=n) for j in range(d)})
    frame["y"] = np.arange(n) % 3
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False, row_group_size=row_group_size)
    return path
