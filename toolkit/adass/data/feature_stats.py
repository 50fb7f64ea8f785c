"""Training-split feature statistics (one mean and std per feature or channel) and how they are fitted.

They know tensors only, so the dataset that records them (adass.data.base) can name them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Standardization", "fit"]

# A feature whose training std is below this share of max(1, |mean|) is constant up to float32
# rounding: it is centred but not scaled, so it stays 0 on the training split instead of blowing up.
_CONSTANT_STD = 1e-6


@dataclass(frozen=True)
class Standardization:
    """Training-split statistics of one dataset and whether they were applied.

    Attributes
    ----------
    setting : str
        The ``standardize`` value asked for: ``auto``, ``on`` or ``off``.
    per : str
        ``feature`` (vectors: one statistic per feature) or ``channel`` (images: one per channel).
    applied : bool
        Whether the features were standardized (``off``, and ``auto`` on data built standardized,
        leave them as loaded).
    mean, std : Tensor
        ``(k,)`` float32 training mean and std, one per feature or channel; a constant feature
        has std 1 here, so it is only centred.
    test_shift_std : float
        Mean over features (or channels) of ``|test mean - train mean| / train std``.
    """

    setting: str
    per: str
    applied: bool
    mean: torch.Tensor
    std: torch.Tensor
    test_shift_std: float

    def _view(self, stat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        # (k,) -> (1, C, 1, 1) for images, (1, d) for vectors, to broadcast over (n, *shape)
        return stat.view(1, -1, *([1] * (x.dim() - 2)))

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """``(n, *shape)`` features -> standardized copy (``x`` itself when not applied)."""
        if not self.applied:
            return x
        return (x - self._view(self.mean, x)) / self._view(self.std, x)

    def apply_(self, x: torch.Tensor) -> torch.Tensor:
        """Standardize ``(n, *shape)`` float features in place and return them: for rows just read,
        which nothing else holds (a replica's shard is then never in memory twice)."""
        if self.applied:
            x.sub_(self._view(self.mean, x)).div_(self._view(self.std, x))
        return x

    def invert(self, x: torch.Tensor) -> torch.Tensor:
        """Undo :meth:`apply`: standardized features back to the loader's scale (e.g. to draw images)."""
        if not self.applied:
            return x
        return x * self._view(self.std, x) + self._view(self.mean, x)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, as ``config.json`` keeps it."""
        return {
            "setting": self.setting,
            "per": self.per,
            "applied": self.applied,
            "mean": [float(v) for v in self.mean],
            "std": [float(v) for v in self.std],
            "test_shift_std": self.test_shift_std,
        }


def _group_dims(x: torch.Tensor) -> tuple[int, ...]:
    """Dimensions reduced for one statistic per feature (vectors) or per channel (images)."""
    return (0, *range(2, x.dim()))


def fit(x_train: torch.Tensor, x_test: torch.Tensor, setting: str, applied: bool) -> Standardization:
    """Training statistics, and how far the test split's means sit from them.

    Parameters
    ----------
    x_train, x_test : Tensor
        ``(n, d)`` vectors or ``(n, C, H, W)`` images.
    setting : str
        The ``standardize`` value asked for, recorded as is.
    applied : bool
        Whether :meth:`Standardization.apply` will change features.

    Returns
    -------
    Standardization
        One mean and std per feature (vectors) or per channel (images), from ``x_train`` only.
    """
    dims = _group_dims(x_train)
    per = "channel" if x_train.dim() == 4 else "feature"
    k = x_train.shape[1]
    if x_train.shape[0]:
        var, mean = torch.var_mean(x_train, dim=dims, correction=0)  # (k,) each
        std = var.sqrt()
    else:
        mean, std = torch.zeros(k), torch.ones(k)
    constant = std <= _CONSTANT_STD * mean.abs().clamp_min(1.0)
    std = torch.where(constant, torch.ones_like(std), std)
    shift = 0.0
    if x_test.shape[0] and k:
        shift = float(((x_test.mean(dim=dims) - mean).abs() / std).mean())
    return Standardization(setting, per, applied, mean.float(), std.float(), shift)
