"""The synthetic Gaussian mixture: determinism, and that ``noise``, ``hard``, ``modes`` and ``cluster_std``
do what they say."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier

from adass.data import load_dataset, make_mixture
from adass.registry import SpecError


def _accuracy(data) -> tuple[float, np.ndarray]:
    model = LogisticRegression(max_iter=300).fit(data.x_train.numpy(), data.y_train.numpy())
    return model.score(data.x_test.numpy(), data.y_test.numpy()), model.predict(data.x_train.numpy())


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


def _linear_and_local_accuracy(modes: int) -> tuple[float, float]:
    data = make_mixture(n=2000, d=10, classes=4, modes=modes, cluster_std=0.4, hard=0.0, noise=0.0, test=500)
    x, y, xt, yt = data.x_train.numpy(), data.y_train.numpy(), data.x_test.numpy(), data.y_test.numpy()
    linear = LogisticRegression(max_iter=500).fit(x, y).score(xt, yt)
    return linear, KNeighborsClassifier(5).fit(x, y).score(xt, yt)


def test_modes_make_classes_of_several_clusters_that_a_linear_model_cannot_separate():
    linear_one, local_one = _linear_and_local_accuracy(modes=1)
    linear_four, local_four = _linear_and_local_accuracy(modes=4)
    assert linear_one > 0.98 and local_one > 0.98
    assert local_four > 0.98  # every cluster is still tight and apart from the others
    assert linear_four < local_four - 0.05  # but a class is no longer one convex region


def test_cluster_std_is_the_spread_of_samples_around_their_cluster():
    data = make_mixture(n=3000, d=6, classes=3, cluster_std=0.3, hard=0.0, noise=0.0, seed=1)
    for c in range(3):
        x = data.x_train[data.y_train == c]
        assert float((x - x.mean(0)).std()) == pytest.approx(0.3, rel=0.03)


def test_with_several_modes_the_boundary_samples_are_still_the_ones_misread():
    data = make_mixture(
        n=2000, d=10, classes=4, modes=4, cluster_std=0.4, hard=0.3, noise=0.0, test=100, seed=5
    )
    x, y = data.x_train.numpy(), data.y_train.numpy()
    wrong = KNeighborsClassifier(5).fit(x, y).predict(x) != y
    hard = data.extras["hard"].numpy()
    assert wrong[hard].mean() > 0.1 and wrong[~hard].mean() < 0.01


def test_modes_and_cluster_std_are_spec_keys():
    data = load_dataset("synthetic:n=400,d=5,classes=2,modes=3,cluster_std=0.5,test=50", seed=0)
    assert data.classes == 2 and data.x_train.shape == (400, 5)
    assert torch.bincount(data.y_test, minlength=2).tolist() == [25, 25]


@pytest.mark.parametrize(
    "spec",
    [
        "synthetic:noise=1.5",
        "synthetic:classes=1",
        "synthetic:n=0.5",
        "synthetic:modes=0",
        "synthetic:cluster_std=0",
    ],
)
def test_bad_values_fail_with_the_option_named(spec):
    key = spec.split(":")[1].split("=")[0]
    with pytest.raises(SpecError, match=key):
        load_dataset(spec)
