"""IDX loader: round trips on tiny plain and gzip files, and one-line errors naming the bad file."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from adass.data import DataError, load_dataset

NAMES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def idx_bytes(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    return header + array.astype(np.uint8).tobytes()


def write_idx(folder: Path, arrays: dict[str, np.ndarray], gz: bool) -> dict[str, Path]:
    paths = {}
    for key, array in arrays.items():
        path = folder / (NAMES[key] + (".gz" if gz else ""))
        raw = idx_bytes(array)
        path.write_bytes(gzip.compress(raw) if gz else raw)
        paths[key] = path
    return paths


@pytest.fixture
def arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "x_train": rng.integers(0, 256, (6, 5, 4), dtype=np.uint8),
        "y_train": np.array([0, 1, 2, 9, 3, 3], dtype=np.uint8),
        "x_test": rng.integers(0, 256, (3, 5, 4), dtype=np.uint8),
        "y_test": np.array([4, 5, 6], dtype=np.uint8),
    }


def expect_error(spec: str, path: Path, words: str) -> str:
    with pytest.raises(DataError, match=re.escape(str(path))) as err:
        load_dataset(spec)
    message = str(err.value)
    assert words in message and "\n" not in message
    return message


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_round_trip(tmp_path, arrays, gz):
    write_idx(tmp_path, arrays, gz)
    data = load_dataset(f"idx:{tmp_path},standardize=off")  # the loader's own scale
    assert data.shape == (1, 5, 4) and data.classes == 10
    assert data.x_train.shape == (6, 1, 5, 4) and data.x_train.dtype == torch.float32
    assert torch.equal(data.x_train[:, 0], torch.from_numpy(arrays["x_train"]).float() / 255)
    assert torch.equal(data.x_test[:, 0], torch.from_numpy(arrays["x_test"]).float() / 255)
    assert data.y_train.tolist() == arrays["y_train"].tolist()
    assert data.y_test.tolist() == arrays["y_test"].tolist()


def test_plain_and_gz_files_can_be_mixed(tmp_path, arrays):
    write_idx(tmp_path, {k: arrays[k] for k in ("x_train", "y_train")}, gz=True)
    write_idx(tmp_path, {k: arrays[k] for k in ("x_test", "y_test")}, gz=False)
    assert load_dataset(f"idx:{tmp_path}").n_test == 3


def test_missing_directory(tmp_path):
    expect_error(f"idx:{tmp_path / 'nowhere'}", tmp_path / "nowhere", "does not exist")


def test_missing_file(tmp_path, arrays):
    paths = write_idx(tmp_path, arrays, gz=False)
    paths["y_test"].unlink()
    expect_error(f"idx:{tmp_path}", paths["y_test"], "not found")


def test_wrong_magic_number(tmp_path, arrays):
    paths = write_idx(tmp_path, arrays, gz=False)
    # a labels file where an images file belongs: one dimension instead of three
    paths["x_train"].write_bytes(idx_bytes(arrays["y_train"]))
    expect_error(f"idx:{tmp_path}", paths["x_train"], "magic number")


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_truncated_file(tmp_path, arrays, gz):
    paths = write_idx(tmp_path, arrays, gz)
    raw = paths["x_test"].read_bytes()
    paths["x_test"].write_bytes(raw[: len(raw) - 7])
    expect_error(f"idx:{tmp_path}", paths["x_test"], "cannot read" if gz else "holds")


def test_label_count_must_match_image_count(tmp_path, arrays):
    arrays["y_train"] = arrays["y_train"][:-1]
    paths = write_idx(tmp_path, arrays, gz=False)
    expect_error(f"idx:{tmp_path}", paths["y_train"], "5 labels for 6 images")


def test_labels_out_of_range(tmp_path, arrays):
    arrays["y_test"][1] = 10
    paths = write_idx(tmp_path, arrays, gz=True)
    expect_error(
        f"idx:{tmp_path}",
        paths["y_test"],
        f"out of range 0..9; for more classes write idx:{tmp_path},classes=11",
    )
    # a wider class count accepts them
    assert load_dataset(f"idx:{tmp_path},classes=11").classes == 11


def test_zero_by_zero_images_are_refused(tmp_path, arrays):
    empty = {**arrays, "x_train": np.zeros((6, 0, 0), np.uint8), "x_test": np.zeros((3, 0, 0), np.uint8)}
    write_idx(tmp_path, empty, gz=False)
    with pytest.raises(DataError, match="hold no values") as err:
        load_dataset(f"idx:{tmp_path}")
    assert "\n" not in str(err.value)
