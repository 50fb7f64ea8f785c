"""Standardization: training-split statistics per feature or per channel, applied to both splits."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_files import arrays, write_npy, write_parquet

from adass.cli import main
from adass.config import RunConfig
from adass.data import (
    DATASETS,
    Dataset,
    load_dataset,
    shard_indices,
    shift_warning,
    standardization_record,
    standardize,
)
from adass.engine import ReplicaState
from adass.registry import SpecError

IDX_NAMES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


def write_idx(folder: Path, x_train: np.ndarray, y_train, x_test: np.ndarray, y_test) -> Path:
    """Four uint8 IDX files; 2-D feature arrays hold vectors, 3-D ones images."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in zip(IDX_NAMES, (x_train, y_train, x_test, y_test), strict=True):
        array = np.asarray(array, dtype=np.uint8)
        header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
        (folder / name).write_bytes(header + array.tobytes())
    return folder


def write_cifar(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (2, 3072), dtype=np.uint8), b"labels": [0, 1]}
        (folder / name).write_bytes(pickle.dumps(batch))
    return folder


def write_cifar100(folder: Path) -> Path:
    rng = np.random.default_rng(1)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("train", "test"):
        batch = {b"data": rng.integers(0, 256, (3, 3072), dtype=np.uint8), b"fine_labels": [0, 1, 99],
                 b"coarse_labels": [0, 1, 19]}  # fmt: skip
        (folder / name).write_bytes(pickle.dumps(batch))
    return folder


def vectors(n: int, d: int, seed: int, shift: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Features with a different mean and scale per column; labels 0/1."""
    gen = torch.Generator().manual_seed(seed)
    scale = torch.linspace(0.1, 5.0, d)
    x = 3.0 + torch.arange(d) + shift * scale + scale * torch.randn(n, d, generator=gen)
    return x, torch.arange(n) % 2


def dataset(x_train, x_test, shape, name="hand") -> Dataset:
    y_train, y_test = torch.arange(len(x_train)) % 2, torch.arange(len(x_test)) % 2
    return Dataset(name, x_train, y_train, x_test, y_test, shape=shape, classes=2)


def test_statistics_come_from_the_training_split_only():
    x_train, _ = vectors(500, 4, seed=0)
    x_test, _ = vectors(100, 4, seed=1)
    out = standardize(dataset(x_train, x_test, (4,)), "on")
    mean, std = x_train.double().mean(0), x_train.double().std(0, unbiased=False)
    assert torch.allclose(out.standardization.mean.double(), mean, atol=1e-4)
    assert torch.allclose(out.standardization.std.double(), std, rtol=1e-5)
    assert torch.allclose(out.x_test.double(), (x_test.double() - mean) / std, atol=1e-4)
    # another test split leaves the statistics, and so the training features, as they were
    other = standardize(dataset(x_train, x_test * 10, (4,)), "on")
    assert torch.equal(other.standardization.mean, out.standardization.mean)
    assert torch.equal(other.x_train, out.x_train)


def test_vectors_are_standardized_per_feature():
    x_train, _ = vectors(400, 6, seed=2)
    out = standardize(dataset(x_train, x_train[:50], (6,)), "on")
    assert out.standardization.per == "feature" and out.standardization.mean.shape == (6,)
    assert torch.allclose(out.x_train.mean(0), torch.zeros(6), atol=1e-4)
    assert torch.allclose(out.x_train.std(0, unbiased=False), torch.ones(6), atol=1e-4)


def test_images_are_standardized_per_channel():
    gen = torch.Generator().manual_seed(3)
    offsets = torch.tensor([0.1, 0.5, 0.9]).view(1, 3, 1, 1)
    x = (offsets + 0.05 * torch.rand(200, 3, 4, 4, generator=gen)).clamp(0, 1)
    x[:, :, 0, 0] = 0.0  # a border pixel that never lights up keeps its place, not a std of its own
    out = standardize(dataset(x, x[:20], (3, 4, 4)), "on")
    stats = out.standardization
    assert stats.per == "channel" and stats.mean.shape == (3,) and stats.std.shape == (3,)
    assert torch.allclose(out.x_train.mean((0, 2, 3)), torch.zeros(3), atol=1e-4)
    assert torch.allclose(out.x_train.std((0, 2, 3), unbiased=False), torch.ones(3), atol=1e-4)
    # one affine map per channel: the order of pixels within a channel is kept
    assert torch.equal(out.x_train[0, 1].flatten().argsort(), x[0, 1].flatten().argsort())
    assert torch.allclose(stats.invert(out.x_train), x, atol=1e-6)


def test_off_leaves_the_features_as_loaded(tmp_path):
    x_train, _ = vectors(50, 3, seed=4)
    data = dataset(x_train, x_train[:5], (3,))
    out = standardize(data, "off")
    assert out.x_train is data.x_train and out.x_test is data.x_test
    assert not out.standardization.applied and standardization_record(out)["setting"] == "off"


def test_auto_keeps_the_synthetic_mixture_as_generated_and_on_standardizes_it():
    spec = "synthetic:n=300,d=5,test=50"
    off, auto, on = (load_dataset(f"{spec},standardize={s}") for s in ("off", "auto", "on"))
    assert torch.equal(auto.x_train, off.x_train) and not auto.standardization.applied
    assert torch.allclose(on.x_train.mean(0), torch.zeros(5), atol=1e-4)


def test_a_constant_feature_is_centred_not_scaled():
    x_train, _ = vectors(100, 3, seed=5)
    x_train[:, 1] = 7.0
    x_test = x_train[:10].clone()
    x_test[:, 1] = 9.0
    out = standardize(dataset(x_train, x_test, (3,)), "on")
    assert out.standardization.std[1] == 1.0
    assert torch.isfinite(out.x_train).all() and torch.all(out.x_train[:, 1] == 0.0)
    assert torch.all(out.x_test[:, 1] == 2.0)


def loader_specs(tmp_path: Path) -> dict[str, str]:
    """A spec for every registered loader, on tiny files written here."""
    rng = np.random.default_rng(0)
    idx = write_idx(tmp_path / "idx", rng.integers(0, 256, (8, 3, 2)), np.arange(8) % 10,
                    rng.integers(0, 256, (4, 3, 2)), np.arange(4))  # fmt: skip
    csv_file = tmp_path / "a.csv"
    csv_file.write_text("".join(f"{rng.normal() + 4:.3f},{rng.normal():.3f},{i % 2}\n" for i in range(20)))
    npy = write_npy(tmp_path / "npy", arrays(n_train=20, n_test=6, shape=(3,)))
    table = write_parquet(tmp_path / "a.parquet", n=20)
    svm = tmp_path / "a.svm"
    svm.write_text("".join(f"{i % 2} 1:{rng.normal() + 4:.3f} 2:{rng.normal():.3f}\n" for i in range(20)))
    return {
        "cifar10": f"cifar10:{write_cifar(tmp_path / 'cifar')}",
        "cifar100": f"cifar100:{write_cifar100(tmp_path / 'cifar100')}",
        "csv": f"csv:{csv_file}",
        "idx": f"idx:{idx}",
        "mnist5k": "mnist5k",
        "npy": f"npy:{npy}",
        "parquet": f"parquet:{table},label=y",
        "svmlight": f"svmlight:{svm}",
        "synthetic": "synthetic:n=40,d=3,test=10",
    }


def test_every_loader_accepts_the_key(tmp_path):
    specs = loader_specs(tmp_path)
    assert sorted(specs) == DATASETS.names()  # a new loader needs a tiny spec here
    for name, spec in specs.items():
        assert DATASETS.entry(name).params["standardize"].choices == ("auto", "on", "off")
        sep = "," if ":" in spec else ":"
        off, on = load_dataset(f"{spec}{sep}standardize=off"), load_dataset(f"{spec}{sep}standardize=on")
        assert on.standardization.applied and not off.standardization.applied
        assert torch.allclose(on.standardization.apply(off.x_train), on.x_train)
        assert torch.allclose(on.x_train.mean(), torch.tensor(0.0), atol=1e-4), name


@pytest.mark.parametrize("spec", ["synthetic:standardize=yes", "mnist5k:standardize="])
def test_a_bad_value_is_one_line_naming_the_option(spec):
    with pytest.raises(SpecError) as err:
        load_dataset(spec)
    message = str(err.value)
    assert "\n" not in message and "standardize=" in message and "auto|on|off" in message
    with pytest.raises(SpecError, match="auto\\|on\\|off"):  # and before any work, when the run is configured
        RunConfig.from_flat(data=spec)


def test_shift_warning_names_a_shifted_data_set_only():
    x_train, _ = vectors(400, 5, seed=6)
    same, _ = vectors(200, 5, seed=7)
    moved, _ = vectors(200, 5, seed=7, shift=0.8)
    assert shift_warning(standardize(dataset(x_train, same, (5,), "steady"), "on")) is None
    line = shift_warning(standardize(dataset(x_train, moved, (5,), "drifted"), "off"))
    assert line is not None and "drifted" in line and "\n" not in line


def test_train_warns_once_and_records_the_statistics(tmp_path, capsys):
    rng = np.random.default_rng(1)
    folder = write_idx(tmp_path / "shifted", rng.integers(100, 140, (60, 4)), np.arange(60) % 2,
                       rng.integers(150, 190, (20, 4)), np.arange(20) % 2)  # fmt: skip
    out = tmp_path / "run"
    args = [
        "train",
        "--data",
        f"idx:{folder}",
        "--model",
        "logreg",
        "--epochs",
        "1",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(args) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and str(folder) in warnings[0]
    saved = json.loads((out / "config.json").read_text())
    record = saved["standardization"]
    assert record["applied"] and record["per"] == "feature" and len(record["mean"]) == 4
    assert RunConfig.from_dict(saved).data.data == f"idx:{folder}"  # the extra key does not upset --resume


def test_replicas_standardize_with_the_global_statistics(tmp_path):
    # label-skewed shards of non-centred data: statistics per shard would differ from shard to shard
    rng = np.random.default_rng(8)
    labels = np.arange(400) % 4
    features = np.clip(60 + 30 * labels[:, None] + rng.normal(0, 10, (400, 3)), 0, 255).astype(np.uint8)
    folder = write_idx(tmp_path / "skewed", features, labels, features[:40], labels[:40])
    spec, world = f"idx:{folder},classes=4", 4
    config = RunConfig.from_flat(data=spec, shard="dirichlet:alpha=0.1", model="logreg", seed=2)
    x = torch.from_numpy(features).float() / 255
    shards = shard_indices(torch.from_numpy(labels), world, "dirichlet:alpha=0.1", seed=2)
    shard_means = []
    for rank in range(world):
        # each replica loads the whole training split, as a Dask actor does, then takes its shard
        engine = ReplicaState.shard(config, load_dataset(spec, seed=2), rank, world)
        expected = (x[shards[rank]] - x.mean(0)) / x.std(0, unbiased=False)
        assert torch.allclose(engine.x, expected, atol=1e-4)
        shard_means.append(engine.x.mean(0))
    # the shards really are skewed: their own means sit far from the global zero
    assert max(float(m.abs().max()) for m in shard_means) > 0.5
