"""Dask actors: a Replica (model, optimizer, shard, sampler, codec memory) and a PS server shard.

Waiting methods are ``async def`` and run blocking work through ``asyncio.to_thread``, so the
worker's event loop (heartbeats, events) never stalls. One actor lives on each Dask worker.
"""

from __future__ import annotations

import asyncio
import datetime
import math
import time
from pathlib import Path
from typing import Any

import psutil
import torch
import torch.distributed as dist
from distributed import get_worker

from ...config import RunConfig
from ...data import DataNotFound, Shard, read_shard
from ...devices import local_device
from ...engine import (
    Commit,
    Commits,
    Engine,
    EpochRest,
    EpochResume,
    LiveBatches,
    ReplicaState,
    RestPart,
    TorchAgreement,
    host_copy,
    own_shard,
    read_state,
    state_bytes,
    state_from_bytes,
    write_state,
)
from ...exchange import GlooTransport, as_server, make_exchange
from ...exchange.transport import is_loopback, segment_bytes_for
from ...locations import Location
from ...registry import SpecError
from .bootstrap import destroy_group, init_group
from .events import EventRelay, topic_for
from .feed import ShardOrder, keeps_in_file
from .joins import pause_check
from .rendezvous import DaskStore, prove_peers

__all__ = ["Replica", "Server"]


_SHARED = (
    "on a cluster of several machines it must be a place every worker reaches (a URL, or a folder "
    "at the same path on a shared file system), or pass --checkpoint-writer client"
)


def _anon_bytes() -> int:
    """This process's resident memory that no file backs (the code of its libraries left out)."""
    info = psutil.Process().memory_info()
    return int(info.rss - info.shared)


def _never() -> bool:
    return False


def _here() -> str:
    """This worker's address (or "this process" outside a Dask worker), for messages."""
    try:
        return f"the worker at {get_worker().address}"
    except ValueError:
        return "this process"


def _write_state(path: Location | Path, state: dict[str, Any], option: str = "--out") -> None:
    """``state`` to ``path`` atomically; a place this worker cannot write in is bad input, not a fault
    that a restart could mend."""
    try:
        write_state(path, state)
    except OSError as err:
        raise SpecError(f"{option}: {_here()} cannot write {path} "
                        f"({err.strerror or err}); {_SHARED}") from None  # fmt: skip


def _read_state(path: Location | Path, option: str = "--out") -> dict[str, Any]:
    """The state saved at ``path``; a file this worker cannot see is bad input (see ``_write_state``)."""
    try:
        return read_state(path)
    except FileNotFoundError:
        raise SpecError(f"{option}: {_here()} finds no {path}; {_SHARED}") from None


class _Member:
    """What replicas and servers share: joining the process group and building the exchange."""

    def __init__(self, config: RunConfig, rank: int, world: int, replicas: int, run_id: str) -> None:
        torch.set_num_threads(1)  # one Dask worker thread per process; keep torch from oversubscribing
        self.config = config  # checked once, by the client: it travels as the typed configuration
        self.rank, self.world, self.replicas, self.run_id = rank, world, replicas, run_id
        self.worker = get_worker()
        self.relay = EventRelay(self.worker, topic_for(run_id))
        self.exchange = None
        self.replica_group = None

    def host(self) -> str:
        return self.worker.address.split("://")[-1].rsplit(":", 1)[0]

    def _join(self, rendezvous: Any, secret: bytes, timeout_s: float) -> None:
        """Join the run's process group through its rendezvous actor; every pair proves ``secret``."""
        store = DaskStore(rendezvous, datetime.timedelta(seconds=timeout_s))
        device = local_device(self.config.cluster.device)  # the client resolved auto with every worker
        init_group(store, self.rank, self.world, timeout_s, host=self.host(), bind=self.config.cluster.bind or None,
                   secret=secret, device=device)  # fmt: skip
        # every rank takes part in creating the replicas' group, members or not
        self.replica_group = dist.new_group(ranks=list(range(self.replicas)))
        prove_peers(secret, self.rank, self.world, self.replica_group, what="the replicas' group")
        link = self.config.exchange.link or None
        # pipeline pieces between hosts, whole chunks when every peer is on this machine
        host = self.host()
        transport = GlooTransport(link=link, throttle=link is not None, segment_bytes=segment_bytes_for(host),
                                  between_hosts=not is_loopback(host), device=device)  # fmt: skip
        self.exchange = make_exchange(
            self.config.exchange.exchange, transport, self.config.codec.codec, memory=self.config.codec.memory,
            seed=self.config.optim.seed, run=self.run_id,
        )  # fmt: skip

    async def setup(self, rendezvous: Any, secret: bytes, timeout_s: float, shape: tuple[int, ...],
                    classes: int) -> bool:  # fmt: skip
        """Join the group and build the exchange (and a PS shard's parameters, from the run seed and the
        data's ``shape`` and ``classes``); return whether this member needs the whole training split
        (replicas of an asynchronous exchange hand samples to each other)."""

        def work() -> bool:
            self._join(rendezvous, secret, timeout_s)
            own_shard(self.exchange, self.config, tuple(shape), classes)  # a PS shard this rank serves
            return self.rank < self.replicas and self.replicas > 1 and not self.exchange.lockstep

        return await asyncio.to_thread(work)

    async def teardown(self) -> None:
        await asyncio.to_thread(destroy_group)

    async def sees(self, probe: str) -> bool:
        """Whether this worker finds the file ``probe`` (a path or URL) that the client wrote."""

        def work() -> bool:
            try:
                return Location(probe).exists()
            except Exception:  # noqa: BLE001 - a protocol it cannot use, credentials it lacks: it does not see it
                return False

        return await asyncio.to_thread(work)

    # -- checkpoints: this member's file, written here or by the client ------------------------
    @property
    def option(self) -> str:
        """The option that names where checkpoints go, for messages."""
        return "--checkpoint" if self.config.cluster.checkpoint else "--out"

    def file_name(self) -> str:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        raise NotImplementedError

    async def save(self, folder: str) -> None:
        """Write this member's file into ``folder`` (a path or URL this worker reaches)."""
        await asyncio.to_thread(lambda: _write_state(Location(folder) / self.file_name(), self.state_dict(),
                                                     self.option))  # fmt: skip

    async def load(self, folder: str) -> None:
        """Restore this member's file from ``folder`` (a path or URL this worker reaches)."""

        def work() -> None:
            path = Location(folder) / self.file_name()
            self.load_state_dict(
                _read_state(path, self.option) if self.needs_file() or path.exists() else None
            )

        await asyncio.to_thread(work)

    def needs_file(self) -> bool:
        """Whether a checkpoint must hold this member's file (else a missing one leaves it as it starts)."""
        return True

    async def state(self) -> bytes:
        """This member's state as the bytes of its file, for the client to write."""
        return await asyncio.to_thread(lambda: state_bytes(self.state_dict()))

    async def load_bytes(self, data: bytes | None) -> None:
        """Restore the state the client read (None: the checkpoint holds no file of this member)."""
        await asyncio.to_thread(
            lambda: self.load_state_dict(None if data is None else state_from_bytes(data))
        )


class Replica(_Member):
    """One model replica on one Dask worker; the client drives it one epoch at a time.

    Its data arrives after :meth:`setup`: :meth:`read` reads its shard from ``--data``; or the
    client sends it in pieces (:meth:`receive`) and :meth:`take` puts them together.
    """

    pieces: list[Shard]

    def __init__(self, config: RunConfig, rank: int, world: int, replicas: int, run_id: str) -> None:
        super().__init__(config, rank, world, replicas, run_id)
        self.server_commits: dict[int, Commits] = {}  # copies of server shards' last commits, by shard

    async def read(self, order: ShardOrder) -> dict[str, Any] | None:
        """Read this replica's shard as ``order`` says and build the engine; return what it holds (see
        :meth:`_hold`), or None where ``order.fallback`` and the files are not on this machine."""

        def work() -> dict[str, Any] | None:
            began, anon_before = time.perf_counter(), _anon_bytes()
            in_file = keeps_in_file(order, self.worker.memory_manager.memory_limit)
            try:
                shard = read_shard(order.spec, order.seed, order.indices, order.n_train, order.standardization,
                                   whole=order.whole, in_file=in_file)  # fmt: skip
            except DataNotFound:
                if order.fallback:
                    return None
                raise
            return self._hold(shard, "read", time.perf_counter() - began, anon_before)

        return await asyncio.to_thread(work)

    async def receive(self, piece: Shard) -> None:
        """One piece of this replica's shard, streamed by the client."""
        if not getattr(self, "pieces", None):
            self.pieces, self.first_piece_at, self.anon_before = [], time.perf_counter(), _anon_bytes()
        self.pieces.append(piece)

    async def take(self, order: ShardOrder) -> dict[str, Any]:
        """Build the engine from the pieces received; return what it holds (see :meth:`_hold`)."""

        def work() -> dict[str, Any]:
            shard = Shard.join(self.pieces)
            if order.whole:  # the pieces hold the whole training split: keep it, and take the shard's rows
                shard = Shard(order.indices, shard.x[order.indices], shard.y[order.indices], shard.x_test,
                              shard.y_test, shard.shape, shard.classes, order.n_train, shard.x, shard.y)  # fmt: skip
            self.pieces = []
            return self._hold(shard, "stream", time.perf_counter() - self.first_piece_at, self.anon_before)

        return await asyncio.to_thread(work)

    def _hold(self, shard: Shard, how: str, load_s: float, anon_before: int) -> dict[str, Any]:
        """Build the engine on ``shard``; report how the data came, in how long and what is held:
        ``data_bytes`` (its tensors), ``rss_bytes`` (the process's resident memory now) and
        ``taken_bytes``, how much its resident memory that no file backs grew from before its data
        came until the engine stood (the data, what reading it kept, and the first model's build);
        ``in_file``, whether its training rows stay in their file, and ``shard_bytes``, what its
        training rows take as float32 (held, or read a batch at a time); ``worker``, its address."""
        state = ReplicaState.held(self.config, shard, self.rank)
        self.engine = Engine(state, TorchAgreement(self.replica_group), self.exchange, run_id=self.run_id)
        if self.replicas > 1 and self.exchange.lockstep:
            # peers that hold the same parameters after every step: a lost replica costs at most the
            # steps since the last commit (see adass.engine.commits); the servers of a PS commit at
            # the same steps
            self.engine.commits = Commits(self.config.cluster.commit_steps)
        return {"rank": self.rank, "n": shard.n, "how": how, "load_s": load_s, "data_bytes": shard.nbytes,
                "rss_bytes": psutil.Process().memory_info().rss, "taken_bytes": _anon_bytes() - anon_before,
                "in_file": shard.in_file, "shard_bytes": shard.n * math.prod(shard.shape) * 4,
                "worker": self.worker.address}  # fmt: skip

    async def select(self, epoch: int, selection: bool = True) -> dict[str, Any]:
        """Choose the epoch's samples (one global ADASS budget); agree on the number of steps; with
        ``selection``, every sample's bound and kept flag as the choice saw them."""

        def work() -> dict[str, Any]:
            self.plan = self.engine.plan(epoch)
            columns = self.engine.selection_columns(epoch) if selection else {}
            return {"kept": self.plan.kept[self.rank], "steps": self.plan.steps,
                    "worker_steps": self.plan.worker_steps, "selection": columns}  # fmt: skip

        return await asyncio.to_thread(work)

    async def run_epoch(
        self, epoch: int, steps: int, worker_steps: list[int] | None = None,
        resume: tuple[Commit, bool] | None = None, pause: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Run the epoch planned by ``select`` (``steps`` of them, or this replica's own where
        ``worker_steps`` are given); live rows go out as Dask events. ``resume``: a commit of this
        epoch and whether it is this replica's own; the epoch goes on after its steps (see
        :meth:`~adass.engine.loop.Engine.recover`). ``pause``: the name of the event that, once set,
        pauses the epoch at the next commit point for workers that join; a paused epoch reports
        only ``paused_at``, the steps done (see :mod:`adass.runtime.cluster.joins`)."""
        live = LiveBatches(self.relay.send, self.plan.steps_of(self.rank))

        def work() -> dict[str, Any]:
            at = None
            if resume is not None:
                at = self.engine.recover(*resume)
                live.seen = at.at
            self.engine.pause = None  # no pause point unless workers may join
            if pause is not None:  # replica 0 asks the scheduler; the others agree with it
                self.engine.pause = pause_check(pause) if self.rank == 0 else _never
            report = self.engine.run_epoch(self.plan, live, None, False, at)
            if self.engine.paused_at:
                return {"rank": self.rank, "paused_at": self.engine.paused_at}
            return vars(report)

        return await asyncio.to_thread(work)

    async def rest(self, at: int) -> EpochRest:
        """What this replica's plan of the epoch holds after ``at`` steps (it paused there)."""
        return self.engine.rest(self.plan, at)

    async def adopt(self, epoch: int, steps: int, part: RestPart, selection: bool = True) -> dict[str, Any]:
        """Take ``part`` of the rest of an epoch other replicas began as this epoch's plan (instead of
        :meth:`select`); return what ``select`` returns."""
        self.plan = self.engine.adopt(epoch, steps, part)
        columns = self.engine.selection_columns(epoch) if selection else {}
        return {"kept": part.kept[self.rank], "steps": steps, "worker_steps": [], "selection": columns}

    async def commits(self) -> dict[str, Any]:
        """The commits this replica holds (``held``: ``(epoch, at)`` points), its global step count now
        (``step``: steps done, the one that failed not counted) and at the end of its last epochs
        (``ends``: by epoch)."""
        engine = self.engine
        return {"held": engine.commits.held(), "step": engine.state.step, "ends": dict(engine.epoch_ends)}

    async def commit(self, epoch: int, at: int) -> Commit | None:
        """The commit after ``at`` steps of ``epoch``, if this replica holds it."""
        return self.engine.commits.get(epoch, at)

    # -- copies of server shards' commits, kept for a server that is lost -------------------------
    async def keep_shard_commit(self, shard: int, commit: Commit) -> None:
        """Keep server shard ``shard``'s ``commit`` (its last two), sent by the server as it commits."""
        self.server_commits.setdefault(shard, Commits()).add(commit)

    async def shard_commits_held(self, shard: int) -> list[tuple[int, int]]:
        """The points of shard ``shard``'s commits kept here, as ``(epoch, at)`` (as its server says)."""
        kept = self.server_commits.get(shard)
        return kept.held() if kept is not None else []

    async def shard_commit(self, shard: int, epoch: int, at: int) -> Commit | None:
        """Shard ``shard``'s commit after ``at`` steps of ``epoch``, if kept here."""
        kept = self.server_commits.get(shard)
        return kept.get(epoch, at) if kept is not None else None

    async def evaluate(self) -> tuple[float, float]:
        return await asyncio.to_thread(self.engine.evaluate)

    def file_name(self) -> str:
        return f"rank{self.rank}.pt"

    def state_dict(self) -> dict[str, Any]:
        return self.engine.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if state is None:
            raise FileNotFoundError(f"the checkpoint holds no {self.file_name()}")
        self.engine.load_state_dict(state)

    async def parameters(self) -> list[torch.Tensor]:
        return [p.detach().cpu().clone() for p in self.engine.state.model.parameters()]  # for any client


class Server(_Member):
    """One Parameter Server shard on its own Dask worker (rank >= replicas); under ``ps:update=server``
    it owns its slice of the parameters and of the optimizer state, which checkpoints hold.

    A lock-step server commits at the replicas' commit points (``--commit-steps``): its state (the
    shard's parameters and optimizer state, its memory) copied into host memory, kept here and sent
    to one replica (:meth:`mirror_on`), so a lost server goes on from its last commit as a lost
    replica does.
    """

    commits: Commits | None = None
    mirror: Any = None  # the replica actor that keeps a copy of this shard's commits

    async def mirror_on(self, replica: Any) -> None:
        """Commit every ``--commit-steps`` steps and send each commit to the actor ``replica`` (where
        the exchange is lock-step and has several replicas; otherwise nothing is committed)."""
        if self.replicas > 1 and self.exchange.lockstep and self.config.cluster.commit_steps > 0:
            self.commits, self.mirror = Commits(self.config.cluster.commit_steps), replica

    # the same two questions the replica holding the copies answers (``shard`` is this server's)
    async def shard_commits_held(self, shard: int) -> list[tuple[int, int]]:
        """The points of this shard's own commits, as ``(epoch, at)``."""
        return self.commits.held() if self.commits is not None else []

    async def shard_commit(self, shard: int, epoch: int, at: int) -> Commit | None:
        """This shard's commit after ``at`` steps of ``epoch``, if it holds it."""
        return self.commits.get(epoch, at) if self.commits is not None else None

    def _commit(self, epoch: int, done: int) -> None:
        state = {"exchange": host_copy(self.exchange.state_dict()), "step": self.exchange.step}
        commit = Commit(epoch, state, EpochResume(done))
        self.commits.add(commit)
        self.mirror.keep_shard_commit(self.shard, commit).result(timeout=self.config.cluster.timeout_s)

    @property
    def shard(self) -> int:
        return self.rank - self.replicas

    def file_name(self) -> str:
        # named by shard, not rank: a resume with another replica count keeps the servers' files
        return f"server{self.shard}.pt"

    def needs_file(self) -> bool:
        """A checkpoint without server files (a PS whose replicas step) leaves the server as it starts,
        unless it owns parameters."""
        return bool(self.exchange.pulls_parameters)

    def state_dict(self) -> dict[str, Any]:
        return self.exchange.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if state is None:
            if self.needs_file():
                raise FileNotFoundError(
                    f"{self.file_name()}: the checkpoint holds no state of server {self.shard}"
                )
            return
        self.exchange.load_state_dict(state)

    async def run_epoch(
        self, epoch: int, steps: int, worker_steps: list[int] | None = None,
        resume: tuple[int, Commit | None] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Serve the epoch's steps. ``resume``: ``(at, commit)`` where the replicas go on after ``at``
        steps of it from their commits; this shard then serves the steps after ``at``, from its
        ``commit`` at that point (None: from the state it loaded, which holds no parameters)."""

        def work() -> dict[str, Any]:
            server = as_server(self.exchange)
            self.exchange.epoch = epoch
            done, commit = resume if resume is not None else (0, None)
            if commit is not None:
                self.exchange.load_state_dict(commit.state["exchange"])
                self.exchange.step = commit.step
            if self.commits is None or worker_steps:  # no commits (or an asynchronous epoch): in one go
                traffic = [vars(r) for r in server.serve_epoch(steps - done, worker_steps or ())]
                return {"rank": self.rank, "epoch": epoch, "traffic": traffic}
            traffic = []
            while done < steps:  # up to each commit point, as the replicas commit
                chunk = min(steps, (done // self.commits.every + 1) * self.commits.every) - done
                traffic += [vars(r) for r in server.serve_epoch(chunk)]
                done += chunk
                if self.commits.due(done, steps):
                    self._commit(epoch, done)
            return {"rank": self.rank, "epoch": epoch, "traffic": traffic}

        return await asyncio.to_thread(work)
