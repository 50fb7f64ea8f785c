"""Workers that join a running job, up to ``--max-workers`` replicas: taken in at the next commit point
inside an epoch where the replicas can pause there, else as the next epoch begins.

Inside an epoch (a ring of several replicas with ``--commit-steps``): while the client waits on the
epoch it watches the cluster; once a worker it can take in is there it sets a Dask event, replica 0
reads it at the next commit point, the replicas agree to pause there (see :mod:`adass.engine.joins`),
and the next attempt, on more replicas, goes on from that commit with the rest of the epoch shared
out by where each sample now lives (:class:`JoinResume`). Between epochs (a PS, a run without
commits): the driver's stop check raises :class:`WorkersJoined` before an epoch begins and the next
attempt starts from the checkpoint just written.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from distributed import Event

from ...config import RunConfig
from ...data import Dataset
from ...data.sharding import shard_indices
from ...engine import Commit, EpochRest, RestPart, Stop, rest_commits, sampler_layout, stop_signal
from ...locations import Location
from ...registry import SpecError
from ..replica_count import check_replica_count
from .connect import ClusterHandle

__all__ = ["JoinResume", "Joins", "WorkersJoined", "pause_check"]


class WorkersJoined(Exception):
    """Workers to take in: the run goes on with ``replicas`` replicas. ``at``: the steps of epoch
    ``epoch`` (``steps`` in all) after which the replicas paused for it (0: before the epoch began,
    raised through the driver's stop check, so nothing of it ran)."""

    def __init__(self, replicas: int, epoch: int = -1, steps: int = 0, at: int = 0) -> None:
        where = f" after step {at} of epoch {epoch}" if at else ""
        super().__init__(f"workers joined: {replicas} replicas{where}")
        self.replicas, self.epoch, self.steps, self.at = replicas, epoch, steps, at


@dataclass
class JoinResume:
    """Where the replicas of the next attempt go on inside epoch ``epoch`` (``steps`` steps): each its
    commit (the old replicas' states resharded to the new shards) and its part of the epoch's rest."""

    epoch: int
    steps: int
    at: int
    parts: list[tuple[Commit, RestPart]] = field(default_factory=list)
    servers: dict[int, Commit] = field(default_factory=dict)  # none: a run with servers joins between epochs

    @property
    def step(self) -> int:
        """The global step count at the pause."""
        return self.parts[0][0].step

    def for_rank(self, rank: int) -> tuple[Commit, bool]:
        """Rank ``rank``'s commit, which holds all of its state (True: load all of it)."""
        return self.parts[rank][0], True


class Joins:
    """Whether the cluster holds workers the run can take in: more workers than its replicas and
    servers, up to ``limit`` replicas, in a layout the exchange and the data accept. Runs without
    checkpoints take no one in."""

    def __init__(self, handle: ClusterHandle, config: RunConfig, dataset: Dataset, limit: int,
                 checkpoints: Location | None) -> None:  # fmt: skip
        self.handle, self.config, self.dataset, self.limit = handle, config, dataset, limit
        self.possible = checkpoints is not None and config.cluster.workers < limit

    def target(self) -> int:
        """The replicas the run can grow to now (0: none)."""
        replicas = self.config.cluster.workers
        if not self.possible:
            return 0
        more = min(len(self.handle.workers()) - self.config.servers, self.limit)
        if more <= replicas:
            return 0
        try:
            check_replica_count(self.config.replace(workers=more), self.dataset)
        except SpecError:  # a layout the exchange or the data refuse: stay as it is
            return 0
        return more

    @property
    def mid_epoch(self) -> bool:
        """Whether the replicas can pause at a commit point for a worker that joins: a ring of
        several replicas with commits (a PS's servers keep their count; async epochs have no
        common step)."""
        family = self.config.exchange.exchange.split(":", 1)[0]
        return (self.possible and family == "ring" and self.config.cluster.workers > 1
                and self.config.cluster.commit_steps > 0)  # fmt: skip

    def watch(self, alive: Callable[[], set[str]]) -> tuple[str, Callable[[], set[str]], Callable[[], int]]:
        """For one epoch: the name of the event replica 0 reads at its commit points, ``alive``
        wrapped so that each look at the cluster also sets the event once workers can be taken
        in, and what the run grows to (0 until then)."""
        name = f"adass-join-{secrets.token_hex(8)}"
        event, grown = Event(name, client=self.handle.client), {"to": 0}

        def watching() -> set[str]:
            present = alive()
            if not grown["to"]:
                grown["to"] = self.target()
                if grown["to"]:
                    event.set()
            return present

        return name, watching, lambda: grown["to"]

    def stop_check(self, stop: Stop) -> Stop:
        """The driver's stop check, which also takes in workers as an epoch begins: before every
        epoch but an attempt's first (the checkpoint of the epoch before is then written), it raises
        :class:`WorkersJoined` where :meth:`target` finds some."""
        told = stop_signal(stop)
        if not self.possible:
            return told
        first = True

        def check() -> bool:
            nonlocal first
            if told():
                return True
            if first:  # the attempt's first epoch: it just started on the workers there are
                first = False
                return False
            more = self.target()
            if more:
                raise WorkersJoined(more)
            return False

        return check

    def resume(self, joined: WorkersJoined, commits: list[Commit], rests: list[EpochRest]) -> JoinResume:
        """The next attempt's start inside the paused epoch, from every replica's commit at the
        pause and what its plan still held."""
        config = self.config.replace(workers=joined.replicas)
        shards = shard_indices(
            self.dataset.y_train, joined.replicas, config.data.shard, seed=config.optim.seed
        )
        parts = rest_commits(commits, rests, shards, sampler_layout(config), self.dataset.n_train, joined.steps,
                             config.optim.batch_size)  # fmt: skip
        return JoinResume(joined.epoch, joined.steps, joined.at, parts)


def pause_check(name: str) -> Callable[[], bool]:
    """Whether the event ``name`` (set by the client's :meth:`Joins.watch`) is set, asked of the
    scheduler by this worker."""
    event = Event(name)
    return event.is_set
