"""The synthetic Gaussian mixture: determinism, and that ``noise`` and ``hard`` do what they say."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from adass.data import load_dataset, make_mixture
from adass.registry import SpecError


def _accuracy(data) -> tuple[float, np.ndarray]:
    model = LogisticRegression(max_iter=300).fit(data.x_train.numpy(), data.y_train.numpy())
    return model.score(data.x_test.numpy(), data.y_test.numpy()), model.predict(
        data.x_train.numpy()
    )


def test_shapes_and_defaults():
    data = load_dataset("synthetic")
    assert data.name == "synthetic"
    assert data.x_train.shape == (4000, 20) and data.x_test.shape == (1000, 20)
    assert data.x_train.dtype == torch.float32 and data.y_train.dtype == torch.int64
    assert data.shape == (20,) and data.classes == 4 and not data.is_image


def test_same_seed_same_tensors_other_seed_other_tensors():
    spec = "synthetic:n=500,d=5,classes=3,test=100"
    a, b, c = load_dataset(spec, seed=3), load_dataset(spec, seed=3), load_dataset(spec, seed=4)
    for field in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert not torch.equal(a.x_train, c.x_train)


@pytest.mark.parametrize("noise", [0.0, 0.1, 0.3])
def test_noise_flips_that_share_of_train_labels(noise):
    data = make_mixture(n=2000, d=5, classes=5, noise=noise, hard=0.0, test=500, seed=1)
    flipped = (data.y_train != data.extras["clean_labels"]).float().mean().item()
    assert flipped == pytest.approx(noise, abs=1e-3)
    # test labels are not flipped: they keep the exact class balance of the generator
    assert torch.bincount(data.y_test, minlength=5).tolist() == [100] * 5


def test_hard_marks_that_share_of_samples():
    data = make_mixture(n=1000, hard=0.35, seed=2)
    assert data.extras["hard"].float().mean().item() == pytest.approx(0.35, abs=1e-3)


def test_hard_samples_make_the_problem_harder():
    easy_acc, _ = _accuracy(make_mixture(n=1500, hard=0.0, noise=0.0, test=600, seed=0))
    hard_acc, _ = _accuracy(make_mixture(n=1500, hard=0.8, noise=0.0, test=600, seed=0))
    assert easy_acc > 0.9
    assert easy_acc > hard_acc + 0.15


def test_boundary_samples_are_the_ones_misread():
    data = make_mixture(n=2000, hard=0.5, noise=0.0, test=100, seed=5)
    _, predicted = _accuracy(data)
    wrong = predicted != data.y_train.numpy()
    hard = data.extras["hard"].numpy()
    assert wrong[hard].mean() > 3 * wrong[~hard].mean()


@pytest.mark.parametrize("spec", ["synthetic:noise=1.5", "synthetic:classes=1", "synthetic:n=0.5"])
def test_bad_values_fail_with_the_option_named(spec):
    key = spec.split(":")[1].split("=")[0]
    with pytest.raises(SpecError, match=key):
        load_dataset(spec)
