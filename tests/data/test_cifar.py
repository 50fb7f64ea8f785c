"""CIFAR-10 loader: round trips on tiny pickled batches, and errors naming the bad batch file."""

from __future__ import annotations

import collections
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from adass.data import DataError, load_dataset

BATCHES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


def write_batches(folder: Path, per_batch: int = 2, seed: int = 0) -> dict[str, tuple]:
    """Write six tiny batches the way the CIFAR-10 python version stores them (bytes keys)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    written = {}
    for name in BATCHES:
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, per_batch).tolist()
        batch = {b"batch_label": name.encode(), b"data": data, b"labels": labels}
        (folder / name).write_bytes(pickle.dumps(batch))
        written[name] = (data, labels)
    return written


def expect_error(folder: Path, path: Path, words: str) -> None:
    with pytest.raises(DataError, match=re.escape(str(path))) as err:
        load_dataset(f"cifar10:{folder}")
    assert words in str(err.value)


def test_round_trip(tmp_path):
    written = write_batches(tmp_path)
    data = load_dataset(f"cifar10:{tmp_path},standardize=off")  # the loader's own scale
    assert data.x_train.shape == (10, 3, 32, 32) and data.x_test.shape == (2, 3, 32, 32)
    assert data.shape == (3, 32, 32) and data.classes == 10
    assert data.x_train.dtype == torch.float32 and 0 <= data.x_train.min() <= data.x_train.max() <= 1
    first, labels = written["data_batch_1"]
    # row layout: 1024 red values, then green, then blue, each image row-major
    channel, row, col = 1, 4, 7
    assert data.x_train[0, channel, row, col] == first[0, channel * 1024 + row * 32 + col] / 255
    assert data.y_train[:2].tolist() == labels
    assert data.y_train[8:].tolist() == written["data_batch_5"][1]
    assert data.y_test.tolist() == written["test_batch"][1]


def test_accepts_the_folder_above_the_batches(tmp_path):
    write_batches(tmp_path / "cifar-10-batches-py")
    assert load_dataset(f"cifar10:{tmp_path}").n_train == 10


def test_str_keys_are_accepted(tmp_path):
    write_batches(tmp_path)
    path = tmp_path / "test_batch"
    batch = pickle.loads(path.read_bytes())
    path.write_bytes(pickle.dumps({"data": batch[b"data"], "labels": batch[b"labels"]}))
    assert load_dataset(f"cifar10:{tmp_path}").n_test == 2


def test_missing_batch(tmp_path):
    write_batches(tmp_path)
    (tmp_path / "data_batch_3").unlink()
    expect_error(tmp_path, tmp_path / "data_batch_3", "not found")


def test_missing_directory(tmp_path):
    expect_error(tmp_path / "absent", tmp_path / "absent", "does not exist")


def test_truncated_pickle(tmp_path):
    write_batches(tmp_path)
    path = tmp_path / "data_batch_2"
    path.write_bytes(path.read_bytes()[:100])
    expect_error(tmp_path, path, "unreadable pickle")


def test_pickle_with_other_objects_is_refused(tmp_path):
    write_batches(tmp_path)
    path = tmp_path / "test_batch"
    path.write_bytes(pickle.dumps(collections.OrderedDict(data=1)))
    expect_error(tmp_path, path, "refusing to load collections.OrderedDict")


def test_labels_out_of_range(tmp_path):
    write_batches(tmp_path)
    path = tmp_path / "data_batch_4"
    batch = pickle.loads(path.read_bytes())
    batch[b"labels"][0] = 10
    path.write_bytes(pickle.dumps(batch))
    expect_error(tmp_path, path, "out of range")


def test_label_count_must_match_image_count(tmp_path):
    write_batches(tmp_path)
    path = tmp_path / "data_batch_1"
    batch = pickle.loads(path.read_bytes())
    batch[b"labels"] = batch[b"labels"][:1]
    path.write_bytes(pickle.dumps(batch))
    expect_error(tmp_path, path, "1 labels for 2 images")
