"""The bundled mnist5k file: shapes, split, balance, and errors for a missing or damaged file."""

from __future__ import annotations

import pytest
import torch

from adass.data import DataError, data_dir, load_dataset
from adass.data.mnist5k import FILE_NAME


@pytest.fixture(scope="module")
def mnist():
    return load_dataset("mnist5k:standardize=off")  # pixels as stored, divided by 255


def test_shapes_and_scale(mnist):
    assert mnist.x_train.shape == (4000, 1, 28, 28)
    assert mnist.x_test.shape == (1000, 1, 28, 28)
    assert mnist.x_train.dtype == torch.float32 and mnist.y_train.dtype == torch.int64
    assert mnist.shape == (1, 28, 28) and mnist.classes == 10 and mnist.is_image
    assert 0.0 <= mnist.x_train.min() and mnist.x_train.max() == 1.0
    # digits are mostly background: a sanity check that pixels are not scrambled
    assert 0.05 < mnist.x_train.mean() < 0.25


def test_split_is_stratified(mnist):
    assert torch.bincount(mnist.y_train, minlength=10).tolist() == [400] * 10
    assert torch.bincount(mnist.y_test, minlength=10).tolist() == [100] * 10


def test_train_and_test_are_different_images(mnist):
    train = {bytes(row) for row in (mnist.x_train.flatten(1) * 255).round().to(torch.uint8).numpy()}
    test = [bytes(row) for row in (mnist.x_test.flatten(1) * 255).round().to(torch.uint8).numpy()]
    assert sum(row in train for row in test) <= 5  # MNIST holds a handful of exact duplicates


def test_seed_does_not_change_the_fixed_split(mnist):
    other = load_dataset("mnist5k", seed=7)
    assert torch.equal(other.y_train, mnist.y_train)


def test_data_dir_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ADASS_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path
    with pytest.raises(DataError, match=FILE_NAME) as err:
        load_dataset("mnist5k")
    assert str(tmp_path) in str(err.value)


def test_damaged_file_is_reported(tmp_path, monkeypatch):
    good = (data_dir() / FILE_NAME).read_bytes()
    (tmp_path / FILE_NAME).write_bytes(good[: len(good) // 2])
    monkeypatch.setenv("ADASS_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError, match=FILE_NAME):
        load_dataset("mnist5k")
