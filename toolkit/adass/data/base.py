"""The in-memory dataset every loader returns, and the errors loaders raise."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .feature_stats import Standardization

__all__ = ["DataError", "DataNotFound", "Dataset", "image_dataset", "images_to_tensor", "labels_to_tensor"]


class DataError(ValueError):
    """A dataset file that is missing, truncated or inconsistent; the message names the file."""


class DataNotFound(DataError):
    """A file or folder the data spec names is not there (on a cluster: not on that worker's machine)."""


@dataclass
class Dataset:
    """Train and test tensors of one dataset.

    Attributes
    ----------
    name : str
        The spec it was built from (``mnist5k``, ``synthetic:n=2000``, ...).
    x_train, x_test : Tensor
        ``(n, *shape)`` float32 features. Loaders return them on the files' own scale (pixels
        divided by 255); ``load_dataset`` then standardizes them as the spec's ``standardize``
        key says, with the training split's statistics.
    y_train, y_test : Tensor
        ``(n,)`` int64 labels in ``[0, classes)``.
    shape : tuple of int
        Shape of one sample: ``(C, H, W)`` for images, ``(d,)`` for vectors.
    classes : int
        Number of classes.
    extras : dict of str to Tensor
        Optional per-sample annotations of the training set, each ``(n_train,)``; the synthetic
        generator records ``clean_labels`` and ``hard`` here.
    standardization : Standardization or None
        The training statistics and whether they were applied; None for a dataset built without
        ``load_dataset``.
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    shape: tuple[int, ...]
    classes: int
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    standardization: Standardization | None = None

    @property
    def is_image(self) -> bool:
        return len(self.shape) == 3

    @property
    def n_train(self) -> int:
        return int(self.y_train.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.y_test.shape[0])

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, train={self.n_train}, test={self.n_test}, "
            f"shape={self.shape}, classes={self.classes})"
        )


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """``(n, ...)`` uint8 values (pixels, byte features) -> float32 tensor in [0, 1]."""
    return torch.from_numpy(np.asarray(images).astype(np.float32)).div_(255.0)  # copies


def labels_to_tensor(labels: np.ndarray) -> torch.Tensor:
    """``(n,)`` integer labels -> int64 tensor."""
    return torch.from_numpy(np.asarray(labels, dtype=np.int64).copy())


def image_dataset(
    name: str, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, classes: int
) -> Dataset:
    """A Dataset from uint8 arrays ``(n, ...)`` (pixels or byte features, scaled to [0, 1]) and integer labels."""
    return Dataset(
        name=name,
        x_train=images_to_tensor(x_train),
        y_train=labels_to_tensor(y_train),
        x_test=images_to_tensor(x_test),
        y_test=labels_to_tensor(y_test),
        shape=tuple(x_train.shape[1:]),
        classes=classes,
    )
