"""Feature standardization: mean and standard deviation of the training split, applied to both splits.

Plain SGD on raw features that sit far from zero (pixels in [0, 1], sensor readings around 0.55)
meets a badly conditioned input covariance and underfits; subtracting the training mean and
dividing by the training standard deviation fixes that. Vectors are standardized per feature,
images per channel (one mean and one std per colour plane, so every pixel keeps its contrast).
The statistics come from the training split only, so the test split stays unseen, and every
replica of a distributed run, which loads the full training split before taking its shard,
applies the same numbers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..registry import Param, SpecError
from .base import Dataset
from .feature_stats import Standardization, fit

__all__ = [
    "SETTINGS",
    "SHIFT_WARN_STD",
    "STANDARDIZE",
    "Standardization",
    "fit",
    "shift_warning",
    "standardization_record",
    "standardize",
]

SETTINGS = ("auto", "on", "off")

#: The ``standardize`` key every dataset spec accepts (declared once; the dataset registry adds it).
STANDARDIZE = Param(
    "auto",
    "training-split mean/std per feature (vectors) or per channel (images); auto: all but synthetic",
    choices=SETTINGS,
)

#: A test split whose means sit further than this from the training means, on average and in
#: training standard deviations, draws a warning: train and test may not come from one distribution.
SHIFT_WARN_STD = 0.5


def standardize(dataset: Dataset, setting: str, built_standardized: bool = False) -> Dataset:
    """Standardize both splits of ``dataset`` with its training split's statistics.

    Parameters
    ----------
    dataset : Dataset
        As a loader returns it.
    setting : str
        ``on`` standardizes, ``off`` leaves the features as loaded, ``auto`` standardizes unless
        ``built_standardized``.
    built_standardized : bool
        The loader's data is centred and unit-scaled by construction (the synthetic mixture), so
        ``auto`` keeps it exactly as generated.

    Returns
    -------
    Dataset
        A copy with standardized ``x_train``/``x_test`` (or the same tensors) and its
        ``standardization`` recorded; the statistics are computed even when not applied, to
        measure the shift between the splits.
    """
    if setting not in SETTINGS:
        raise SpecError(f"standardize={setting!r} is not allowed; expected one of {'|'.join(SETTINGS)}")
    applied = setting == "on" or (setting == "auto" and not built_standardized)
    stats = fit(dataset.x_train, dataset.x_test, setting, applied)
    return replace(
        dataset,
        x_train=stats.apply(dataset.x_train),
        x_test=stats.apply(dataset.x_test),
        standardization=stats,
    )


def standardization_record(dataset: Dataset) -> dict[str, Any]:
    """What ``config.json`` keeps of how ``dataset`` was standardized (``{"applied": False}`` if unknown)."""
    stats = dataset.standardization
    return {"applied": False} if stats is None else stats.to_dict()


def shift_warning(dataset: Dataset) -> str | None:
    """One line naming the dataset when its test means sit far from its training means, else None."""
    stats = dataset.standardization
    if stats is None or stats.test_shift_std <= SHIFT_WARN_STD:
        return None
    return (
        f"warning: data {dataset.name}: the test split's {stats.per} means sit {stats.test_shift_std:.2f} "
        f"training standard deviations from the training means on average (more than {SHIFT_WARN_STD}); "
        "train and test may come from different distributions"
    )
