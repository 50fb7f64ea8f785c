"""Whether every replica gets training samples: more replicas than samples is refused before anything starts.

The sharding itself would refuse such a run too, but only once each replica builds its shard: on
Dask workers that is after the cluster started, and the failure read as a lost process group.
"""

from __future__ import annotations

from ..config import RunConfig
from ..data import Dataset
from ..registry import SpecError

__all__ = ["check_replica_count"]


def check_replica_count(config: RunConfig, dataset: Dataset) -> None:
    """SpecError in one line when ``config`` asks for more replicas than ``dataset`` has training samples.

    Examples
    --------
    >>> from adass.data import load_dataset
    >>> data = load_dataset("synthetic:n=5,d=2,classes=2,test=4")
    >>> check_replica_count(RunConfig.from_flat(data=data.name, replicas=8), data)
    Traceback (most recent call last):
    ...
    adass.options.SpecError: --replicas: 8 replicas need at least 8 training samples (one each); synthetic:n=5,d=2,classes=2,test=4 has 5
    """
    if config.backend == "local" or config.world <= dataset.n_train:
        return
    flag = "--workers" if config.backend == "dask" else "--replicas"
    raise SpecError(f"{flag}: {config.world} replicas need at least {config.world} training samples (one each); "
                    f"{config.data.data} has {dataset.n_train}")  # fmt: skip
