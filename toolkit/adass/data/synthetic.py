"""``synthetic``: a seeded Gaussian mixture with a tunable share of boundary samples and label noise.

Real training sets hold many easy, redundant samples and a minority of informative ones: a class is
several tight groups (a digit written in a few styles), and a few samples sit between groups of
different classes. ``modes`` (clusters per class) and ``cluster_std`` (their spread) draw that
structure; ``hard`` sets the share between clusters. With the defaults (``modes=1``,
``cluster_std=1``) every class is one unit Gaussian.
"""

from __future__ import annotations

import torch

from ..registry import Param
from .base import Dataset
from .catalog import DATASETS
from .validation import check_fits

__all__ = ["SPREAD", "make_mixture"]

#: Distance of each cluster mean from the origin (the default ``cluster_std`` is 1).
SPREAD = 3.0
# Hard samples sit this far along the segment from their own cluster's mean towards a cluster of
# another class (0.5 is the midpoint): close enough to the boundary that a good share of them are misread.
_HARD_RANGE = (0.3, 0.5)


def _cluster_means(clusters: int, d: int, gen: torch.Generator) -> torch.Tensor:
    """``(clusters, d)`` means on a sphere of radius SPREAD, in random directions."""
    directions = torch.randn(clusters, d, generator=gen)
    return SPREAD * directions / directions.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _draw(
    n: int, means: torch.Tensor, classes: int, hard: float, cluster_std: float, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw ``n`` samples; return features ``(n, d)``, true labels ``(n,)`` and the hard mask ``(n,)``.

    ``means`` holds ``modes * classes`` cluster means; cluster ``c`` belongs to class ``c % classes``.
    """
    clusters, d = means.shape
    cluster = (torch.arange(n) % clusters)[torch.randperm(n, generator=gen)]  # balanced clusters
    labels = cluster % classes
    centres = means[cluster]  # (n, d)
    is_hard = torch.zeros(n, dtype=torch.bool)
    is_hard[torch.randperm(n, generator=gen)[: round(hard * n)]] = True
    k = int(is_hard.sum())
    if k and classes > 1:
        # pull each hard sample towards a cluster of a different, uniformly chosen class
        own = cluster[is_hard]
        other = (own % classes + torch.randint(1, classes, (k,), generator=gen)) % classes
        if clusters > classes:  # drawn only then, so modes=1 keeps the draws of a one-cluster class
            other = other + classes * torch.randint(0, clusters // classes, (k,), generator=gen)
        lo, hi = _HARD_RANGE
        t = lo + (hi - lo) * torch.rand(k, 1, generator=gen)
        centres[is_hard] = (1 - t) * means[own] + t * means[other]
    features = centres + cluster_std * torch.randn(n, d, generator=gen)
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
    modes: int = 1,
    cluster_std: float = 1.0,
) -> Dataset:
    """Draw a Gaussian-mixture classification problem.

    Each class is ``modes`` isotropic Gaussian clusters of standard deviation ``cluster_std``, their
    means at distance ``SPREAD`` from the origin in random directions. A share ``hard`` of the
    samples is centred between its own cluster's mean and that of a cluster of another class, near
    the boundary; the rest are easy, and redundant where ``cluster_std`` is small. Train and test
    are drawn the same way, but only train labels get noise.

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
    modes : int
        Clusters per class: above 1 the classes are not convex and the boundaries are not linear.
    cluster_std : float
        Standard deviation of every cluster (and of the hard samples around their centres).
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
    means = _cluster_means(classes * modes, d, gen)
    x_train, clean, hard_train = _draw(n, means, classes, hard, cluster_std, gen)
    y_train = _flip(clean, classes, noise, gen)
    x_test, y_test, _ = _draw(test, means, classes, hard, cluster_std, gen)
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


# Centred, with features of comparable scale, by construction, so standardize=auto keeps every
# draw exactly as generated.
@DATASETS.register(
    "synthetic",
    built_standardized=True,
    n=Param(4000, "training samples", low=1, high=10_000_000),
    d=Param(20, "feature dimension", low=1, high=100_000),
    classes=Param(4, "number of classes", low=2, high=1000),
    noise=Param(0.05, "share of training labels flipped to another class", low=0.0, high=1.0),
    hard=Param(0.2, "share of samples placed near a class boundary", low=0.0, high=1.0),
    test=Param(1000, "test samples (labels not flipped)", low=1, high=10_000_000),
    modes=Param(1, "clusters per class", low=1, high=1000),
    cluster_std=Param(1.0, "standard deviation of each cluster", low=1e-6, high=1e6),
)
def load_synthetic(
    n: int,
    d: int,
    classes: int,
    noise: float,
    hard: float,
    test: int,
    modes: int,
    cluster_std: float,
    *,
    seed: int = 0,
    name: str = "synthetic",
) -> Dataset:
    """Seeded Gaussian mixture with boundary samples and label noise."""
    # draws and copies, and the cluster means
    check_fits(4.0 * (3 * (n + test) + classes * modes) * d, f"synthetic: {n + test} samples x {d} features")
    return make_mixture(
        n, d, classes, noise, hard, test, seed=seed, name=name, modes=modes, cluster_std=cluster_std
    )
