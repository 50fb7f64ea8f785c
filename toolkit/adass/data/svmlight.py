"""``svmlight:PATH[,test=PATH]``: LIBSVM / svmlight text files (paths or URLs), densified to float32.

Text has no fixed-size rows: a replica reads the whole file and keeps its own rows."""

from __future__ import annotations

import numpy as np
import torch

from ..locations import Location
from ..registry import Param
from .base import DataError, Dataset, labels_to_tensor
from .catalog import DATASETS
from .files import require_file
from .validation import check_fits

__all__ = ["holdout_split", "read_svmlight"]


def read_svmlight(path: Location) -> tuple[np.ndarray, np.ndarray]:
    """Read one file with indices taken literally (column ``j`` is index ``j``).

    Returns dense float32 features ``(n, max_index + 1)`` and the raw float labels ``(n,)``;
    the caller decides whether indices were one-based, looking at all files together.
    """
    try:  # scikit-learn is optional (the ``svmlight`` extra) and slow to import: only here
        from sklearn.datasets import load_svmlight_file
    except ImportError:
        raise DataError("svmlight: needs scikit-learn; pip install 'adass[svmlight]'") from None
    try:
        with path.open("rb") as stream:
            x, y = load_svmlight_file(stream, dtype=np.float32, zero_based=True)
    except (ValueError, OSError, EOFError, UnicodeDecodeError) as err:
        # the parser's message may quote the file; name the kind of error only
        raise DataError(
            f"svmlight: {path}: cannot parse it as svmlight text ({type(err).__name__})"
        ) from None
    if x.shape[0] == 0:
        raise DataError(f"svmlight: {path}: no samples")
    if not np.isfinite(x.data).all():
        raise DataError(
            f"svmlight: {path}: {int((~np.isfinite(x.data)).sum())} NaN or infinite feature values"
        )
    if not np.isfinite(y).all():
        raise DataError(f"svmlight: {path}: {int((~np.isfinite(y)).sum())} NaN or infinite labels")
    fractional = y != np.round(y)
    if fractional.any():  # regression targets: every distinct value would become a class of its own
        raise DataError(
            f"svmlight: {path}: {int(fractional.sum())} labels are not whole numbers (regression "
            f"targets?); a label names a class, as in LIBSVM's classification files"
        )
    check_fits(
        4.0 * x.shape[0] * x.shape[1], f"svmlight: {path}: {x.shape[0]} samples x {x.shape[1]} features"
    )
    return x.toarray(), y


def holdout_split(labels: np.ndarray, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train/test indices, stratified by label where classes are big enough.

    Each class sends ``round(share * count)`` of its samples to test; if that leaves the test set
    empty (tiny data), a plain random split is used instead.
    """
    rng = np.random.default_rng(seed)
    test_parts = []
    for value in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == value))
        test_parts.append(members[: round(share * members.size)])
    test = np.concatenate(test_parts)
    if test.size == 0 and labels.size > 1:
        test = rng.permutation(labels.size)[: max(1, round(share * labels.size))]
    train_mask = np.ones(labels.size, dtype=bool)
    train_mask[test] = False
    return rng.permutation(np.flatnonzero(train_mask)), rng.permutation(test)


def _pad(x: np.ndarray, d: int) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, d - x.shape[1]))) if x.shape[1] < d else x


@DATASETS.register(
    "svmlight",
    paths=("path", "test"),
    path=Param("", "training file in LIBSVM / svmlight format"),
    test=Param("", "test file; without it a seeded holdout of the training file is used"),
    holdout=Param(0.2, "share held out for test when no test file is given", low=0.01, high=0.9),
)
def load_svmlight(path: str, test: str, holdout: float, *, seed: int = 0, name: str = "svmlight") -> Dataset:
    """LIBSVM / svmlight files; labels mapped to 0..K-1 in sorted order."""
    if not path:
        raise DataError("svmlight: no file given; write svmlight:PATH or svmlight:PATH,test=PATH")
    files = [require_file("svmlight", path)] + ([require_file("svmlight", test)] if test else [])
    parts = [read_svmlight(f) for f in files]
    # Like LIBSVM, indices are one-based unless some file uses index 0 (sklearn's "auto", but
    # decided across all files at once so train and test columns line up).
    if not any(x.shape[1] and x[:, 0].any() for x, _ in parts):
        parts = [(x[:, 1:], y) for x, y in parts]
    d = max(x.shape[1] for x, _ in parts)
    parts = [(_pad(x, d), y) for x, y in parts]

    if test:  # a test file that labels classes its own way (-1/+1 against 0/1) would score 0 silently
        unseen = ~np.isin(parts[1][1], parts[0][1])
        if unseen.any():
            raise DataError(
                f"svmlight: {files[1]}: {int(unseen.sum())} test samples carry {np.unique(parts[1][1][unseen]).size}"
                f" label values that the training file {files[0]} never uses; label both files alike"
            )
    values = np.unique(np.concatenate([y for _, y in parts]))  # sorted: label k is the k-th value
    codes = [np.searchsorted(values, y) for _, y in parts]
    if test:
        (x_train, _), (x_test, _) = parts
        y_train, y_test = codes
    else:
        x_all, y_all = parts[0][0], codes[0]
        train_idx, test_idx = holdout_split(y_all, holdout, seed)
        x_train, y_train, x_test, y_test = (
            x_all[train_idx],
            y_all[train_idx],
            x_all[test_idx],
            y_all[test_idx],
        )
    return Dataset(
        name=name,
        x_train=torch.from_numpy(np.ascontiguousarray(x_train, dtype=np.float32)),
        y_train=labels_to_tensor(y_train),
        x_test=torch.from_numpy(np.ascontiguousarray(x_test, dtype=np.float32)),
        y_test=labels_to_tensor(y_test),
        shape=(d,),
        classes=int(values.size),
    )
