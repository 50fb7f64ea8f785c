"""On vector data far from zero, default training matches a hand-written, standardized PyTorch MLP.

The data: 40 byte features in [0, 1] with mean 0.55 and std 0.10, 10 classes told apart along
low-variance directions, stored as 2-D IDX files. Raw, its input covariance is badly conditioned
and plain SGD underfits; standardized with the training split's statistics it trains well.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from adass.config import RunConfig
from adass.data import load_dataset
from adass.runtime import train

FEATURES, CLASSES, N_TRAIN, N_TEST, EPOCHS = 40, 10, 3000, 1000, 10
IDX_NAMES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


def write_non_centred(folder: Path, seed: int = 0) -> Path:
    """Gaussian classes mixed into correlated features, then mapped to mean 0.55 and std 0.10 as bytes."""
    rng = np.random.default_rng(seed)
    n = N_TRAIN + N_TEST
    labels = rng.permutation(np.arange(n) % CLASSES)
    centres = 0.35 * rng.normal(size=(CLASSES, FEATURES))
    mixing = rng.normal(size=(FEATURES, FEATURES)) * np.geomspace(1.0, 0.05, FEATURES)[:, None]
    latent = (centres[labels] + rng.normal(size=(n, FEATURES))) @ mixing  # (n, FEATURES)
    values = 0.55 + 0.10 * (latent - latent.mean(0)) / latent.std(0)
    features = np.clip(np.round(values * 255), 0, 255).astype(np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = (features[:N_TRAIN], labels[:N_TRAIN], features[N_TRAIN:], labels[N_TRAIN:])
    for name, array in zip(IDX_NAMES, arrays, strict=True):
        array = array.astype(np.uint8)
        header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
        (folder / name).write_bytes(header + array.tobytes())
    return folder


def hand_written_accuracy(folder: Path) -> float:
    """A plain PyTorch loop: per-feature standardization from train, 40-128-10 MLP, SGD, batch 64."""
    raw = load_dataset(f"idx:{folder},standardize=off")
    mean, std = raw.x_train.mean(0), raw.x_train.std(0)
    x_train, x_test = (raw.x_train - mean) / std, (raw.x_test - mean) / std
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(EPOCHS):
        order = torch.randperm(N_TRAIN)
        for start in range(0, N_TRAIN, 64):
            batch = order[start : start + 64]
            optimizer.zero_grad()
            F.cross_entropy(model(x_train[batch]), raw.y_train[batch]).backward()
            optimizer.step()
    with torch.no_grad():
        return float((model(x_test).argmax(1) == raw.y_test).float().mean())


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_non_centred(tmp_path_factory.mktemp("non_centred"))


@pytest.fixture(scope="module")
def reference(folder) -> float:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a module fixture runs before the suite's one-thread fixture
    try:
        return hand_written_accuracy(folder)
    finally:
        torch.set_num_threads(threads)


def test_the_data_has_the_stated_statistics(folder):
    data = load_dataset(f"idx:{folder},standardize=off")
    assert data.shape == (FEATURES,) and data.classes == CLASSES
    assert 0.0 <= data.x_train.min() and data.x_train.max() <= 1.0
    assert abs(float(data.x_train.mean()) - 0.55) < 0.01 and abs(float(data.x_train.std()) - 0.10) < 0.01


def test_default_training_is_within_two_points_of_the_hand_written_mlp(folder, reference):
    result = train(RunConfig.from_flat(data=f"idx:{folder}", epochs=EPOCHS))  # every other option default
    assert result.final.test_acc >= reference - 0.02, (result.final.test_acc, reference)


def test_without_standardization_the_same_run_underfits(folder, reference):
    result = train(RunConfig.from_flat(data=f"idx:{folder},standardize=off", epochs=EPOCHS))
    assert result.final.test_acc < reference - 0.05, (result.final.test_acc, reference)
