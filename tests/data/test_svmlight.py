"""svmlight loader: label mapping, padding to a common width, seeded holdout, and file errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from adass.data import DataError, load_dataset

TRAIN = """\
1 1:0.5 3:2.0
-1 2:1.5
3 1:1.0 2:1.0 3:1.0
-1 3:0.25
"""
TEST = """\
3 5:4.0
1 1:1.0
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_with_test_file_pads_and_maps_labels(tmp_path):
    train, test = write(tmp_path / "a.svm", TRAIN), write(tmp_path / "a.t", TEST)
    data = load_dataset(f"svmlight:{train},test={test},standardize=off")  # the files' values
    assert data.shape == (5,) and data.classes == 3
    assert data.x_train.dtype == torch.float32 and data.x_train.shape == (4, 5)
    # one-based indices: feature 1 is column 0; train had no feature 5, so it is padded with zeros
    assert data.x_train[0].tolist() == [0.5, 0.0, 2.0, 0.0, 0.0]
    assert data.x_test.tolist() == [[0, 0, 0, 0, 4.0], [1.0, 0, 0, 0, 0]]
    # labels -1, 1, 3 become 0, 1, 2 in both files
    assert data.y_train.tolist() == [1, 0, 2, 0]
    assert data.y_test.tolist() == [2, 1]


def test_zero_based_files_keep_column_zero(tmp_path):
    train = write(tmp_path / "z.svm", "0 0:1.0 2:3.0\n1 1:2.0\n")
    data = load_dataset(f"svmlight:{train},holdout=0.5")
    assert data.shape == (3,)


def test_holdout_split_is_stratified_and_seeded(tmp_path):
    rng = np.random.default_rng(0)
    lines = [f"{i % 2} 1:{rng.normal():.4f} 2:{rng.normal():.4f}" for i in range(50)]
    train = write(tmp_path / "b.svm", "\n".join(lines) + "\n")
    a = load_dataset(f"svmlight:{train}", seed=1)
    b = load_dataset(f"svmlight:{train}", seed=1)
    c = load_dataset(f"svmlight:{train}", seed=2)
    assert (a.n_train, a.n_test) == (40, 10)
    assert torch.bincount(a.y_test).tolist() == [5, 5]
    assert torch.equal(a.x_test, b.x_test) and not torch.equal(a.x_test, c.x_test)
    # a partition of the file's rows
    rows = {tuple(r) for r in torch.cat([a.x_train, a.x_test]).tolist()}
    assert len(rows) == 50


def test_missing_file(tmp_path):
    train = write(tmp_path / "a.svm", TRAIN)
    with pytest.raises(DataError, match=re.escape(str(tmp_path / "missing.t"))):
        load_dataset(f"svmlight:{train},test={tmp_path / 'missing.t'}")


def test_malformed_file(tmp_path):
    bad = write(tmp_path / "bad.svm", "1 1:0.5\nnot a line at all\n")
    with pytest.raises(DataError, match=re.escape(str(bad))) as err:
        load_dataset(f"svmlight:{bad}")
    assert "cannot parse" in str(err.value) and "\n" not in str(err.value)


def test_no_path_given():
    with pytest.raises(DataError, match="svmlight:PATH"):
        load_dataset("svmlight")
