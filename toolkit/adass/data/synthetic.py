"""``synthetic``: a seeded Gaussian mixture with a tunable share of boundary samples and label noise."""

from __future__ import annotations

import torch

from ..registry import Param
from .base import Dataset
from .catalog import DATASETS
from .validation import check_fits

__all__ = ["SPREAD", "make_mixture"]

#: Distance of each class mean from the origin, in units of the (unit) within-class spread.
SPREAD = 3.0
# Hard samples sit this far along the segment from their own class mean towards another one
# (0.5 is the midpoint): close enough to the boundary that a good share of them are misread.
_HARD_RANGE = (0.3, 0.5)


def _class_means(classes: int, d: int, gen: torch.Generator) -> torch.Tensor:
    """``(classes, d)`` means on a sphere of radius SPREAD, in random directions."""
    directions = torch.randn(classes, d, generator=gen)
    return SPREAD * directions / directions.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _draw(
    n: int, means: torch.Tensor, hard: float, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw ``n`` samples; return features ``(n, d)``, true labels ``(n,)`` and the hard mask ``(n,)``."""
    classes, d = means.shape
    labels = (torch.arange(n) % classes)[torch.randperm(n, generator=gen)]  # balanced classes
    centres = means[labels]  # (n, d)
    is_hard = torch.zeros(n, dtype=torch.bool)
    is_hard[torch.randperm(n, generator=gen)[: round(hard * n)]] = True
    k = int(is_hard.sum())
    if k and classes > 1:
        # pull each hard sample towards a different, uniformly chosen class
        own = labels[is_hard]
        other = (own + torch.randint(1, classes, (k,), generator=gen)) % classes
        lo, hi = _HARD_RANGE
        t = lo + (hi - lo) * torch.rand(k, 1, generator=gen)
        centres[is_hard] = (1 - t) * means[own] + t * means[other]
    features = centres + torch.randn(n, d, generator=gen)
    return features, labels, is_hard


def _flip(labels: torch.Tensor, classes: int, noise: float, gen: torch.Generator) -> torch.Tensor:
    """Give a share ``noise`` of the samples a different label, chosen uniformly among the others."""
    n = labels.shape[0]
    flipped = labels.clone()
    if classes < 2:
        return flipped
    chosen = torch.randperm(n, generator=gen)[: round(noise * n)]
    shift = torch.randint(1, classes, (chosen.shape[0],), generator=gen)
    flipped[chosen] = (labels[chosen] + shift) % classes
    return flipped


def make_mixture(
    n: int = 4000,
    d: int = 20,
    classes: int = 4,
    noise: float = 0.05,
    hard: float = 0.2,
    test: int = 1000,
    seed: int = 0,
    name: str = "synthetic",
) -> Dataset:
    """Draw a Gaussian-mixture classification problem.

    Each class is a unit-variance Gaussian around a mean at distance ``SPREAD`` from the origin.
    A share ``hard`` of the samples is centred between its own class mean and another class's,
    near the boundary; train and test are drawn the same way, but only train labels get noise.

    Parameters
    ----------
    n, test : int
        Number of training and test samples.
    d : int
        Feature dimension.
    classes : int
        Number of classes (balanced).
    noise : float
        Share of training labels replaced by a different class, chosen uniformly.
    hard : float
        Share of samples placed near a class boundary (in train and test alike).
    seed : int
        Seed of the ``torch.Generator`` that draws everything: same seed, same tensors.
    name : str
        Name stored on the dataset.

    Returns
    -------
    Dataset
        Features ``(n, d)`` float32. ``extras["clean_labels"]`` holds the training labels before
        noise, ``extras["hard"]`` marks the boundary samples of the training set.
    """
    gen = torch.Generator().manual_seed(seed)
    means = _class_means(classes, d, gen)
    x_train, clean, hard_train = _draw(n, means, hard, gen)
    y_train = _flip(clean, classes, noise, gen)
    x_test, y_test, _ = _draw(test, means, hard, gen)
    return Dataset(
        name=name,
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        shape=(d,),
        classes=classes,
        extras={"clean_labels": clean, "hard": hard_train},
    )


# Centred with unit within-class spread by construction (SPREAD is stated in those units), so
# standardize=auto keeps every draw exactly as generated.
@DATASETS.register(
    "synthetic",
    built_standardized=True,
    n=Param(4000, "training samples", low=1, high=10_000_000),
    d=Param(20, "feature dimension", low=1, high=100_000),
    classes=Param(4, "number of classes", low=2, high=1000),
    noise=Param(0.05, "share of training labels flipped to another class", low=0.0, high=1.0),
    hard=Param(0.2, "share of samples placed near a class boundary", low=0.0, high=1.0),
    test=Param(1000, "test samples (labels not flipped)", low=1, high=10_000_000),
)
def load_synthetic(
    n: int,
    d: int,
    classes: int,
    noise: float,
    hard: float,
    test: int,
    *,
    seed: int = 0,
    name: str = "synthetic",
) -> Dataset:
    """Seeded Gaussian mixture with boundary samples and label noise."""
    check_fits(3 * 4.0 * (n + test) * d, f"synthetic: {n + test} samples x {d} features")  # draws and copies
    return make_mixture(n, d, classes, noise, hard, test, seed=seed, name=name)
