"""A run whose external scheduler dies ends in one line, within seconds, without restarting."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from adass.cluster import connect, train_distributed
from adass.config import RunConfig
from adass.failures import LostRank, RunFailure


def _spawn(*args: str, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_" + args[0], *args[1:]],
                            stdout=log, stderr=log, start_new_session=True)  # fmt: skip


def test_a_lost_scheduler_ends_the_run_with_one_line(tmp_path):
    scheduler_file = tmp_path / "scheduler.json"
    log = open(tmp_path / "dask.log", "w")
    scheduler = _spawn("scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", "127.0.0.1:0",
                       "--scheduler-file", str(scheduler_file), log=log)  # fmt: skip
    procs = [scheduler]
    try:
        deadline = time.time() + 60
        while not scheduler_file.exists() and time.time() < deadline:
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        for _ in range(2):
            procs.append(_spawn("worker", address, "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard",
                                "--memory-limit", "0", log=log))  # fmt: skip
        config = RunConfig.from_flat(data="synthetic:n=3000,d=8,classes=3,test=100", model="mlp:hidden=16",
                                     batch_size=16, epochs=50, workers=2, scheduler=address)  # fmt: skip
        killed = {}

        def kill_scheduler(record) -> None:
            if not killed:
                killed["at"] = time.time()
                threading.Timer(0.0, os.killpg, (scheduler.pid, signal.SIGKILL)).start()

        with connect(address, n_workers=2) as handle, pytest.raises(RunFailure) as caught:
            train_distributed(config, handle=handle, progress=kill_scheduler)
        assert not isinstance(caught.value, LostRank)  # no restart: a new scheduler is a new cluster
        message = str(caught.value)
        assert "scheduler" in message and len(message.splitlines()) == 1
        assert time.time() - killed["at"] < 30
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
