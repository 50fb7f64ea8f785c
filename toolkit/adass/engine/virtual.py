"""P virtual replicas in one process: threads over the in-process transport, one global ADASS budget.

The same :class:`~adass.engine.loop.Engine` runs as on Dask, with an :class:`InProcAgreement` instead
of a torch.distributed group, so a run of many replicas (and PS servers) can be studied, and tested,
on one machine. The link model gives every transfer a simulated time; nothing is throttled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..config import RunConfig
from ..data import Dataset, load_dataset
from ..exchange import EXCHANGES, InProcHub, make_exchange
from ..metrics import EvalRecord, MemorySink, Sink
from .agreement import AgreementBoard
from .loop import Engine
from .records import epoch_eval, new_totals, write_epoch
from .replica import ReplicaState
from .result import RunResult, Stop, stop_signal
from .server import own_shard
from .step import Counters

__all__ = ["on_threads", "server_count", "simulate_run"]


def server_count(config: RunConfig) -> int:
    """Ranks the exchange needs besides the replicas (PS server shards)."""
    entry, values = EXCHANGES.resolve(config.exchange.exchange)
    return int(entry.factory.extra_ranks(**values))


def colocated_shards(config: RunConfig) -> dict[int, int]:
    """``{replica rank: shard}`` of the PS shards that replicas serve (``colocated=true``); else empty."""
    entry, values = EXCHANGES.resolve(config.exchange.exchange)
    return dict(entry.factory.colocated_shards(**values))


def on_threads(
    ranks: int, work: Callable[[int], Any], aborts: Sequence[Callable[[], None]] = ()
) -> list[Any]:
    """``work(rank)`` for every rank on its own thread; results in rank order. The first failure is
    re-raised once every thread has ended (``aborts`` wake the others instead of letting them wait)."""
    results: list[Any] = [None] * ranks
    errors: list[BaseException] = []

    def guarded(rank: int) -> None:
        try:
            results[rank] = work(rank)
        except BaseException as err:  # noqa: BLE001 - re-raised below, after the other threads stop
            errors.append(err)
            for abort in aborts:
                abort()

    threads = [threading.Thread(target=guarded, args=(r,), name=f"adass-replica-{r}") for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def simulate_run(
    config: RunConfig,
    replicas: int | None = None,
    sink: Sink | None = None,
    progress: Callable[[EvalRecord], None] | None = None,
    stop: Stop = None,
    dataset: Dataset | None = None,
    run_id: str = "run",
    timeout_s: float = 120.0,
) -> RunResult:
    """Train ``config`` with ``replicas`` virtual replicas (threads of this process).

    Parameters
    ----------
    config : RunConfig
        The run; its exchange, codec and link are used as on Dask.
    replicas : int, optional
        How many replicas (``config.cluster.workers`` if omitted); PS servers are extra threads.
    sink, progress, stop, dataset, run_id
        As for :func:`adass.run.run`; ``stop`` is checked between epochs.
    timeout_s : float
        A replica waiting longer than this for the others fails the run.

    Returns
    -------
    RunResult
        ``model`` is replica 0's; ``extra["parameters"]`` holds every replica's final parameters
        (rank order) and ``extra["totals"]`` the running totals, as on Dask.
    """
    world = int(replicas if replicas is not None else config.cluster.workers)
    if world < 1:
        raise ValueError(f"replicas={world} is not allowed; expected an integer >= 1")
    sink = sink if sink is not None else MemorySink()
    ds = dataset if dataset is not None else load_dataset(config.data.data, seed=config.optim.seed)
    servers = server_count(config)
    hub, board = InProcHub(world + servers, timeout_s=timeout_s), AgreementBoard(world, timeout_s=timeout_s)
    link = config.exchange.link or None
    exchanges = [
        make_exchange(
            config.exchange.exchange,
            hub.transport(r, link),
            config.codec.codec,
            seed=config.optim.seed,
            run=run_id,
        )  # fmt: skip
        for r in range(world + servers)
    ]
    for exchange in exchanges:  # ps:update=server: each shard owns its slice and its optimizer
        own_shard(exchange, config, ds.shape, ds.classes)
    engines = [Engine(ReplicaState.shard(config, ds, r, world), board.agreement(r), exchanges[r], run_id=run_id)
               for r in range(world)]  # fmt: skip
    aborts = [hub.abort, board.abort]
    should_stop, totals, record, stopped = stop_signal(stop), new_totals(), None, False
    for epoch in range(config.optim.epochs):
        if should_stop():
            stopped = True
            break
        start = time.perf_counter()
        plans = on_threads(world, lambda r, e=epoch: engines[r].plan(e), aborts)

        def work(rank: int, plans: list = plans) -> Any:
            if rank < world:
                return vars(engines[rank].run_epoch(plans[rank]))
            exchanges[rank].epoch = plans[0].epoch
            served = exchanges[rank].serve_epoch(plans[0].steps, plans[0].worker_steps)
            return {"traffic": [vars(r) for r in served]}

        reports = on_threads(world + servers, work, aborts)
        traffic = [row for r in reports for row in r["traffic"]]
        epoch_s = time.perf_counter() - start
        write_epoch(sink, run_id, reports[:world], traffic)
        record = epoch_eval(
            run_id, epoch, reports[:world], traffic, epoch_s, totals, engines[0].evaluate(), ds.n_train
        )
        sink.write(record)
        if progress is not None:
            progress(record)
    sink.close()
    counters = Counters(
        backprops=int(totals["backprops"]), forwards=int(totals["forwards"]), train_s=totals["train_s"]
    )
    parameters = [[p.detach().clone() for p in e.state.model.parameters()] for e in engines]
    return RunResult(model=engines[0].state.model, sink=sink, counters=counters, config=config, dataset=ds,
                     final=record, extra={"parameters": parameters, "totals": totals}, stopped=stopped)  # fmt: skip
