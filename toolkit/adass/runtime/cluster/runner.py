"""The client side of a distributed run: the Dask backend of the one driver, and its restarts.

The client coordinates per epoch, never per step: replicas select their samples (agreeing on one
ADASS budget and the step count), run the epoch exchanging gradients peer to peer, and report
back; :func:`adass.engine.drive` does the rest, as for every backend. Replicas get their data as
:mod:`adass.runtime.cluster.feed` says (read where they are, or streamed by the client). Every epoch
ends with a checkpoint (:mod:`adass.engine.checkpoints`) so ``resume=True`` can continue a run: the
workers write their files where ``--checkpoint`` says when they all reach it, else the client does. All ranks are waited on together (:func:`adass.runtime.cluster.waiting.wait_all`): the first
rank that fails, or a worker that leaves, ends the epoch at once; the run then starts again from its
last checkpoint (``--restarts`` times), and ``faults`` says so: on a replacement worker when the cluster
gives one in time (a nanny restarts a killed worker process), otherwise on the workers that remain,
the checkpoint re-sharded to fewer replicas (:func:`adass.engine.checkpoints.reshard_checkpoint`).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...config import RunConfig
from ...data import Dataset, absolute_paths, load_dataset
from ...engine import (
    Checkpoint,
    EpochOutcome,
    RunStore,
    Stop,
    chance_accuracy,
    check_resume,
    checkpoint_location,
    drive,
    has_checkpoint,
    read_checkpoint,
    reshard_checkpoint,
)
from ...failures import LostRank, RunFailure
from ...locations import Location
from ...metrics import EvalRecord, MemorySink, Sink, atomic_write_text
from ...registry import SpecError
from ..replica_count import check_replica_count
from .actors import Replica, Server
from .connect import ClusterHandle, connect_for
from .events import topic_for
from .feed import feed_replicas, shard_orders
from .gpus import device_on_workers
from .rendezvous import KeyValue
from .waiting import call_all, call_each, wait_all

__all__ = ["DaskBackend", "DistributedResult", "train_distributed"]

FAULTS_FILE = "faults.json"


@dataclass
class DistributedResult:
    """A finished distributed run: records, live store, totals, the final evaluation and any faults met."""

    sink: Sink
    store: RunStore
    final: EvalRecord | None
    dashboard_link: str = ""
    totals: dict[str, float] = field(default_factory=dict)
    parameters: list | None = None
    stopped: bool = False
    faults: list[dict[str, Any]] = field(default_factory=list)
    data: list[dict[str, Any]] = field(default_factory=list)


class DaskBackend:
    """One attempt's actors on Dask workers (a backend of :func:`adass.engine.drive`); ``close``
    always tears everything down.

    Parameters
    ----------
    dataset : Dataset
        The data as the client loaded it: the shards are drawn from it, and streamed from it where
        the replicas do not read their own.
    checkpoints : Location, optional
        Where the run's checkpoints go (to decide who writes them).
    """

    def __init__(self, config: RunConfig, handle: ClusterHandle, run_id: str, store: RunStore, dataset: Dataset,
                 checkpoints: Location | None = None) -> None:  # fmt: skip
        self.config, self.handle, self.run_id, self.store = config, handle, run_id, store
        self.dataset, self.checkpoints = dataset, checkpoints
        self.data: list[dict[str, Any]] = []  # how each replica got its data (feed_replicas' reports)
        self.writer = "workers"
        self.replicas_n, self.servers_n = config.cluster.workers, config.servers
        self.timeout_s = config.cluster.timeout_s
        self.actors: list[Any] = []
        self.servers: list[Any] = []
        self.futures: list[Any] = []
        self.addresses: list[str] = []
        self.chosen: list[dict[str, Any]] = []

    def alive(self) -> set[str]:
        return set(self.handle.workers())

    def scheduler_alive(self) -> set[str]:
        """The run's workers while the scheduler answers (RunFailure once it is gone); for the teardown,
        which must not wait on ranks when nothing can come back, but goes on past a worker that left."""
        self.handle.workers()
        return set(self.addresses)

    def wait(self, futures: list, what: str) -> list:
        return wait_all(futures, self.addresses, self.timeout_s, what, alive=self.alive)

    def call(self, members: list, method: str, *args: Any, what: str) -> list:
        """``method(*args)`` on each of ``members`` (ranks 0, 1, ... in order), all waited on together."""
        return call_all(members, method, args, self.addresses, self.timeout_s, what, alive=self.alive)

    def call_each(self, members: list, method: str, args: list, what: str) -> list:
        """``method(*args[i])`` on ``members[i]``, all waited on together."""
        ranks = [self.actors.index(m) if m in self.actors else len(self.actors) + self.servers.index(m)
                 for m in members]  # fmt: skip
        return call_each(members, method, args, [self.addresses[r] for r in ranks], self.timeout_s, what,
                         alive=self.alive)  # fmt: skip

    def start(self) -> None:
        client, world = self.handle.client, self.replicas_n + self.servers_n
        addresses = self.handle.workers()
        if len(addresses) < world:
            raise SpecError(f"--workers: {self.replicas_n} replicas + {self.servers_n} servers need {world} "
                            f"Dask workers; the cluster has {len(addresses)}")  # fmt: skip
        self.addresses = addresses[:world]
        client.subscribe_topic(topic_for(self.run_id), self.store.handle)
        # relative paths in --data would be read from each worker's own working directory
        config = self.config.replace(data=absolute_paths(self.config.data.data))
        for rank, address in enumerate(self.addresses):
            kind = Replica if rank < self.replicas_n else Server
            future = client.submit(kind, config, rank, world, self.replicas_n, self.run_id,
                                   workers=[address], allow_other_workers=False, actor=True, pure=False)  # fmt: skip
            self.futures.append(future)
        # the rendezvous lives on rank 0's worker and is reached over Dask: no port opened for it
        rendezvous = client.submit(KeyValue, workers=[self.addresses[0]], allow_other_workers=False, actor=True,
                                   pure=False)  # fmt: skip
        self.futures.append(rendezvous)
        *members, store = wait_all(self.futures, self.addresses + self.addresses[:1], self.timeout_s,
                                   "starting the actors", alive=self.alive)  # fmt: skip
        self.actors, self.servers = members[: self.replicas_n], members[self.replicas_n :]
        secret = secrets.token_bytes(32)  # this run's; each pair proves it once connected
        whole = self.call(members, "setup", store, secret, self.timeout_s, tuple(self.dataset.shape),
                          self.dataset.classes, what="joining the process group")  # fmt: skip
        orders = shard_orders(self.config, config.data.data, self.dataset, whole[: self.replicas_n])
        self.data = feed_replicas(
            self.call_each, self.actors, orders, self.dataset, config.data.data_to_workers
        )
        self.writer = self._writer()

    def _writer(self) -> str:
        """Who writes the checkpoints: as ``--checkpoint-writer`` says; ``auto``: the workers where every
        one of them finds a file the client put there, else the client (a place only it reaches)."""
        how = self.config.cluster.checkpoint_writer
        if how != "auto" or self.checkpoints is None:
            return "workers" if how == "auto" else how
        probe = self.checkpoints / f".adass-probe-{secrets.token_hex(8)}"
        try:
            self.checkpoints.make_dirs()
            probe.write_bytes(b"")
        except OSError:  # the client cannot write there: a place of the workers' own
            return "workers"
        try:
            seen = self.call(self.actors + self.servers, "sees", str(probe), what="looking for --checkpoint")
        finally:
            probe.remove()
        return "workers" if all(seen) else "client"

    # -- the driver's backend ---------------------------------------------------------------
    def plan(self, epoch: int, selection: bool) -> list[dict[str, list]]:
        self.chosen = self.call(self.actors, "select", epoch, selection, what=f"epoch {epoch} (selection)")
        return [c["selection"] for c in self.chosen] if selection else []

    def train(self, epoch: int, stop: Callable[[], bool]) -> EpochOutcome:
        steps, worker_steps = self.chosen[0]["steps"], self.chosen[0]["worker_steps"]
        reports = self.call(self.actors + self.servers, "run_epoch", epoch, steps, worker_steps,
                            what=f"epoch {epoch}")  # fmt: skip
        return EpochOutcome(reports[: self.replicas_n], [row for r in reports for row in r["traffic"]])

    def evaluate(self) -> tuple[float, float]:
        return self.call(self.actors[:1], "evaluate", what="evaluation")[0]

    def _file_names(self) -> list[str]:
        return [f"rank{r}.pt" for r in range(self.replicas_n)] + [
            f"server{s}.pt" for s in range(self.servers_n)
        ]

    def save(self, folder: Path | Location) -> None:
        members = self.actors + self.servers
        if self.writer == "workers":
            self.call(members, "save", str(folder), what=f"checkpoint {folder.name}")
            return
        states = self.call(members, "state", what=f"checkpoint {folder.name}")
        for name, data in zip(self._file_names(), states, strict=True):
            Location.of(folder / name).write_bytes(data)

    def load(self, folder: Path | Location) -> None:
        members = self.actors + self.servers
        if self.writer == "workers":
            self.call(members, "load", str(folder), what="loading the checkpoint")
            return
        files = [Location.of(folder / name) for name in self._file_names()]
        states = [(f.read_bytes() if f.exists() else None,) for f in files]
        self.call_each(members, "load_bytes", states, what="loading the checkpoint")

    def parameters(self) -> list:
        return self.call(self.actors[:1], "parameters", what="reading the parameters")[0]

    def close(self) -> None:
        if self.actors or self.servers:
            futures, addresses = [], []
            for member, address in zip(self.actors + self.servers, self.addresses, strict=False):
                with contextlib.suppress(Exception):  # a member whose worker is gone refuses the call
                    futures.append(member.teardown())
                    addresses.append(address)
            with contextlib.suppress(Exception):
                wait_all(futures, addresses, 30, "teardown", alive=self.scheduler_alive)
        with contextlib.suppress(Exception):
            self.handle.client.unsubscribe_topic(topic_for(self.run_id))
        self.actors, self.servers, self.futures = [], [], []


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
        Run folder whose ``checkpoints/`` get one version per epoch (see :mod:`adass.engine.checkpoints`),
        unless ``--checkpoint`` names another place; with neither, a run that loses a worker restarts
        from its first epoch.
    resume : bool
        Continue from the run's checkpoint (checked before the cluster starts).
    handle : ClusterHandle, optional
        An open cluster to use (it is left open); otherwise one is connected and closed here.
    stop : callable or Event, optional
        Checked before every epoch (replicas run an epoch in lock-step); once it says stop, the run
        ends there with ``stopped`` set.

    Raises
    ------
    SpecError
        Bad input (too few workers, a resume that would not continue the same run).
    RunFailure
        One line: a worker lost more often than ``--restarts`` allows, or numbers that stayed non-finite.
    """
    if config.cluster.workers < 1:
        raise SpecError("--workers: a distributed run needs 1 or more workers")
    checkpoint = None
    if checkpoint_dir is not None:  # the run's records (faults.json) go there
        checkpoint_dir = Path(checkpoint_dir).expanduser().absolute()
    checkpoints = checkpoint_location(config, checkpoint_dir)
    if resume and checkpoints is not None:
        checkpoint = check_resume(config, checkpoints)  # before any cluster starts
    sink = sink if sink is not None else MemorySink()
    store = store if store is not None else RunStore()
    dataset = load_dataset(config.data.data, seed=config.optim.seed)  # fail here, not on the workers
    check_replica_count(config, dataset)
    own_handle = handle is None
    world = config.cluster.workers + config.servers
    handle = handle or connect_for(config, world)
    faults: list[dict[str, Any]] = []
    try:
        # --device auto: CUDA where each of the run's workers has a GPU; the actors get it resolved
        config = device_on_workers(config, handle.client, handle.workers()[:world])
        if on_ready is not None:
            on_ready(handle)
        if checkpoint is not None and hasattr(sink, "resume"):
            sink.resume()
        for attempt in range(config.cluster.restarts + 1):
            try:
                return _attempt(config, handle, run_id, store, sink, progress, checkpoints, checkpoint,
                                stop, dataset, faults)  # fmt: skip
            except LostRank as err:
                faults.append({"at_unix_s": time.time(), "attempt": attempt, "failure": str(err),
                               "resumed_from_epoch": None, "workers": config.cluster.workers})  # fmt: skip
                if attempt == config.cluster.restarts:
                    raise RunFailure(
                        f"{err} (after {attempt} restarts; --restarts {config.cluster.restarts})"
                    ) from None
                config = _after_loss(handle, config)
                checkpoint = _last_checkpoint(checkpoints, checkpoint)
                faults[-1]["resumed_from_epoch"] = checkpoint.epoch if checkpoint is not None else -1
                faults[-1]["workers_after"] = config.cluster.workers
                _write_faults(checkpoint_dir, faults)
        raise AssertionError("unreachable")  # the loop returns or raises
    finally:
        if own_handle:
            handle.close()


def _after_loss(handle: ClusterHandle, config: RunConfig) -> RunConfig:
    """Wait for the run's workers again (a nanny restarts a killed one); when none comes back in
    time, go on with the replicas the remaining workers can hold (the servers keep theirs)."""
    servers = config.servers
    world = config.cluster.workers + servers
    try:
        handle.client.wait_for_workers(world, timeout=max(config.cluster.detect_s, 10.0) * 2)
        return config
    except Exception:  # noqa: BLE001 - dask raises TimeoutError or OSError; either way, count who is left
        have = len(handle.workers())
    if have - servers < 1:
        raise RunFailure(
            f"a worker was lost and the cluster has {have} of the {world} workers the run needs"
            f" ({servers} servers and at least 1 replica)"
        ) from None
    try:
        return config.replace(workers=have - servers)
    except SpecError as err:  # colocated PS shards live in replicas: too few left to hold them all
        raise RunFailure(f"a worker was lost and {have - servers} replicas remain: {err}") from None


def _last_checkpoint(checkpoints: Location | None, before: Checkpoint | None) -> Checkpoint | None:
    """The checkpoint to start again from: the run's last one, else the one it started from."""
    if checkpoints is None or not has_checkpoint(checkpoints):
        return before
    return read_checkpoint(checkpoints, saved_ranks=True)


def _attempt(
    config: RunConfig, handle: ClusterHandle, run_id: str, store: RunStore, sink: Sink,
    progress: Callable[[EvalRecord], None] | None, checkpoints: Location | None,
    checkpoint: Checkpoint | None, stop: Stop, dataset: Dataset, faults: list[dict[str, Any]],
) -> DistributedResult:  # fmt: skip
    """Start the actors, load ``checkpoint`` (or start afresh), train the remaining epochs."""
    if checkpoint is not None:
        # the same checkpoint for as many replicas as this attempt has
        checkpoint = reshard_checkpoint(checkpoint, config, dataset)
    backend = DaskBackend(config, handle, run_id, store, dataset, checkpoints)
    try:
        backend.start()
        driven = drive(backend, config, sink, dataset.n_train, run_id=run_id, progress=progress, stop=stop,
                       checkpoint_dir=checkpoints, checkpoint=checkpoint,
                       chance=chance_accuracy(dataset.y_test, dataset.classes))  # fmt: skip
        parameters = backend.parameters()
    finally:
        backend.close()
    return DistributedResult(sink=sink, store=store, final=driven.final, dashboard_link=handle.dashboard_link,
                             totals=driven.totals, parameters=parameters, stopped=driven.stopped, faults=faults,
                             data=backend.data)  # fmt: skip


def _write_faults(run_dir: str | Path | None, faults: list[dict[str, Any]]) -> None:
    if run_dir is not None:
        atomic_write_text(Path(run_dir) / FAULTS_FILE, json.dumps(faults, indent=2))
