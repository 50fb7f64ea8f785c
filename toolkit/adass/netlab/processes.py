"""A Dask scheduler and workers inside the lab's namespaces, started with the ``dask`` command line.

Each process is ``ip netns exec NS python -m dask ...`` (``ip netns exec`` replaces itself with the
command, so the recorded PID is the Dask process). Readiness is read from the processes' own logs:
the root namespace cannot reach the lab's addresses, by design. The lab is a cluster adass owns, so its
processes keep freed memory for reuse as the embedded cluster's do (``adass.allocator``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ..allocator import ENVIRON, wanted
from .state import LabState, Process
from .system import LabError

__all__ = ["SCHEDULER_PORT", "start_cluster", "stop_processes"]

SCHEDULER_PORT = 8786
_READY = {"scheduler": "Scheduler at:", "worker": "Registered to:"}


def _spawn(state: LabState, role: str, host: int, argv: list[str], log: Path) -> Process:
    command = ["ip", "netns", "exec", state.host(host).netns, sys.executable, "-m", "dask", *argv]
    # as in the embedded LocalCluster: no sampling profiler taking each worker's GIL 100 times a second
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}
    if wanted():  # glibc reads these at start: the workers reuse freed blocks instead of faulting in pages
        env.update(ENVIRON)
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)  # fmt: skip
    entry = Process(role, host, proc.pid, psutil.Process(proc.pid).create_time(), str(log))
    state.processes.append(entry)
    state.save()  # recorded before we wait on it, so ``down`` finds it whatever happens next
    return entry


def _wait_ready(entries: list[Process], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = list(entries)
    while waiting:
        for entry in list(waiting):
            text = Path(entry.log).read_text(errors="replace")
            if _READY[entry.role] in text:
                waiting.remove(entry)
            elif not _alive(entry):
                last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "no output")
                raise LabError(f"{entry.role} on host {entry.host} exited: {last.strip()} (log: {entry.log})")
        if waiting and time.monotonic() > deadline:
            names = ", ".join(f"{e.role} on host {e.host}" for e in waiting)
            raise LabError(
                f"{names} not ready within {timeout_s:g} s (logs in {Path(waiting[0].log).parent})"
            )
        time.sleep(0.2)


def start_cluster(state: LabState, workers: int, scheduler_host: int = 0, timeout_s: float = 60.0) -> str:
    """Start ``dask scheduler`` on one lab host and ``workers`` ``dask worker``s, worker i on host i mod N.

    Workers run without a nanny and with one thread each, like the embedded LocalCluster's. Returns the
    scheduler's address (``tcp://10.77.X.Y:8786``), also kept in the state file.
    """
    if state.processes:
        raise LabError(f"lab {state.name} already runs a cluster at {state.scheduler}; run down and up again")
    if workers < 1:
        raise LabError(f"--workers: {workers} is not allowed; expected an integer >= 1")
    logs = state.logs_dir
    logs.mkdir(parents=True, exist_ok=True)
    address = f"tcp://{state.host(scheduler_host).address}:{SCHEDULER_PORT}"
    state.scheduler = address
    scheduler = _spawn(state, "scheduler", scheduler_host, [
        "scheduler", "--host", state.host(scheduler_host).address, "--port", str(SCHEDULER_PORT),
        "--no-dashboard", "--no-show",
    ], logs / "scheduler.log")  # fmt: skip
    _wait_ready([scheduler], timeout_s)
    started = []
    for i in range(workers):
        host = state.hosts[i % len(state.hosts)]
        started.append(_spawn(state, "worker", host.index, [
            "worker", address, "--host", host.address, "--name", f"w{i}", "--nthreads", "1", "--no-nanny",
            "--no-dashboard",
        ], logs / f"worker{i}.log"))  # fmt: skip
    _wait_ready(started, timeout_s)
    return address


def _alive(entry: Process) -> bool:
    try:
        proc = psutil.Process(entry.pid)
        return abs(proc.create_time() - entry.started) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stop_processes(state: LabState, grace_s: float = 5.0) -> None:
    """End the lab's recorded processes by PID (SIGTERM, then SIGKILL after ``grace_s``), workers first."""
    entries = sorted(state.processes, key=lambda e: e.role == "scheduler")
    for entry in entries:
        if _alive(entry):
            os.kill(entry.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for entry in entries:
        while _alive(entry) and time.monotonic() < deadline:
            _reap(entry.pid)
            time.sleep(0.1)
        if _alive(entry):
            os.kill(entry.pid, signal.SIGKILL)
        _reap(entry.pid)
    state.processes = []
    state.scheduler = ""


def _reap(pid: int) -> None:
    # a child of this process (``cluster`` and ``down`` in one Python session) must be waited for
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
