"""A rank in a process of its own: it meets its peers through the run's actor, relayed by the Dask task
that started it, and its result, its error or its death comes back as the task's."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from distributed import get_worker

from adass.runtime.cluster.bootstrap import GroupConnectError, destroy_group, init_group
from adass.runtime.cluster.rank_process import RankProcessError, run_rank_process
from adass.runtime.cluster.rendezvous import KeyValue


def _sum_ranks(store: dist.Store, rank: int, world: int) -> dict:
    """Join a gloo group over ``store`` and all-reduce the rank: what a DDP rank does, in small."""
    init_group(store, rank, world, 30.0, host="127.0.0.1")
    try:
        total = torch.tensor([float(rank + 1)])
        dist.all_reduce(total)
        return {"total": float(total), "pid": os.getpid()}
    finally:
        destroy_group()


def _fail(store: dist.Store, code: int) -> None:
    if code:
        os._exit(code)  # dies without a word
    raise GroupConnectError("rank 1 of 2 could not connect")


def _task(fn, kwargs: dict, actor, timeout_s: float = 60.0) -> dict:
    """The Dask task: the rank's answer and the worker's own PID."""
    return {"answer": run_rank_process(fn, kwargs, actor, timeout_s), "worker_pid": os.getpid(),
            "worker": get_worker().address}  # fmt: skip


def _actor(cluster):
    return cluster.client.submit(KeyValue, workers=[cluster.workers()[0]], actor=True, pure=False).result()


def test_ranks_in_their_own_processes_meet_through_the_actor(cluster):
    actor, workers = _actor(cluster), cluster.workers()[:2]
    futures = [cluster.client.submit(_task, _sum_ranks, {"rank": r, "world": 2}, actor, workers=[w], pure=False)
               for r, w in enumerate(workers)]  # fmt: skip
    done = [f.result(timeout=120) for f in futures]
    assert [d["answer"]["total"] for d in done] == [3.0, 3.0]  # 1 + 2, over gloo
    assert all(d["answer"]["pid"] != d["worker_pid"] for d in done)  # not inside the worker
    # the workers are the same ones afterwards: nobody was lost or restarted
    assert cluster.workers()[:2] == workers


def test_a_ranks_error_is_the_tasks_and_a_dead_rank_is_named(cluster):
    actor, worker = _actor(cluster), cluster.workers()[0]
    failed = cluster.client.submit(_task, _fail, {"code": 0}, actor, workers=[worker], pure=False)
    with pytest.raises(GroupConnectError, match="rank 1 of 2 could not connect"):
        failed.result(timeout=60)
    died = cluster.client.submit(_task, _fail, {"code": 3}, actor, workers=[worker], pure=False)
    with pytest.raises(RankProcessError, match="_fail .* exited with code 3 without an answer"):
        died.result(timeout=60)


def test_a_rank_that_outlives_its_time_is_killed(cluster):
    actor, worker = _actor(cluster), cluster.workers()[0]
    # rank 0 of 2 waits for a peer that never comes; its process is stopped at 3 s, not at the group's 30
    stuck = cluster.client.submit(_task, _sum_ranks, {"rank": 0, "world": 2}, actor, 3.0, workers=[worker],
                                  pure=False)  # fmt: skip
    with pytest.raises(RankProcessError, match="_sum_ranks .* outlived 3 s"):
        stuck.result(timeout=60)
