"""The dataset registry and ``load_dataset``, which turns a spec such as ``synthetic:n=2000`` into data."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ..locations import is_url
from ..registry import Param, Registry, Spec, parse_spec
from .base import DataError, Dataset
from .feature_stats import Standardization
from .standardization import STANDARDIZE
from .standardization import standardize as standardize_dataset  # the loaders' keyword is `standardize`
from .validation import check_dataset

__all__ = ["DATASETS", "DatasetRegistry", "absolute_paths", "load_dataset", "take_rows"]


class DatasetRegistry(Registry):
    """Dataset loaders; every entry also takes the ``standardize`` key, declared once for all.

    A loader returns features on its files' own scale; the registered entry standardizes them
    afterwards, so no loader handles the key itself. Every entry also takes ``rows`` (read only
    these training rows), ``standardization`` (statistics fitted elsewhere, to apply as they are) and,
    for loaders that can, ``in_file`` (the training features stay in their file until indexed).
    """

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.paths: dict[str, tuple[str, ...]] = {}
        self.reads_rows: dict[str, bool] = {}
        self.keeps_in_file: dict[str, bool] = {}

    def register(
        self, name: str, doc: str = "", *, built_standardized: bool = False, paths: tuple[str, ...] = (),
        reads_rows: bool = False, keeps_in_file: bool = False, **params: Param,
    ) -> Callable:  # fmt: skip
        """Decorator: register ``loader(**params, seed=..., name=...) -> Dataset`` under ``name``.

        ``built_standardized`` marks a loader whose data is centred and unit-scaled by
        construction: ``standardize=auto`` then keeps it as built (``on`` still standardizes).
        ``paths`` names the parameters that are files or folders (see :func:`absolute_paths`).
        ``reads_rows`` marks a loader that takes ``rows=`` and reads only those training rows from
        its files; any other reads its files whole, and the entry keeps the rows asked for.
        ``keeps_in_file`` marks a loader that takes ``in_file=True`` and returns its training features
        as a :class:`~adass.data.rows.FileRows` (read when indexed) instead of a tensor.
        """
        self.paths[name] = paths
        self.reads_rows[name] = reads_rows
        self.keeps_in_file[name] = keeps_in_file

        register_entry = super().register(name, doc, **params, standardize=STANDARDIZE)

        def decorate(loader: Callable[..., Dataset]) -> Callable[..., Dataset]:
            @functools.wraps(loader)
            def load_standardized(
                *, standardize: str = STANDARDIZE.default, rows: np.ndarray | None = None,
                standardization: Standardization | None = None, in_file: bool = False, **values,
            ) -> Dataset:  # fmt: skip
                if in_file:
                    if not keeps_in_file:
                        raise DataError(f"{name}: its files are read whole, so its training rows cannot stay in "
                                        f"the file; formats that can: {', '.join(self.in_file_names())}")  # fmt: skip
                    if standardization is None:
                        raise ValueError(
                            f"{name}: training rows left in the file need the split's standardization"
                        )
                    data = loader(**values, rows=None if rows is None else np.asarray(rows, dtype=np.int64),
                                  in_file=True)  # fmt: skip
                    check_dataset(
                        data
                    )  # labels and the test split; the rows were checked where the split was loaded
                    return replace(data, x_train=data.x_train.standardized(standardization),
                                   x_test=standardization.apply(data.x_test), standardization=standardization)  # fmt: skip
                if rows is None:
                    data = loader(**values)
                elif reads_rows:
                    data = loader(**values, rows=np.asarray(rows, dtype=np.int64))
                else:
                    data = take_rows(loader(**values), rows)
                check_dataset(data)  # before standardizing: its statistics need samples with values
                if standardization is not None:  # fitted on the whole training split, elsewhere
                    # rows taken here are this call's own copy: standardized in place, never held twice
                    fit = standardization.apply if rows is None else standardization.apply_
                    return replace(data, x_train=fit(data.x_train),
                                   x_test=standardization.apply(data.x_test), standardization=standardization)  # fmt: skip
                if rows is not None:
                    raise ValueError(f"{name}: rows of the training split need its standardization")
                return standardize_dataset(data, standardize, built_standardized)

            register_entry(load_standardized)
            return loader

        return decorate

    def in_file_names(self) -> list[str]:
        """Loaders whose training rows can stay in their file."""
        return sorted(name for name, can in self.keeps_in_file.items() if can)


#: Every loader registers itself here: ``loader(**params, seed=..., name=...) -> Dataset``.
DATASETS = DatasetRegistry("data")


def take_rows(data: Dataset, rows: np.ndarray) -> Dataset:
    """``data`` with only the training rows ``rows`` (and their per-sample annotations)."""
    index = torch.as_tensor(np.asarray(rows, dtype=np.int64))
    return replace(data, x_train=data.x_train[index], y_train=data.y_train[index],
                   extras={k: v[index] for k, v in data.extras.items()})  # fmt: skip


def absolute_paths(spec: str) -> str:
    """``spec`` with its files and folders made absolute from this process's working directory (``~``
    expanded), so that a process started elsewhere, such as a Dask worker, reads the same files.
    URLs (``https://``, ``s3://``, ...) are left as they are."""
    parsed = parse_spec(spec, DATASETS.kind)
    paths = DATASETS.paths.get(parsed.name, ())
    args = {key: str(Path(value).expanduser().absolute()) if key in paths and value and not is_url(value) else value
            for key, value in parsed.args.items()}  # fmt: skip
    return str(Spec(parsed.name, args))


def load_dataset(
    spec: str,
    seed: int = 0,
    *,
    rows: np.ndarray | None = None,
    standardization: Standardization | None = None,
    in_file: bool = False,
) -> Dataset:
    """Load the dataset named by a spec.

    Parameters
    ----------
    spec : str
        ``mnist5k``, ``synthetic:n=4000,d=20,...``, ``idx:DIR``, ``cifar10:DIR``, ``cifar100:DIR``, ``csv:PATH``,
        ``svmlight:PATH`` or ``svmlight:PATH,test=PATH``; any of them may add
        ``standardize=auto|on|off``. See ``DATASETS.help()``.
    seed : int
        Seed for everything random in building the data (synthetic draws, train/test splits).
    rows : ndarray, optional
        Keep only these rows of the training split (a replica's shard): loaders of formats with
        fixed-size records or row groups (``idx``, ``npy``, ``parquet``) read just those; the others
        read their files whole and keep the rows. Needs ``standardization``.
    standardization : Standardization, optional
        The whole training split's statistics (``Dataset.standardization`` of a full load), applied
        as they are instead of fitted again.
    in_file : bool
        Leave the training features in their file (``x_train`` is a :class:`~adass.data.rows.FileRows`,
        read a batch at a time as it is indexed): formats with fixed-size rows (``npy``) only; needs
        ``standardization``.

    Returns
    -------
    Dataset
        Train and test tensors, standardized with the training split's statistics unless the
        spec says otherwise; ``name`` is the spec in canonical form.

    Raises
    ------
    SpecError
        The spec names no dataset or has a bad parameter value.
    DataError
        A file is missing, truncated or inconsistent (the message names the file), or the data
        cannot train a classifier: an empty split, empty samples, NaN or infinite features, labels
        out of range, a single class (see :func:`adass.data.validation.check_dataset`).
    """
    parsed = parse_spec(spec, DATASETS.kind)
    if rows is None and standardization is None and not in_file:
        return DATASETS.build(parsed, seed=seed, name=str(parsed))
    extra = {"in_file": True} if in_file else {}
    return DATASETS.build(
        parsed, seed=seed, name=str(parsed), rows=rows, standardization=standardization, **extra
    )
