"""The client side of a distributed run: start actors, drive them one epoch at a time, collect records.

The client coordinates per epoch, never per step: replicas select their samples (agreeing on one
ADASS budget and the step count), run the epoch exchanging gradients peer to peer, and report
back. Every epoch ends with a checkpoint (atomic files) so ``resume=True`` can continue a run.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..data import load_dataset
from ..engine import Stop, epoch_eval, new_totals, server_count, stop_signal, write_epoch
from ..metrics import EvalRecord, MemorySink, Sink, atomic_write_text
from ..registry import SpecError
from .actors import Replica, Server
from .connect import ClusterHandle, connect
from .events import RunStore, topic_for

__all__ = ["DistributedResult", "read_checkpoint_state", "server_count", "train_distributed"]


@dataclass
class DistributedResult:
    """A finished distributed run: records, live store, totals and the final evaluation."""

    sink: Sink
    store: RunStore
    final: EvalRecord | None
    dashboard_link: str = ""
    totals: dict[str, float] = field(default_factory=dict)
    parameters: list | None = None
    stopped: bool = False


def _wait(futures: list, timeout_s: float) -> list:
    return [f.result(timeout=timeout_s) for f in futures]


class _Run:
    """One run's actors and bookkeeping; ``close`` always tears everything down."""

    def __init__(self, config: RunConfig, handle: ClusterHandle, run_id: str, store: RunStore) -> None:
        self.config, self.handle, self.run_id, self.store = config, handle, run_id, store
        self.replicas_n, self.servers_n = config.cluster.workers, server_count(config)
        self.timeout_s = config.cluster.timeout_s
        self.actors: list[Any] = []
        self.servers: list[Any] = []
        self.futures: list[Any] = []

    def start(self) -> None:
        client, world = self.handle.client, self.replicas_n + self.servers_n
        addresses = self.handle.workers()
        if len(addresses) < world:
            raise SpecError(f"--workers: {self.replicas_n} replicas + {self.servers_n} servers need {world} "
                            f"Dask workers; the cluster has {len(addresses)}")  # fmt: skip
        client.subscribe_topic(topic_for(self.run_id), self.store.handle)
        config = self.config.to_dict()
        for rank, address in enumerate(addresses[:world]):
            kind = Replica if rank < self.replicas_n else Server
            future = client.submit(kind, config, rank, world, self.replicas_n, self.run_id,
                                   workers=[address], allow_other_workers=False, actor=True, pure=False)  # fmt: skip
            self.futures.append(future)
        members = [f.result(timeout=self.timeout_s) for f in self.futures]
        self.actors, self.servers = members[: self.replicas_n], members[self.replicas_n :]
        first = self.actors[0]
        master, port = first.host().result(), first.free_port().result()
        # the ranks' own connect timeout must fire first: its one-line GroupConnectError names the
        # ranks and addresses, where the client's own timeout could only say that setup took too long
        _wait([m.setup(master, port, self.timeout_s) for m in members], self.timeout_s + 30)

    def epoch(self, epoch: int) -> tuple[list[dict], list[dict], float]:
        start = time.perf_counter()
        chosen = _wait([a.select(epoch) for a in self.actors], self.timeout_s)
        steps = chosen[0]["steps"]
        jobs = [m.run_epoch(epoch, steps) for m in self.actors + self.servers]
        reports = _wait(jobs, self.timeout_s)
        return reports[: self.replicas_n], reports[self.replicas_n :], time.perf_counter() - start

    def close(self) -> None:
        if self.actors or self.servers:
            with contextlib.suppress(Exception):
                _wait([m.teardown() for m in self.actors + self.servers], 30)
        with contextlib.suppress(Exception):
            self.handle.client.unsubscribe_topic(topic_for(self.run_id))
        self.actors, self.servers, self.futures = [], [], []


def read_checkpoint_state(run_dir: str | Path) -> dict[str, Any]:
    """``checkpoints/state.json`` of a run folder: the last finished epoch and the running totals."""
    path = Path(run_dir) / "checkpoints" / "state.json"
    if not path.exists():
        raise SpecError(f"--resume: {str(run_dir)!r} has no checkpoint ({path.name} missing)")
    return json.loads(path.read_text())


def train_distributed(
    config: RunConfig,
    sink: Sink | None = None,
    progress: Callable[[EvalRecord], None] | None = None,
    run_id: str = "run",
    store: RunStore | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    on_ready: Callable[[ClusterHandle], None] | None = None,
    handle: ClusterHandle | None = None,
    stop: Stop = None,
) -> DistributedResult:
    """Train ``config`` on ``config.cluster.workers`` Dask workers; return the records.

    Parameters
    ----------
    sink : Sink, optional
        Where the records go (``ParquetSink`` for files); a MemorySink if omitted.
    progress : callable, optional
        Called with each epoch's EvalRecord.
    store : RunStore, optional
        Receives live per-step records through Dask events while the run goes on.
    checkpoint_dir : path, optional
        Folder for per-epoch checkpoints (``checkpoints/rank<r>.pt``, ``checkpoints/state.json``).
    resume : bool
        Continue from the checkpoint in ``checkpoint_dir``.
    handle : ClusterHandle, optional
        An open cluster to use (it is left open); otherwise one is connected and closed here.
    stop : callable or Event, optional
        Checked before every epoch (replicas run an epoch in lock-step); once it says stop, the run
        ends there with ``stopped`` set.
    """
    if config.cluster.workers < 1:
        raise SpecError("--workers: a distributed run needs 1 or more workers")
    sink = sink if sink is not None else MemorySink()
    store = store if store is not None else RunStore()
    dataset = load_dataset(config.data.data, seed=config.optim.seed)  # fail here, not on the workers
    own_handle = handle is None
    world = config.cluster.workers + server_count(config)
    handle = handle or connect(config.cluster.scheduler or None, n_workers=world)
    run = _Run(config, handle, run_id, store)
    folder = Path(checkpoint_dir) / "checkpoints" if checkpoint_dir is not None else None
    totals, should_stop, stopped = new_totals(), stop_signal(stop), False
    record, first_epoch = None, 0
    try:
        if on_ready is not None:
            on_ready(handle)
        run.start()
        if resume and folder is not None:
            state = read_checkpoint_state(checkpoint_dir)
            first_epoch, totals = int(state["epoch"]) + 1, state["totals"]
            if hasattr(sink, "resume"):
                sink.resume()
            _wait([a.load(str(folder)) for a in run.actors], run.timeout_s)
        for epoch in range(first_epoch, config.optim.epochs):
            if should_stop():
                stopped = True
                break
            reports, server_reports, epoch_s = run.epoch(epoch)
            test = run.actors[0].evaluate().result(timeout=run.timeout_s)
            traffic = [row for r in reports + server_reports for row in r["traffic"]]
            write_epoch(sink, run_id, reports, traffic)
            record = epoch_eval(run_id, epoch, reports, traffic, epoch_s, totals, test, dataset.n_train)
            sink.write(record)
            if folder is not None:
                _checkpoint(run, folder, epoch, totals, sink)
            if progress is not None:
                progress(record)
        parameters = run.actors[0].parameters().result(timeout=run.timeout_s)
    finally:
        run.close()
        if own_handle:
            handle.close()
    sink.close()
    return DistributedResult(sink=sink, store=store, final=record, dashboard_link=handle.dashboard_link,
                             totals=totals, parameters=parameters, stopped=stopped)  # fmt: skip


def _checkpoint(run: _Run, folder: Path, epoch: int, totals: dict[str, float], sink: Sink) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _wait([a.save(str(folder)) for a in run.actors], run.timeout_s)
    if hasattr(sink, "flush"):
        sink.flush()
    atomic_write_text(folder / "state.json", json.dumps({"epoch": epoch, "totals": totals}))

