"""One entry for every run: ``run(config, ...)`` picks the backend the configuration names and hands
it to the one epoch driver (:func:`adass.engine.drive`). The commands, ``compare``, ``bench``,
``reproduce`` and the dashboard call it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..data import Dataset, load_dataset
from ..engine import (
    Counters,
    RunResult,
    RunStore,
    Stop,
    chance_accuracy,
    check_resume,
    checkpoint_location,
    drive,
    reshard_checkpoint,
)
from ..metrics import EvalRecord, MemorySink, Sink
from .local import LocalBackend
from .model_memory import check_model_fits
from .replica_count import check_replica_count
from .threads import ThreadsBackend

__all__ = ["BACKENDS", "run", "train"]

#: backends of runs in this process, by ``RunConfig.backend`` (Dask's lives in :mod:`adass.runtime.cluster`)
BACKENDS = {"local": LocalBackend, "threads": ThreadsBackend}


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
    store: RunStore | None = None,
    on_ready: Callable[[Any], None] | None = None,
    handle: Any = None,
) -> RunResult:
    """Train ``config`` where it says: one model here, ``--replicas`` on threads, ``--workers`` on Dask.

    Parameters
    ----------
    config : RunConfig
        The run; ``config.backend`` says where its replicas live.
    sink : Sink, optional
        Where the records go; a MemorySink if omitted.
    progress : callable, optional
        Called with each epoch's EvalRecord.
    stop : callable or Event, optional
        Asks the run to end early: checked after every step of a run in one model, before every
        epoch where replicas must stay in lock-step.
    run_id : str
        Label of the records.
    dataset : Dataset, optional
        Use these tensors instead of loading ``config.data.data`` (Dask workers load their own).
    selection_records : bool
        Write one SelectionRecord per sample and epoch.
    checkpoint_dir : path, optional
        Run folder whose ``checkpoints/`` get one version per epoch, whatever the backend, unless
        ``--checkpoint`` names another place (a folder or a URL).
    resume : bool
        Continue from the checkpoint there (another backend or replica count may
        continue it: the replicas' states are re-sharded).
    store : RunStore, optional
        Receives live per-step rows while the run goes on.
    on_ready, handle
        Dask runs only; see :func:`adass.runtime.cluster.train_distributed`.

    Returns
    -------
    RunResult
        ``counters`` hold backprops, forwards and training seconds; ``extra`` the running
        ``totals`` and the final ``parameters`` (every replica's in this process, rank 0's on Dask),
        and on Dask ``store``, ``dashboard_link``, ``faults`` and ``data`` (how each replica got its data).

    Raises
    ------
    SpecError
        Bad input, before anything starts.
    RunFailure
        One line: a worker lost more often than ``--restarts`` allows, losses that stayed non-finite
        for ``--max-nonfinite`` steps (:class:`~adass.failures.Diverged`), an unreachable scheduler.
    """
    if dataset is not None:  # before any replica is built
        check_model_fits(config, dataset)
        check_replica_count(config, dataset)
    if config.backend == "dask":
        return _on_dask(config, sink, progress, stop, run_id, checkpoint_dir, resume, store, on_ready, handle)
    where = checkpoint_location(config, checkpoint_dir)
    checkpoint = check_resume(config, where) if resume and where is not None else None
    sink = sink if sink is not None else MemorySink()
    ds = dataset if dataset is not None else load_dataset(config.data.data, seed=config.optim.seed)
    check_replica_count(config, ds)
    backend = BACKENDS[config.backend](config, ds, run_id, live=store.add if store is not None else None)
    if checkpoint is not None:
        checkpoint = reshard_checkpoint(checkpoint, config, ds)
        if hasattr(sink, "resume"):
            sink.resume()
    driven = drive(backend, config, sink, ds.n_train, run_id=run_id, progress=progress, stop=stop,
                   selection_records=selection_records, checkpoint_dir=where, checkpoint=checkpoint,
                   chance=chance_accuracy(ds.y_test, ds.classes))  # fmt: skip
    t = driven.totals
    states = backend.states()
    return RunResult(model=states[0].model, sink=sink, counters=_counters(t), config=config, dataset=ds,
                     final=driven.final, extra={"parameters": _parameters(states), "totals": t},
                     stopped=driven.stopped, states=states)  # fmt: skip


def train(config: RunConfig, sink: Sink | None = None, progress: Callable[[EvalRecord], None] | None = None,
          dataset: Dataset | None = None, run_id: str = "run", selection_records: bool = True, stop: Stop = None,
          replicas: int = 0) -> RunResult:  # fmt: skip
    """:func:`run` in this process: one model, or ``replicas`` virtual replicas (``--replicas``) in
    place of the Dask workers ``config`` names (the notebooks' and tests' short form)."""
    if replicas:
        config = config.replace(workers=0, replicas=replicas, scheduler="", bind="")
    return run(
        config, sink, progress, stop, run_id=run_id, dataset=dataset, selection_records=selection_records
    )


def _parameters(states: list) -> list[list]:
    """Every replica's final parameters, in rank order (host copies: the models may train on)."""
    return [[p.detach().cpu().clone() for p in state.model.parameters()] for state in states]


def _counters(totals: dict[str, float]) -> Counters:
    return Counters(
        backprops=int(totals["backprops"]), forwards=int(totals["forwards"]), train_s=totals["train_s"]
    )


def _on_dask(config: RunConfig, sink, progress, stop, run_id, checkpoint_dir, resume, store, on_ready,
             handle) -> RunResult:  # fmt: skip
    from .cluster import train_distributed  # Dask is imported only for runs on it

    result = train_distributed(config, sink=sink, progress=progress, run_id=run_id, store=store,
                               checkpoint_dir=checkpoint_dir, resume=resume, on_ready=on_ready, handle=handle,
                               stop=stop)  # fmt: skip
    extra = {"totals": result.totals, "store": result.store, "dashboard_link": result.dashboard_link,
             "parameters": result.parameters, "faults": result.faults, "data": result.data}  # fmt: skip
    return RunResult(model=None, sink=result.sink, counters=_counters(result.totals), config=config, dataset=None,
                     final=result.final, extra=extra, stopped=result.stopped)  # fmt: skip
