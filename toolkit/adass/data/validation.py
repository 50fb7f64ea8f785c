"""What every loaded dataset must satisfy before a run trains on it, and memory checks before loading.

Messages name the dataset, counts and sizes, never the contents of a file.
"""

from __future__ import annotations

import psutil
import torch

from .base import DataError, Dataset

__all__ = ["check_dataset", "check_fits"]

_GIB = 2**30


def check_fits(bytes_needed: float, what: str, share: float = 0.8) -> None:
    """Raise DataError in one line unless ``bytes_needed`` fits in ``share`` of the memory available now."""
    available = psutil.virtual_memory().available
    if bytes_needed > share * available:
        raise DataError(f"{what} would need {bytes_needed / _GIB:.1f} GiB; {available / _GIB:.1f} GiB of "
                        f"memory is available")  # fmt: skip


def check_dataset(data: Dataset) -> None:
    """Raise DataError in one line if ``data`` has an empty split, an empty sample shape, non-finite
    features, labels outside ``[0, classes)`` or fewer than two classes."""
    name = data.name
    if any(size == 0 for size in data.shape):
        raise DataError(f"{name}: samples of shape {tuple(data.shape)} hold no values")
    if data.classes < 2:
        raise DataError(f"{name}: {data.classes} class; a classifier needs 2 or more")
    for split, x, y in (("train", data.x_train, data.y_train), ("test", data.x_test, data.y_test)):
        if y.numel() == 0:
            raise DataError(f"{name}: the {split} split is empty")
        # NaN and infinities reach the sum; only then are they counted (torch.isfinite makes a copy of
        # the features and a mask, more memory than a shard itself for a moment); rows left in their
        # file are no tensor: the whole split was checked where it was loaded
        bad = 0
        if isinstance(x, torch.Tensor) and x.is_floating_point() and not bool(torch.isfinite(x.sum())):
            bad = int((~torch.isfinite(x)).sum())
        if bad:
            raise DataError(f"{name}: the {split} split has {bad} NaN or infinite feature values")
        low, high = int(y.min()), int(y.max())
        if low < 0 or high >= data.classes:
            raise DataError(f"{name}: {split} labels span {low}..{high}, outside 0..{data.classes - 1}")
