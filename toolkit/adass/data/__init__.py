"""Datasets (bundled, synthetic, local files) and how a training set is split across workers.

>>> from adass.data import load_dataset, shard_indices
>>> data = load_dataset("synthetic:n=2000,hard=0.3", seed=1)
>>> shards = shard_indices(data.y_train, world=4, spec="dirichlet:alpha=0.3", seed=1)
"""

from . import cifar, delimited, idx, mnist5k, npy, parquet, svmlight, synthetic  # noqa: F401  (each registers its loader)
from .base import DataError, DataNotFound, Dataset
from .catalog import DATASETS, absolute_paths, load_dataset
from .mnist5k import data_dir
from .rows import FileRows
from .shard import Shard, read_shard
from .sharding import SHARDINGS, shard_indices
from .standardization import Standardization, shift_warning, standardization_record, standardize
from .synthetic import make_mixture

__all__ = [
    "DATASETS",
    "DataError",
    "DataNotFound",
    "Dataset",
    "FileRows",
    "SHARDINGS",
    "Shard",
    "Standardization",
    "absolute_paths",
    "data_dir",
    "load_dataset",
    "make_mixture",
    "read_shard",
    "shard_indices",
    "shift_warning",
    "standardization_record",
    "standardize",
]
