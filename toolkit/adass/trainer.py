"""Single-process Epoch-SGD with a sample-selection policy; writes Eval/Selection/Step records.

Run it from the command line with ``adass train --data mnist5k --sampler adass:eps=0.2``, or call
``train(RunConfig.from_flat(...))``. The loop is the engine's (:mod:`adass.engine`) in a world of
one; ``train(config, replicas=P)`` runs P virtual replicas on threads of this process instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pandas as pd

from .config import RunConfig
from .data import Dataset, load_dataset
from .engine import (
    Counters,
    Engine,
    ReplicaState,
    RunResult,
    Stop,
    backprop_batch,
    evaluate,
    flat_params,
    in_order,
    lr_at,
    make_optimizer,
    optimizer_step,
    simulate_run,
    stop_signal,
)
from .metrics import EvalRecord, MemorySink, SelectionRecord, Sink, StepRecord, columns

__all__ = ["Counters", "RunResult", "backprop_batch", "evaluate", "flat_params", "lr_at", "make_optimizer",
           "optimizer_step", "train"]  # fmt: skip


def train(
    config: RunConfig,
    sink: Sink | None = None,
    progress: Callable[[EvalRecord], None] | None = None,
    dataset: Dataset | None = None,
    run_id: str = "run",
    selection_records: bool = True,
    stop: Stop = None,
    replicas: int = 0,
) -> RunResult:
    """Train one model on one process with the configured sampler.

    Parameters
    ----------
    config : RunConfig
        Data, model, sampler and optimiser settings.
    sink : Sink, optional
        Where records go (``ParquetSink`` writes them under a folder); a new MemorySink if omitted.
    progress : callable, optional
        Called with each epoch's EvalRecord.
    dataset : Dataset, optional
        Use these tensors instead of loading ``config.data.data`` (saves reloading in comparisons).
    selection_records : bool
        Write one SelectionRecord per sample and epoch.
    stop : callable or Event, optional
        Checked after every step; once it says stop, the run ends there (``result.stopped``).
    replicas : int
        0: one model on all the data. P >= 1: P virtual replicas with the configured exchange and
        codec, as :func:`adass.engine.simulate_run` (``stop`` is then checked between epochs).

    Returns
    -------
    RunResult
        ``train_s`` in records is training time only (evaluation excluded), so policies compare fairly.
    """
    if replicas:
        return simulate_run(config, replicas, sink=sink, progress=progress, stop=stop, dataset=dataset,
                            run_id=run_id)  # fmt: skip
    sink = sink if sink is not None else MemorySink()
    o = config.optim
    ds = dataset if dataset is not None else load_dataset(config.data.data, seed=o.seed)
    engine = Engine(ReplicaState.whole(config, ds), split=in_order, run_id=run_id)
    c, should_stop = engine.state.counters, stop_signal(stop)
    step_fields = columns(StepRecord)
    record, stopped = None, False

    def write_step(row: dict, traffic: list[dict]) -> None:
        sink.write(StepRecord(**{name: row[name] for name in step_fields}))

    for epoch in range(o.epochs):
        if should_stop():
            stopped = True
            break
        start = time.perf_counter()
        plan = engine.plan(epoch)
        c.train_s += time.perf_counter() - start
        if selection_records:  # as selected, before the epoch trains (a live page shows it at once)
            sink.write_frame(
                SelectionRecord, pd.DataFrame({"run": run_id, **engine.selection_columns(epoch)})
            )
        start = time.perf_counter()
        report = engine.run_epoch(plan, on_step=write_step, stop=should_stop, selection_records=False)
        c.train_s += time.perf_counter() - start
        if len(report.steps) < plan.steps:  # stopped within the epoch: no evaluation of half an epoch
            stopped = True
            break
        test_loss, test_acc = engine.evaluate()
        record = EvalRecord(
            run=run_id, epoch=epoch, train_s=c.train_s, backprops=c.backprops, forwards=c.forwards, wire_bytes=0,
            train_loss=float(sum(report.losses) / max(1, len(report.losses))), test_loss=test_loss,
            test_acc=test_acc, kept_frac=plan.kept[0] / max(1, ds.n_train),
        )  # fmt: skip
        sink.write(record)
        if progress is not None:
            progress(record)
    sink.close()
    return RunResult(model=engine.state.model, sink=sink, counters=c, config=config, dataset=ds, final=record,
                     stopped=stopped)  # fmt: skip
