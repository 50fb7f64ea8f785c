"""The dataset registry and ``load_dataset``, which turns a spec such as ``synthetic:n=2000`` into data."""

from __future__ import annotations

from ..registry import Registry, parse_spec
from .base import Dataset

__all__ = ["DATASETS", "load_dataset"]

#: Every loader registers itself here: ``factory(**params, seed=..., name=...) -> Dataset``.
DATASETS = Registry("data")


def load_dataset(spec: str, seed: int = 0) -> Dataset:
    """Load the dataset named by a spec.

    Parameters
    ----------
    spec : str
        ``mnist5k``, ``synthetic:n=4000,d=20,...``, ``idx:DIR``, ``cifar10:DIR``,
        ``svmlight:PATH`` or ``svmlight:PATH,test=PATH``; see ``DATASETS.help()``.
    seed : int
        Seed for everything random in building the data (synthetic draws, train/test splits).

    Returns
    -------
    Dataset
        Train and test tensors; ``name`` is the spec in canonical form.

    Raises
    ------
    SpecError
        The spec names no dataset or has a bad parameter value.
    DataError
        A file is missing, truncated or inconsistent; the message names the file.
    """
    parsed = parse_spec(spec, DATASETS.kind)
    return DATASETS.build(parsed, seed=seed, name=str(parsed))
