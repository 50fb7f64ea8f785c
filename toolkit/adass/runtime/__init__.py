"""Where a run's replicas live, and the one entry that runs it there.

``run(config)`` picks the backend ``config.backend`` names: ``local`` (one model in this process),
``threads`` (``--replicas P``: virtual replicas on threads) or ``dask`` (``--workers P``: actors on
Dask workers, :mod:`adass.runtime.cluster`); every one of them is driven by :func:`adass.engine.drive`.
"""

from .local import LocalBackend
from .run import BACKENDS, run, train
from .threads import ThreadsBackend, on_threads

__all__ = ["BACKENDS", "LocalBackend", "ThreadsBackend", "on_threads", "run", "train"]
