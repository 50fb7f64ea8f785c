"""The client side of a distributed run: the Dask backend of the one driver, and its restarts.

The client coordinates per epoch, never per step: replicas select their samples (agreeing on one
ADASS budget and the step count), run the epoch exchanging gradients peer to peer, and report
back; :func:`adass.engine.drive` does the rest, as for every backend. Replicas get their data as
:mod:`adass.runtime.cluster.feed` says (read where they are, or streamed by the client). Every epoch
ends with a checkpoint (:mod:`adass.engine.checkpoints`) so ``resume=True`` can continue a run: the
workers write their files where ``--checkpoint`` says when they all reach it, else the client does.

All ranks are waited on together (:func:`adass.runtime.cluster.waiting.wait_all`): the first rank
that fails, or a worker that leaves, ends the epoch at once; the run then starts again from its
last checkpoint (``--restarts`` times), and ``faults`` says so: on a replacement worker when the
cluster gives one in time (a nanny restarts a killed worker process), otherwise on the workers that
remain, the checkpoint re-sharded to fewer replicas (:func:`adass.engine.checkpoints.
reshard_checkpoint`). With as many replicas as before, the failed epoch does not start over: it goes
on from the last in-memory commit the survivors hold (``--commit-steps``, :mod:`adass.engine.
commits`), so at most that many steps are done again.
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
    Commit,
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
from .joins import JoinResume, Joins, WorkersJoined
from .rendezvous import KeyValue
from .waiting import call_all, call_each, wait_all

__all__ = ["DaskBackend", "DistributedResult", "Recovery", "train_distributed"]

FAULTS_FILE = "faults.json"
_ASK_S = 15.0  # how long a survivor may take to say which commits it holds
# a replacement has twice --detect-s to join after a loss, and at least twice this: a nanny restarts
# a killed worker in a few seconds; one that comes later is taken in as a later epoch begins
_REPLACEMENT_FLOOR_S = 5.0


@dataclass
class Recovery:
    """What the replicas still answering held when epoch ``epoch`` (``steps`` steps) failed.

    Attributes
    ----------
    at : int
        The last point of the epoch every one of them holds a commit of (0: none), and of which every
        server shard's commit is held (by the server, or by the replica it sent its copies to).
    commits : dict
        Their commits at ``at``, by rank; the other ranks lost theirs.
    servers : dict
        The server shards' commits at ``at``, by shard.
    lost_at_step : int
        The global step count the furthest of them had reached (steps done).
    ends : dict
        The global step count at the end of the last epochs, by epoch.
    replicas : int
        Replicas of the failed attempt.
    """

    epoch: int
    steps: int
    replicas: int
    at: int = 0
    commits: dict[int, Commit] = field(default_factory=dict)
    servers: dict[int, Commit] = field(default_factory=dict)
    servers_n: int = 0
    lost_at_step: int = 0
    ends: dict[int, int] = field(default_factory=dict)

    def usable(self, first_epoch: int, replicas: int) -> bool:
        """Whether the next attempt can go on from the commits: it starts at the failed epoch (the
        checkpoint before it was loaded), with as many replicas (the same shards and plan), and some
        replica held a commit."""
        return bool(self.commits) and self.at > 0 and first_epoch == self.epoch and replicas == self.replicas

    def for_rank(self, rank: int) -> tuple[Commit, bool]:
        """Rank ``rank``'s commit and True; a rank that lost its own gets a peer's and False."""
        if rank in self.commits:
            return self.commits[rank], True
        return next(iter(self.commits.values())), False

    def facts(self, used: bool, first: int) -> dict[str, Any]:
        """What faults.json says of it: where the run went on (from a commit, or from the checkpoint
        of the epoch before ``first``) and how many steps it did again."""
        if used:
            resumed = next(iter(self.commits.values())).step
            return {"recovered_from": "commit", "lost_at_step": self.lost_at_step, "resumed_at_step": resumed,
                    "steps_redone": self.lost_at_step - resumed}  # fmt: skip
        facts: dict[str, Any] = {"recovered_from": "checkpoint", "lost_at_step": self.lost_at_step}
        resumed = 0 if first == 0 else self.ends.get(first - 1)
        if resumed is not None:  # the step count of that checkpoint is known
            facts.update(resumed_at_step=resumed, steps_redone=self.lost_at_step - resumed)
        return facts


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
        self.resume_from: Recovery | JoinResume | None = None  # commits the next epoch goes on from
        self.joins: Joins | None = None  # workers to take in at a commit point inside an epoch
        self.training: tuple[int, int] = (-1, 0)  # the epoch training now and its steps; (-1, 0): none

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
        # each server shard sends copies of its commits to a replica: a lost server goes on from them
        self.call_each(self.servers, "mirror_on", [(self.actors[self._mirror(s)],) for s in range(self.servers_n)],
                       what="pairing the servers with replicas")  # fmt: skip
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
        join = self.resume_from
        if isinstance(join, JoinResume) and join.epoch == epoch:  # the rest of an epoch others began
            self.chosen = self.call_each(self.actors, "adopt", [(epoch, join.steps, part, selection)
                                                                for _, part in join.parts],
                                         what=f"epoch {epoch} (its rest)")  # fmt: skip
        else:
            self.chosen = self.call(
                self.actors, "select", epoch, selection, what=f"epoch {epoch} (selection)"
            )
        return [c["selection"] for c in self.chosen] if selection else []

    def train(self, epoch: int, stop: Callable[[], bool]) -> EpochOutcome:
        steps, worker_steps = self.chosen[0]["steps"], self.chosen[0]["worker_steps"]
        resume, self.resume_from = self.resume_from, None
        if resume is not None and (resume.epoch, resume.steps) != (epoch, steps):
            resume = None  # another plan than the one the commits were taken in: the epoch from its start
        members = self.actors + self.servers
        pause, alive, grown = None, self.alive, lambda: 0
        if self.joins is not None and self.joins.mid_epoch:
            pause, alive, grown = self.joins.watch(self.alive)
        args = [(epoch, steps, worker_steps, None if resume is None else resume.for_rank(r), pause)
                for r in range(self.replicas_n)]  # fmt: skip
        args += [(epoch, steps, worker_steps, None if resume is None else (resume.at, resume.servers.get(s)))
                 for s in range(self.servers_n)]  # fmt: skip
        self.training = (epoch, steps)
        reports = call_each(members, "run_epoch", args, self.addresses[: len(members)], self.timeout_s,
                            f"epoch {epoch}", alive=alive)  # fmt: skip
        self.training = (-1, 0)
        paused = max(r.get("paused_at", 0) for r in reports[: self.replicas_n])
        if paused:  # every replica paused at this commit point: workers join there
            raise WorkersJoined(grown(), epoch, steps, paused)
        return EpochOutcome(reports[: self.replicas_n], [row for r in reports for row in r["traffic"]])

    def rest_of_epoch(self, joined: WorkersJoined) -> JoinResume:
        """After the replicas paused for workers that join: their commits at the pause and what
        their plans still held, as the next attempt's start."""
        what = f"epoch {joined.epoch} paused at step {joined.at}"
        commits = self.call(self.actors, "commit", joined.epoch, joined.at, what=what)
        rests = self.call(self.actors, "rest", joined.at, what=what)
        return self.joins.resume(joined, commits, rests)

    def survivors_commits(self) -> Recovery | None:
        """After a lost rank: ask every replica still answering which commits it holds of the epoch
        that was training, and every server shard (itself, else the replica holding its copies), and
        take the last point all of them hold (None where no replica answers; no point where the loss
        came outside an epoch's steps, in its plan or checkpoint)."""
        epoch, steps = self.training
        answers: dict[int, dict[str, Any]] = {}
        for rank in range(self.replicas_n):
            with contextlib.suppress(Exception):  # a lost worker, or a rank too busy to answer in time
                answers[rank] = self._ask(rank, "commits")
        if not answers:
            return None
        points = set.intersection(*({at for e, at in a["held"] if e == epoch} for a in answers.values()))
        holders = {shard: self._shard_holders(shard, epoch) for shard in range(self.servers_n)}
        for held in holders.values():
            points &= set().union(*held.values())
        found = Recovery(epoch, steps, self.replicas_n, at=max(points, default=0), servers_n=self.servers_n,
                         lost_at_step=max(a["step"] for a in answers.values()),
                         ends=next(iter(answers.values()))["ends"])  # fmt: skip
        for rank in answers if found.at else ():
            with contextlib.suppress(Exception):
                commit = self._ask(rank, "commit", epoch, found.at)
                if commit is not None:
                    found.commits[rank] = commit
        for shard, held in holders.items() if found.at else ():
            for rank in (r for r, have in held.items() if found.at in have):
                with contextlib.suppress(Exception):
                    commit = self._ask(rank, "shard_commit", shard, epoch, found.at)
                    if commit is not None:
                        found.servers[shard] = commit
                        break
        return found

    def _mirror(self, shard: int) -> int:
        """The replica that keeps copies of server shard ``shard``'s commits."""
        return shard % self.replicas_n

    def _shard_holders(self, shard: int, epoch: int) -> dict[int, set[int]]:
        """Who holds server shard ``shard``'s commits of ``epoch`` (the server itself, then the replica
        it sent copies to), by rank, with the points each holds; one that does not answer is left out."""
        held = {}
        for rank in (self.replicas_n + shard, self._mirror(shard)):
            with contextlib.suppress(Exception):
                held[rank] = {at for e, at in self._ask(rank, "shard_commits_held", shard) if e == epoch}
        return held

    def _ask(self, rank: int, method: str, *args: Any) -> Any:
        """``method(*args)`` of member ``rank`` alone (a replica, or a server past them), within
        ``_ASK_S`` seconds."""
        member = (self.actors + self.servers)[rank]
        return call_each([member], method, [args], [self.addresses[rank]], min(self.timeout_s, _ASK_S),
                         f"asking rank {rank} for its commits", alive=self.alive)[0]  # fmt: skip

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
        recovery: Recovery | None = None
        limit = config.cluster.max_workers or config.cluster.workers  # replicas the run may grow back to
        attempt = 0  # restarts after a loss so far (a worker taken in costs none)
        while True:
            lost: dict[str, Any] = {}
            joins = Joins(handle, config, dataset, limit, checkpoints)
            try:
                return _attempt(config, handle, run_id, store, sink, progress, checkpoints, checkpoint,
                                joins, stop, dataset, faults, recovery, lost)  # fmt: skip
            except WorkersJoined as joined:
                checkpoint = _last_checkpoint(checkpoints, checkpoint)
                faults.append({"at_unix_s": time.time(), "attempt": attempt, "failure": "", "joined": True,
                               "resumed_from_epoch": checkpoint.epoch, "workers": config.cluster.workers,
                               "workers_after": joined.replicas})  # fmt: skip
                recovery = lost.get("join")
                if recovery is not None:  # inside the epoch, from the commit the replicas paused at
                    faults[-1].update(
                        joined_at_step=recovery.step, resumed_at_step=recovery.step, steps_redone=0
                    )
                config = config.replace(workers=joined.replicas)
                _write_faults(checkpoint_dir, faults)
                continue
            except LostRank as err:
                faults.append({"at_unix_s": time.time(), "attempt": attempt, "failure": str(err),
                               "resumed_from_epoch": None, "workers": config.cluster.workers})  # fmt: skip
                if attempt == config.cluster.restarts:
                    raise RunFailure(
                        f"{err} (after {attempt} restarts; --restarts {config.cluster.restarts})"
                    ) from None
                attempt += 1
                config = _after_loss(handle, config)
                checkpoint = _last_checkpoint(checkpoints, checkpoint)
                first = checkpoint.epoch + 1 if checkpoint is not None else 0
                recovery = lost.get("recovery")
                if recovery is not None:
                    used = recovery.usable(first, config.cluster.workers)
                    faults[-1].update(recovery.facts(used, first))
                    recovery = recovery if used else None
                faults[-1]["resumed_from_epoch"] = first - 1
                faults[-1]["workers_after"] = config.cluster.workers
                _write_faults(checkpoint_dir, faults)
    finally:
        if own_handle:
            handle.close()


def _after_loss(handle: ClusterHandle, config: RunConfig) -> RunConfig:
    """Wait for the run's workers again (a nanny restarts a killed one); when none comes back in
    time, go on with the replicas the remaining workers can hold (the servers keep theirs)."""
    servers = config.servers
    world = config.cluster.workers + servers
    try:
        handle.client.wait_for_workers(world, timeout=max(config.cluster.detect_s, _REPLACEMENT_FLOOR_S) * 2)
        return config
    except Exception:  # noqa: BLE001 - dask raises TimeoutError or OSError; either way, count who is left
        have = len(handle.workers())
    fewest = config.cluster.min_workers
    if have - servers < fewest:
        raise RunFailure(
            f"a worker was lost and the cluster has {have} of the {world} workers the run needs"
            f" ({servers} servers and at least {fewest} replica{'s' if fewest > 1 else ''}; --min-workers {fewest})"
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
    checkpoint: Checkpoint | None, joins: Joins, stop: Stop, dataset: Dataset, faults: list[dict[str, Any]],
    recovery: Recovery | JoinResume | None, lost: dict[str, Any],
) -> DistributedResult:  # fmt: skip
    """Start the actors, load ``checkpoint`` (or start afresh), go on from ``recovery``'s commits in
    its epoch, train the remaining epochs; a lost rank leaves what the survivors held in ``lost``
    (``recovery``), replicas that paused for workers that join what they held (``join``)."""
    if checkpoint is not None:
        # the same checkpoint for as many replicas as this attempt has
        checkpoint = reshard_checkpoint(checkpoint, config, dataset)
    backend = DaskBackend(config, handle, run_id, store, dataset, checkpoints)
    backend.resume_from, backend.joins = recovery, joins
    try:
        backend.start()
        driven = drive(backend, config, sink, dataset.n_train, run_id=run_id, progress=progress,
                       stop=joins.stop_check(stop),
                       checkpoint_dir=checkpoints, checkpoint=checkpoint,
                       chance=chance_accuracy(dataset.y_test, dataset.classes))  # fmt: skip
        parameters = backend.parameters()
    except LostRank:
        lost["recovery"] = backend.survivors_commits()
        raise
    except WorkersJoined as joined:
        if joined.at:
            lost["join"] = backend.rest_of_epoch(joined)
        raise
    finally:
        backend.close()
    return DistributedResult(sink=sink, store=store, final=driven.final, dashboard_link=handle.dashboard_link,
                             totals=driven.totals, parameters=parameters, stopped=driven.stopped, faults=faults,
                             data=backend.data)  # fmt: skip


def _write_faults(run_dir: str | Path | None, faults: list[dict[str, Any]]) -> None:
    if run_dir is not None:
        atomic_write_text(Path(run_dir) / FAULTS_FILE, json.dumps(faults, indent=2))
