"""``adass.allocator``: the embedded cluster's workers keep freed memory; a cluster of your own is left
as Dask configured it."""

from __future__ import annotations

import logging
import os

import dask
import pytest
from distributed import LocalCluster

from adass.allocator import ENVIRON, dask_config, keep_freed_memory
from adass.runtime.cluster.connect import connect


def _worker_environ() -> dict[str, str | None]:
    return {key: os.environ.get(key) for key in ENVIRON}


@pytest.fixture
def unset_malloc_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``MALLOC_*`` variables here, and none left behind: a Nanny writes its pre-spawn variables
    into this process's environment, where later Nannies of this process would find them."""
    for key in ENVIRON:
        monkeypatch.setenv(key, "")  # remembers the value to restore at teardown
        monkeypatch.delenv(key)


def test_dask_config_sets_the_variables_before_a_worker_starts():
    assert dask_config() == {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in ENVIRON.items()}


def test_turned_off_it_asks_nothing_of_dask_or_glibc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ADASS_KEEP_FREED_MEMORY", "0")
    assert dask_config() == {} and keep_freed_memory() is False


def test_embedded_cluster_workers_keep_freed_memory(unset_malloc_environ: None):
    with connect(n_workers=1) as handle:
        (seen,) = handle.client.run(_worker_environ).values()
    assert seen == ENVIRON


def test_a_cluster_of_your_own_keeps_dask_s_settings(unset_malloc_environ: None):
    default = dask.config.get("distributed.nanny.pre-spawn-environ")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.CRITICAL) as cluster:  # fmt: skip
        with connect(cluster.scheduler_address, n_workers=1) as handle:
            (seen,) = handle.client.run(_worker_environ).values()
    assert seen["MALLOC_TRIM_THRESHOLD_"] == (
        None if default.get("MALLOC_TRIM_THRESHOLD_") is None else str(default["MALLOC_TRIM_THRESHOLD_"])
    )
    assert seen["MALLOC_MMAP_THRESHOLD_"] != ENVIRON["MALLOC_MMAP_THRESHOLD_"]
