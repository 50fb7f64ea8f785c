"""What one dashboard run does, wherever it runs: records to the feed (and the saved folder), progress, stop.

:func:`train_for_page` trains a loaded data set and reports through a feed; a run on Dask calls it on
a thread of the server (the work is on the workers), a run of one model or of replicas on threads
calls it in a process of its own (:mod:`adass.dashboard.own_process`), so the training never holds the
server's interpreter while pages wait for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..config import RunConfig
from ..data import Dataset, standardization_record
from ..engine import RunStore
from ..metrics import EvalRecord, ParquetSink
from .feed import LiveFeed, LiveSink, StopRun
from .messages import DaskLink, Status

__all__ = ["train_for_page"]


def train_for_page(config: RunConfig, feed: LiveFeed, dataset: Dataset, run_id: str, save_dir: Path | None,
                   progress: Callable[[EvalRecord], None] | None = None) -> str:  # fmt: skip
    """Train ``config`` on ``dataset``, every record to ``feed``; ``finished`` or ``stopped``.

    Parameters
    ----------
    save_dir : Path, optional
        An empty folder that also keeps the records (Parquet files and ``config.json``); a stopped
        run keeps the epochs it finished.
    progress : callable, optional
        Called with each epoch's EvalRecord (``feed.progress`` if omitted, which raises StopRun once
        a stop was asked for).
    """
    from ..runtime import run

    inner = None
    if save_dir is not None:  # config.json records the standardization the data got
        record = {**config.to_dict(), "standardization": standardization_record(dataset)}
        inner = ParquetSink(save_dir, record)
    sink = LiveSink(feed, inner)
    store = RunStore()  # live step rows, from every backend
    store.listeners.append(feed.listener)
    cluster: dict = {}
    if config.backend == "dask":
        where = config.cluster.scheduler or "a local Dask cluster"
        feed.put(Status(f"starting {config.cluster.workers} workers on {where}"))

        def ready(handle) -> None:
            feed.put(DaskLink(handle.dashboard_link))
            feed.put(Status("training on Dask"))
            feed.check_stop()

        cluster = {"on_ready": ready}
    elif config.backend == "threads":
        feed.put(Status(f"training {config.world} virtual replicas in a process of their own"))
    else:
        feed.put(Status("training in a process of its own"))
    try:
        result = run(config, sink=sink, progress=progress or feed.progress, stop=lambda: feed.stopping,
                     run_id=run_id, dataset=dataset, store=store, **cluster)  # fmt: skip
    except StopRun:
        if inner is not None:
            inner.close()  # keep what the finished epochs recorded
        return "stopped"
    return "stopped" if result.stopped else "finished"
