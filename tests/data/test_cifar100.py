"""CIFAR-100 loader: fine and coarse labels from tiny ``train``/``test`` files, errors naming the file."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from adass.data import DataError, load_dataset


def write_cifar100(folder: Path, n_train: int = 5, n_test: int = 3, seed: int = 0) -> dict[str, dict]:
    """``train`` and ``test`` the way the CIFAR-100 python version stores them (bytes keys)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    written = {}
    for name, n in (("train", n_train), ("test", n_test)):
        batch = {
            b"filenames": [f"{i}.png".encode() for i in range(n)],
            b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"fine_labels": rng.integers(0, 100, n).tolist(),
            b"coarse_labels": rng.integers(0, 20, n).tolist(),
        }
        (folder / name).write_bytes(pickle.dumps(batch))
        written[name] = batch
    (folder / "meta").write_bytes(pickle.dumps({b"fine_label_names": [], b"coarse_label_names": []}))
    return written


def test_fine_labels_by_default_and_coarse_on_request(tmp_path):
    written = write_cifar100(tmp_path / "cifar-100-python")  # the folder above the files works too
    fine = load_dataset(f"cifar100:{tmp_path},standardize=off")
    assert fine.classes == 100 and fine.shape == (3, 32, 32)
    assert fine.x_train.shape == (5, 3, 32, 32) and fine.x_test.shape == (3, 3, 32, 32)
    assert fine.y_train.tolist() == written["train"][b"fine_labels"]
    assert fine.y_test.tolist() == written["test"][b"fine_labels"]
    pixels = written["train"][b"data"]
    assert fine.x_train[1, 2, 3, 4] == pixels[1, 2 * 1024 + 3 * 32 + 4] / 255  # blue plane, row 3, column 4
    coarse = load_dataset(f"cifar100:{tmp_path},labels=coarse")
    assert coarse.classes == 20 and coarse.y_train.tolist() == written["train"][b"coarse_labels"]


def test_a_fine_label_past_99_is_refused_naming_the_file(tmp_path):
    write_cifar100(tmp_path)
    batch = pickle.loads((tmp_path / "test").read_bytes())
    batch[b"fine_labels"][0] = 100
    (tmp_path / "test").write_bytes(pickle.dumps(batch))
    with pytest.raises(
        DataError, match=re.escape(f"cifar100: {tmp_path / 'test'}: label 100 is out of range 0..99")
    ):
        load_dataset(f"cifar100:{tmp_path}")


def test_each_loader_points_to_the_other_for_the_other_layout(tmp_path):
    write_cifar100(tmp_path / "hundred")
    with pytest.raises(
        DataError, match=f"holds CIFAR-100 files .*load them with cifar100:{tmp_path}/hundred"
    ):
        load_dataset(f"cifar10:{tmp_path / 'hundred'}")
    ten = tmp_path / "ten"
    ten.mkdir()
    (ten / "data_batch_1").write_bytes(b"")
    with pytest.raises(DataError, match=f"holds CIFAR-10 batches; load them with cifar10:{ten}"):
        load_dataset(f"cifar100:{ten}")


def test_a_bad_label_set_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="labels.*fine.*coarse"):
        load_dataset("cifar100:/nowhere,labels=medium")
