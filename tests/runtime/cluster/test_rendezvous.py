"""The ranks meet over the cluster's own Dask connection, and every pair proves the run's secret."""

from __future__ import annotations

import datetime
import threading
import time

import pytest
import torch.distributed as dist

from adass.runtime.cluster.rendezvous import DaskStore, KeyValue, PeerProofError, prove_peers
from adass.runtime.launch import run_processes


@pytest.fixture
def store(cluster):
    worker = cluster.workers()[0]
    actor = cluster.client.submit(KeyValue, workers=[worker], actor=True, pure=False).result()
    return DaskStore(actor, datetime.timedelta(seconds=20))


def test_the_store_keeps_what_torch_asks_of_a_store(store) -> None:
    store.set("a", "one")
    assert store.get("a") == b"one"
    assert store.check(["a"]) and not store.check(["a", "b"])
    assert store.compare_set("c", "", "first") == b"first"  # absent: set
    assert store.compare_set("c", "other", "second") == b"first"  # not as expected: unchanged
    assert store.compare_set("c", "first", "third") == b"third"
    assert store.num_keys() == 2
    assert store.delete_key("a") and not store.delete_key("a")
    with pytest.raises(dist.DistStoreError, match="waited 0.3 s for b"):
        store.wait(["b"], datetime.timedelta(seconds=0.3))


def test_counters_add_up_under_concurrent_ranks(store) -> None:
    def add() -> None:
        for _ in range(10):
            store.add("n", 1)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.add("n", 0) == 40


def test_a_get_waits_for_a_key_another_rank_sets_later(store) -> None:
    threading.Timer(0.5, store.set, ("late", b"here")).start()
    start = time.monotonic()
    assert store.get("late") == b"here"
    assert time.monotonic() - start >= 0.4


def _prove(rank: int, world: int, secrets: list[bytes]) -> str:
    try:
        prove_peers(secrets[rank], rank, world)
        return "proved"
    except PeerProofError as err:
        return str(err)


def test_a_rank_without_the_runs_secret_is_named_by_its_peers() -> None:
    told = run_processes(_prove, 3, ([b"s" * 32, b"s" * 32, b"x" * 32],), timeout_s=60)
    for rank in (0, 1):
        assert told[rank].startswith(
            f"rank {rank} of 3: the pair to rank 2 in the process group did not prove"
        )
        assert "\n" not in told[rank]
    assert "did not prove" in told[2]  # and it names its peers in turn
