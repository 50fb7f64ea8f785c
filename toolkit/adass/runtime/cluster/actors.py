"""Dask actors: a Replica (model, optimizer, shard, sampler, codec memory) and a PS server shard.

Waiting methods are ``async def`` and run blocking work through ``asyncio.to_thread``, so the
worker's event loop (heartbeats, events) never stalls. One actor lives on each Dask worker.
"""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from distributed import get_worker

from ...config import RunConfig
from ...data import load_dataset
from ...devices import local_device
from ...engine import Engine, LiveBatches, ReplicaState, TorchAgreement, own_shard, read_state, write_state
from ...exchange import GlooTransport, as_server, make_exchange
from ...exchange.transport import is_loopback, segment_bytes_for
from ...registry import SpecError
from .bootstrap import destroy_group, init_group
from .events import EventRelay, topic_for
from .rendezvous import DaskStore, prove_peers

__all__ = ["Replica", "Server"]


_SHARED = "on a cluster of several machines it must be a folder every worker sees at the same path (a shared file system)"


def _here() -> str:
    """This worker's address (or "this process" outside a Dask worker), for messages."""
    try:
        return f"the worker at {get_worker().address}"
    except ValueError:
        return "this process"


def _write_state(path: Path, state: dict[str, Any]) -> None:
    """``state`` to ``path`` atomically; a folder this worker cannot write in is bad input, not a fault
    that a restart could mend."""
    try:
        write_state(path, state)
    except OSError as err:
        raise SpecError(f"--out: {_here()} cannot write {path} "
                        f"({err.strerror or err}); {_SHARED}") from None  # fmt: skip


def _read_state(path: Path) -> dict[str, Any]:
    """The state saved at ``path``; a file this worker cannot see is bad input (see ``_write_state``)."""
    try:
        return read_state(path)
    except FileNotFoundError:
        raise SpecError(f"--out: {_here()} finds no {path}; {_SHARED}") from None


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

    async def teardown(self) -> None:
        await asyncio.to_thread(destroy_group)


class Replica(_Member):
    """One model replica on one Dask worker; the client drives it one epoch at a time."""

    async def setup(self, rendezvous: Any, secret: bytes, timeout_s: float) -> int:
        """Join the group, load the data, build model/sampler/exchange; return the shard size."""

        def work() -> int:
            self._join(rendezvous, secret, timeout_s)
            dataset = load_dataset(self.config.data.data, seed=self.config.optim.seed)
            state = ReplicaState.shard(self.config, dataset, self.rank, self.replicas)
            own_shard(self.exchange, self.config, dataset.shape, dataset.classes)  # a colocated PS shard
            self.engine = Engine(state, TorchAgreement(self.replica_group), self.exchange, run_id=self.run_id)
            return state.n

        return await asyncio.to_thread(work)

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
        self, epoch: int, steps: int, worker_steps: list[int] | None = None
    ) -> dict[str, Any]:
        """Run the epoch planned by ``select`` (``steps`` of them, or this replica's own where
        ``worker_steps`` are given); live rows go out as Dask events."""
        live = LiveBatches(self.relay.send, self.plan.steps_of(self.rank))
        report = await asyncio.to_thread(self.engine.run_epoch, self.plan, live, None, False)
        return vars(report)

    async def evaluate(self) -> tuple[float, float]:
        return await asyncio.to_thread(self.engine.evaluate)

    async def save(self, folder: str) -> None:
        def work() -> None:
            _write_state(Path(folder) / f"rank{self.rank}.pt", self.engine.state_dict())

        await asyncio.to_thread(work)

    async def load(self, folder: str) -> None:
        def work() -> None:
            self.engine.load_state_dict(_read_state(Path(folder) / f"rank{self.rank}.pt"))

        await asyncio.to_thread(work)

    async def parameters(self) -> list[torch.Tensor]:
        return [p.detach().cpu().clone() for p in self.engine.state.model.parameters()]  # for any client


class Server(_Member):
    """One Parameter Server shard on its own Dask worker (rank >= replicas); under ``ps:update=server``
    it owns its slice of the parameters and of the optimizer state, which checkpoints hold."""

    async def setup(self, rendezvous: Any, secret: bytes, timeout_s: float) -> int:
        def work() -> None:
            self._join(rendezvous, secret, timeout_s)
            self.shard = self.rank - self.replicas
            if self.exchange.pulls_parameters:  # the initial model comes from the run seed, as on replicas
                dataset = load_dataset(self.config.data.data, seed=self.config.optim.seed)
                own_shard(self.exchange, self.config, dataset.shape, dataset.classes)

        await asyncio.to_thread(work)
        return 0

    def _path(self, folder: str) -> Path:
        # named by shard, not rank: a resume with another replica count keeps the servers' files
        return Path(folder) / f"server{self.shard}.pt"

    async def save(self, folder: str) -> None:
        def work() -> None:
            _write_state(self._path(folder), self.exchange.state_dict())

        await asyncio.to_thread(work)

    async def load(self, folder: str) -> None:
        """Restore the shard saved in ``folder``; a checkpoint without server files (a PS whose
        replicas step) leaves the server as it starts, unless it owns parameters."""

        def work() -> None:
            path = self._path(folder)
            if not path.exists():
                if self.exchange.pulls_parameters:
                    raise FileNotFoundError(f"{path}: the checkpoint holds no state of server {self.shard}")
                return
            self.exchange.load_state_dict(_read_state(path))

        await asyncio.to_thread(work)

    async def run_epoch(
        self, epoch: int, steps: int, worker_steps: list[int] | None = None
    ) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            self.exchange.epoch = epoch
            traffic = [vars(r) for r in as_server(self.exchange).serve_epoch(steps, worker_steps or ())]
            return {"rank": self.rank, "epoch": epoch, "traffic": traffic}

        return await asyncio.to_thread(work)
