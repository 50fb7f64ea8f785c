"""P virtual replicas in one process (``--replicas P``): threads over the in-process transport.

The same :class:`~adass.engine.loop.Engine` runs as on Dask, with an :class:`InProcAgreement` instead
of a torch.distributed group, so a run of many replicas (and PS servers) can be studied, and tested,
on one machine. The link model gives every transfer a simulated time; nothing is throttled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..data import Dataset
from ..devices import run_device
from ..engine import (
    AgreementBoard,
    Engine,
    EpochOutcome,
    LiveBatches,
    ReplicaState,
    own_shard,
    read_state,
    write_state,
)
from ..exchange import InProcHub, as_server, make_exchange

__all__ = ["ThreadsBackend", "on_threads"]


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


class ThreadsBackend:
    """``config.world`` replicas and ``config.servers`` PS server shards, each rank on a thread.

    Parameters
    ----------
    config : RunConfig
        The run; its exchange, codec and link are used as on Dask.
    dataset : Dataset
        The data every replica takes its shard of.
    run_id : str
        Label of the records.
    live : callable, optional
        Receives ``(kind, rows)`` batches of live step rows (a :class:`~adass.engine.RunStore`'s ``add``).
    """

    def __init__(self, config: RunConfig, dataset: Dataset, run_id: str = "run",
                 live: Callable[[str, list[dict]], None] | None = None) -> None:  # fmt: skip
        self.world, self.servers, self.live = config.world, config.servers, live
        timeout_s = config.cluster.timeout_s
        hub, board = (
            InProcHub(self.world + self.servers, timeout_s=timeout_s),
            AgreementBoard(self.world, timeout_s),
        )
        link = config.exchange.link or None
        device = run_device(config.cluster.device)  # every replica and server on this process's one device
        self.exchanges = [
            make_exchange(
                config.exchange.exchange,
                hub.transport(r, link, device=device),
                config.codec.codec,
                memory=config.codec.memory,
                seed=config.optim.seed,
                run=run_id,
            )  # fmt: skip
            for r in range(self.world + self.servers)
        ]
        for exchange in self.exchanges:  # ps:update=server: each shard owns its slice and its optimizer
            own_shard(exchange, config, dataset.shape, dataset.classes)
        self.engines = [
            Engine(
                ReplicaState.shard(config, dataset, r, self.world),
                board.agreement(r),
                self.exchanges[r],
                run_id=run_id,
            )  # fmt: skip
            for r in range(self.world)
        ]
        self.aborts = [hub.abort, board.abort]
        self.plans: list = []

    def plan(self, epoch: int, selection: bool) -> list[dict[str, list]]:
        self.plans = on_threads(self.world, lambda r: self.engines[r].plan(epoch), self.aborts)
        return [e.selection_columns(epoch) for e in self.engines] if selection else []

    def train(self, epoch: int, stop: Callable[[], bool]) -> EpochOutcome:
        plans = self.plans

        def work(rank: int) -> dict[str, Any]:
            if rank < self.world:
                live = LiveBatches(self.live, plans[rank].steps_of(rank)) if self.live else None
                return vars(self.engines[rank].run_epoch(plans[rank], on_step=live, selection_records=False))
            server = as_server(self.exchanges[rank])
            server.epoch = plans[0].epoch
            return {"traffic": [vars(r) for r in server.serve_epoch(plans[0].steps, plans[0].worker_steps)]}

        reports = on_threads(self.world + self.servers, work, self.aborts)
        return EpochOutcome(reports[: self.world], [row for r in reports for row in r["traffic"]])

    def evaluate(self) -> tuple[float, float]:
        return self.engines[0].evaluate()

    def save(self, folder: Path) -> None:
        for rank, engine in enumerate(self.engines):
            write_state(folder / f"rank{rank}.pt", engine.state_dict())
        for shard, server in enumerate(self.exchanges[self.world :]):
            write_state(folder / f"server{shard}.pt", server.state_dict())

    def load(self, folder: Path) -> None:
        for rank, engine in enumerate(self.engines):
            engine.load_state_dict(read_state(folder / f"rank{rank}.pt"))
        for shard, server in enumerate(self.exchanges[self.world :]):
            path = folder / f"server{shard}.pt"
            if path.exists():  # a PS whose replicas step saves no server files
                server.load_state_dict(read_state(path))
            elif server.pulls_parameters:
                raise FileNotFoundError(f"{path}: the checkpoint holds no state of server {shard}")

    def states(self) -> list[ReplicaState]:
        return [e.state for e in self.engines]
