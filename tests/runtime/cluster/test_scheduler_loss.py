"""A run whose external scheduler dies ends in one line, within seconds, without restarting."""

import os
import signal
import threading
import time

import pytest

from adass.config import RunConfig
from adass.failures import LostRank, RunFailure
from adass.runtime.cluster import connect, train_distributed
from adass.runtime.cluster.worker_processes import dask_processes


@pytest.mark.parametrize("noticed", [False, True], ids=["during-an-epoch", "between-epochs"])
def test_a_lost_scheduler_ends_the_run_with_one_line(tmp_path, noticed):
    """Killed while the next epoch starts, or seen gone by the client before the next call (then the
    actors refuse calls at once); either way the teardown does not wait on ranks that cannot answer."""
    with dask_processes(tmp_path, workers=2) as lab:
        address, scheduler = lab.address, lab.scheduler
        config = RunConfig.from_flat(data="synthetic:n=3000,d=8,classes=3,test=100", model="mlp:hidden=16",
                                     batch_size=16, epochs=50, workers=2, scheduler=address)  # fmt: skip
        killed = {}

        def kill_scheduler(record) -> None:
            if not killed:
                killed["at"] = time.time()
                threading.Timer(0.0, os.killpg, (scheduler.pid, signal.SIGKILL)).start()
                deadline = time.time() + 10
                while noticed and handle.client.status == "running" and time.time() < deadline:
                    time.sleep(0.05)

        with connect(address, n_workers=2) as handle, pytest.raises(RunFailure) as caught:
            train_distributed(config, handle=handle, progress=kill_scheduler)
        assert not isinstance(caught.value, LostRank)  # no restart: a new scheduler is a new cluster
        message = str(caught.value)
        assert "scheduler" in message and len(message.splitlines()) == 1
        assert time.time() - killed["at"] < 20  # the teardown alone would wait 30 s for lost ranks
