"""One entry for every run: ``run(config, sink, progress, stop)`` trains in this process, or on Dask
when ``config.cluster.workers`` asks for replicas. The commands, ``compare`` and the dashboard call it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import RunConfig
from .data import Dataset
from .engine import Counters, RunResult, Stop
from .metrics import EvalRecord, Sink
from .model_memory import check_model_fits
from .trainer import train

__all__ = ["RunResult", "run"]


def run(
    config: RunConfig,
    sink: Sink | None = None,
    progress: Callable[[EvalRecord], None] | None = None,
    stop: Stop = None,
    *,
    run_id: str = "run",
    dataset: Dataset | None = None,
    selection_records: bool = True,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    store: Any = None,
    on_ready: Callable[[Any], None] | None = None,
    handle: Any = None,
) -> RunResult:
    """Train ``config``: on ``config.cluster.workers`` Dask workers if it asks for any, else here.

    Parameters
    ----------
    config : RunConfig
        The run.
    sink : Sink, optional
        Where the records go; a MemorySink if omitted.
    progress : callable, optional
        Called with each epoch's EvalRecord.
    stop : callable or Event, optional
        Asks the run to end early: checked after every step in this process, before every epoch on Dask.
    run_id : str
        Label of the records.
    dataset : Dataset, optional
        In-process runs: use these tensors instead of loading ``config.data.data``.
    selection_records : bool
        In-process runs: write one SelectionRecord per sample and epoch (distributed runs always do).
    checkpoint_dir, resume, store, on_ready, handle
        Distributed runs only; see :func:`adass.cluster.train_distributed`.

    Returns
    -------
    RunResult
        ``counters`` hold backprops, forwards and training seconds in both kinds of run. Distributed
        runs leave ``model`` and ``dataset`` None and put ``totals``, ``store``, ``dashboard_link``,
        rank 0's ``parameters`` and ``faults`` (lost workers and the restarts they caused) in ``extra``.

    Raises
    ------
    SpecError
        Bad input, before anything starts.
    RunFailure
        One line: a worker lost more often than ``--restarts`` allows, losses that stayed non-finite
        for ``--max-nonfinite`` steps (:class:`~adass.failures.Diverged`), an unreachable scheduler.
    """
    if dataset is not None:
        check_model_fits(config, dataset)  # before any replica is built
    if not config.cluster.workers:
        return train(config, sink=sink, progress=progress, dataset=dataset, run_id=run_id,
                     selection_records=selection_records, stop=stop)  # fmt: skip
    from .cluster import train_distributed  # Dask is imported only for distributed runs

    result = train_distributed(config, sink=sink, progress=progress, run_id=run_id, store=store,
                               checkpoint_dir=checkpoint_dir, resume=resume, on_ready=on_ready, handle=handle,
                               stop=stop)  # fmt: skip
    t = result.totals
    counters = Counters(backprops=int(t["backprops"]), forwards=int(t["forwards"]), train_s=t["train_s"])
    extra = {"totals": t, "store": result.store, "dashboard_link": result.dashboard_link,
             "parameters": result.parameters, "faults": result.faults}  # fmt: skip
    return RunResult(model=None, sink=result.sink, counters=counters, config=config, dataset=None,
                     final=result.final, extra=extra, stopped=result.stopped)  # fmt: skip
