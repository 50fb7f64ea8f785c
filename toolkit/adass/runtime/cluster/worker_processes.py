"""A Dask scheduler and workers started as separate processes by the ``dask`` command line, on one host.

What a user does by hand (``dask scheduler``, ``dask worker ADDRESS``), for tests and for ``adass bench
faults``, which kill them. Every process runs in a session of its own and is ended by its PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DaskProcesses", "dask_processes"]


@dataclass
class DaskProcesses:
    """The scheduler's address and the processes behind it (scheduler first)."""

    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)
    host: str = "127.0.0.1"
    log: Any = None

    def add_worker(self) -> subprocess.Popen:
        """Start one more worker that joins the running cluster (it is ended with the others)."""
        proc = _spawn("worker", _worker_args(self.address, self.host), self.log)
        self.workers.append(proc)
        return proc


def _worker_args(address: str, host: str) -> list[str]:
    return [address, "--nthreads", "1", "--host", host, "--no-dashboard", "--memory-limit", "0"]


def _spawn(kind: str, args: list[str], log) -> subprocess.Popen:
    command = [sys.executable, "-m", f"distributed.cli.dask_{kind}", *args]
    return subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)


def _end(proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """SIGTERM to the process's session, SIGKILL if it is still there after ``timeout_s``."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def dask_processes(folder: str | Path, workers: int, host: str = "127.0.0.1",
                   timeout_s: float = 60.0) -> Iterator[DaskProcesses]:  # fmt: skip
    """Start ``dask scheduler`` and ``workers`` single-threaded ``dask worker`` s on ``host``; end them on exit.

    Parameters
    ----------
    folder : path
        Where the scheduler file and the processes' shared log (``dask.log``) go.
    workers : int
        Workers to start (they join in the background; ``connect(address, n_workers=...)`` waits).
    host : str
        The address every process listens on.
    timeout_s : float
        How long the scheduler may take to write its address; RuntimeError past that.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    scheduler_file = folder / "scheduler.json"
    with open(folder / "dask.log", "w") as log:
        scheduler = _spawn("scheduler", ["--host", host, "--port", "0", "--dashboard-address", f"{host}:0",
                                         "--scheduler-file", str(scheduler_file)], log)  # fmt: skip
        lab = None
        try:
            deadline = time.time() + timeout_s
            while not scheduler_file.exists() and time.time() < deadline:
                time.sleep(0.1)
            if not scheduler_file.exists():
                raise RuntimeError(
                    f"dask scheduler wrote no address within {timeout_s:g} s (see {folder}/dask.log)"
                )
            address = json.loads(scheduler_file.read_text())["address"]
            lab = DaskProcesses(address, scheduler, [], host, log)
            for _ in range(workers):
                lab.add_worker()
            yield lab
        finally:
            for proc in [scheduler, *(lab.workers if lab is not None else [])]:
                _end(proc)
