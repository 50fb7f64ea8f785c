"""The dataset registry and ``load_dataset``, which turns a spec such as ``synthetic:n=2000`` into data."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from ..registry import Param, Registry, Spec, parse_spec
from .base import Dataset
from .standardization import STANDARDIZE
from .standardization import standardize as standardize_dataset  # the loaders' keyword is `standardize`
from .validation import check_dataset

__all__ = ["DATASETS", "DatasetRegistry", "absolute_paths", "load_dataset"]


class DatasetRegistry(Registry):
    """Dataset loaders; every entry also takes the ``standardize`` key, declared once for all.

    A loader returns features on its files' own scale; the registered entry standardizes them
    afterwards, so no loader handles the key itself.
    """

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.paths: dict[str, tuple[str, ...]] = {}

    def register(
        self, name: str, doc: str = "", *, built_standardized: bool = False, paths: tuple[str, ...] = (),
        **params: Param,
    ) -> Callable:  # fmt: skip
        """Decorator: register ``loader(**params, seed=..., name=...) -> Dataset`` under ``name``.

        ``built_standardized`` marks a loader whose data is centred and unit-scaled by
        construction: ``standardize=auto`` then keeps it as built (``on`` still standardizes).
        ``paths`` names the parameters that are files or folders (see :func:`absolute_paths`).
        """
        self.paths[name] = paths

        register_entry = super().register(name, doc, **params, standardize=STANDARDIZE)

        def decorate(loader: Callable[..., Dataset]) -> Callable[..., Dataset]:
            @functools.wraps(loader)
            def load_standardized(*, standardize: str = STANDARDIZE.default, **values) -> Dataset:
                data = loader(**values)
                check_dataset(data)  # before standardizing: its statistics need samples with values
                return standardize_dataset(data, standardize, built_standardized)

            register_entry(load_standardized)
            return loader

        return decorate


#: Every loader registers itself here: ``loader(**params, seed=..., name=...) -> Dataset``.
DATASETS = DatasetRegistry("data")


def absolute_paths(spec: str) -> str:
    """``spec`` with its files and folders made absolute from this process's working directory (``~``
    expanded), so that a process started elsewhere, such as a Dask worker, reads the same files."""
    parsed = parse_spec(spec, DATASETS.kind)
    paths = DATASETS.paths.get(parsed.name, ())
    args = {key: str(Path(value).expanduser().absolute()) if key in paths and value else value
            for key, value in parsed.args.items()}  # fmt: skip
    return str(Spec(parsed.name, args))


def load_dataset(spec: str, seed: int = 0) -> Dataset:
    """Load the dataset named by a spec.

    Parameters
    ----------
    spec : str
        ``mnist5k``, ``synthetic:n=4000,d=20,...``, ``idx:DIR``, ``cifar10:DIR``, ``cifar100:DIR``, ``csv:PATH``,
        ``svmlight:PATH`` or ``svmlight:PATH,test=PATH``; any of them may add
        ``standardize=auto|on|off``. See ``DATASETS.help()``.
    seed : int
        Seed for everything random in building the data (synthetic draws, train/test splits).

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
    return DATASETS.build(parsed, seed=seed, name=str(parsed))
