"""A Dask scheduler and workers inside the lab's namespaces, started with the ``dask`` command line.

Each process is ``ip netns exec NS python -m dask ...`` (``ip netns exec`` replaces itself with the
command, so the recorded PID is the Dask process). Readiness is read from the processes' own logs:
the root namespace cannot reach the lab's addresses, by design. The lab is a cluster adass owns, so its
processes keep freed memory for reuse as the embedded cluster's do (``adass.allocator``). Each process's
start time and command line are recorded with its PID, and ``down`` signals only a process that still
matches them (:mod:`adass.netlab.identity`).

Lab hosts share this machine's file system. Folders given as ``hide`` are empty for every worker (an
empty tmpfs mounted over each, in the mount namespace that ``ip netns exec`` gives the worker, gone
when it exits), so a client's ``--out`` or a data file in them is not on the workers' "hosts", as on a
cluster whose machines share no folder. Only those folders are covered, so the Python environment
the workers run from stays visible wherever it lives.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..allocator import ENVIRON, wanted
from .identity import Seen, seen, send_signal, start_ticks
from .private import open_log, read_file
from .state import LabState, Process
from .system import LabError, warn

__all__ = ["SCHEDULER_PORT", "hiding", "signal_process", "start_cluster", "start_worker", "stop_processes"]

SCHEDULER_PORT = 8786
_READY = {"scheduler": "Scheduler at:", "worker": "Registered to:"}


def hiding(folders: Sequence[str | Path], command: list[str]) -> list[str]:
    """``command`` run with an empty tmpfs over each of ``folders`` (``sh -c 'mount ... && exec "$@"'``):
    ``exec`` keeps the PID and start time, so the recorded process is the command itself."""
    mounts = [f"mount -t tmpfs -o mode=0755 adass-hidden {shlex.quote(os.path.abspath(f))}" for f in folders]
    return ["sh", "-c", " && ".join([*mounts, 'exec "$@"']), "sh", *command]


def _in_netns(netns: str, command: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *command]


def _spawn(
    state: LabState, role: str, host: int, argv: list[str], log: Path, hide: Sequence[str | Path] = ()
) -> Process:
    command = [sys.executable, "-m", "dask", *argv]
    launch = hiding(hide, command) if hide else []
    # as in the embedded LocalCluster: no sampling profiler taking each worker's GIL 100 times a second
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}
    if wanted():  # glibc reads these at start: the workers reuse freed blocks instead of faulting in pages
        env.update(ENVIRON)
    out = open_log(log)
    try:
        proc = subprocess.Popen(_in_netns(state.host(host).netns, launch or command), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)  # fmt: skip
    finally:
        os.close(out)
    # Popen returns once ``ip`` runs; the start time stays the same when ``ip`` (and ``sh``) execute the command
    entry = Process(role, host, proc.pid, start_ticks(proc.pid) or 0, str(log), command, launch)
    state.processes.append(entry)
    state.save()  # recorded before we wait on it, so ``down`` finds it whatever happens next
    return entry


def _wait_ready(state: LabState, entries: list[Process], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = list(entries)
    while waiting:
        for entry in list(waiting):
            text = read_file(Path(entry.log)).decode(errors="replace")
            if _READY[entry.role] in text:
                waiting.remove(entry)
            elif not _alive(state, entry):
                last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "no output")
                raise LabError(f"{entry.role} on host {entry.host} exited: {last.strip()} (log: {entry.log})")
        if waiting and time.monotonic() > deadline:
            names = ", ".join(f"{e.role} on host {e.host}" for e in waiting)
            raise LabError(
                f"{names} not ready within {timeout_s:g} s (logs in {Path(waiting[0].log).parent})"
            )
        time.sleep(0.2)


def start_cluster(state: LabState, workers: int, scheduler_host: int = 0, timeout_s: float = 60.0,
                  hide: Sequence[str | Path] = ()) -> str:  # fmt: skip
    """Start ``dask scheduler`` on one lab host and ``workers`` ``dask worker``s, worker i on host i mod N.

    Workers run without a nanny and with one thread each, like the embedded LocalCluster's; the
    folders of ``hide`` are empty for them (see the module's docstring). Returns the scheduler's
    address (``tcp://10.77.X.Y:8786``), also kept in the state file.
    """
    for folder in hide:
        if not Path(folder).is_dir():
            raise LabError(f"--hide: {folder} is not a folder; expected folders the workers should not see")
    if state.processes:
        raise LabError(f"lab {state.name} already runs a cluster at {state.scheduler}; run down and up again")
    if workers < 1:
        raise LabError(f"--workers: {workers} is not allowed; expected an integer >= 1")
    logs = state.logs_dir  # created (private, like the state's) by the first log opened
    address = f"tcp://{state.host(scheduler_host).address}:{SCHEDULER_PORT}"
    state.scheduler = address
    state.save()  # also checks the state's folder before anything is written into it
    scheduler = _spawn(state, "scheduler", scheduler_host, [
        "scheduler", "--host", state.host(scheduler_host).address, "--port", str(SCHEDULER_PORT),
        "--no-dashboard", "--no-show",
    ], logs / "scheduler.log")  # fmt: skip
    _wait_ready(state, [scheduler], timeout_s)
    started = [_spawn_worker(state, i % len(state.hosts), f"w{i}", hide) for i in range(workers)]
    _wait_ready(state, started, timeout_s)
    return address


def _spawn_worker(state: LabState, host: int, name: str, hide: Sequence[str | Path]) -> Process:
    address = state.host(host).address
    return _spawn(state, "worker", host, ["worker", state.scheduler, "--host", address, "--name", name,
                                          "--nthreads", "1", "--no-nanny", "--no-dashboard"],
                  state.logs_dir / f"worker-{name}.log", hide)  # fmt: skip


def start_worker(state: LabState, host: int, name: str, timeout_s: float = 60.0,
                 hide: Sequence[str | Path] = ()) -> Process:  # fmt: skip
    """Start one more ``dask worker`` named ``name`` on lab host ``host``, joining the lab's running
    cluster (a replacement for a lost worker, or a worker that joins a running job); returns it once
    it is ready."""
    if not state.scheduler:
        raise LabError(f"lab {state.name} runs no cluster to join; start one first")
    taken = {p.log for p in state.processes}
    if str(state.logs_dir / f"worker-{name}.log") in taken:
        raise LabError(f"--name: {name!r} is taken by a worker of lab {state.name}; choose another")
    entry = _spawn_worker(state, host, name, hide)
    _wait_ready(state, [entry], timeout_s)
    return entry


def _verdict(state: LabState, entry: Process, now: Seen | None) -> str:
    """``ours`` (the recorded process, running), ``gone`` (exited), or why the PID is someone else's."""
    if now is None:
        return "gone"
    if now.started != entry.started:
        return "its start time differs from the one recorded"
    if now.zombie:  # ours, exited, not yet reaped
        return "gone"
    netns = state.hosts[entry.host].netns if 0 <= entry.host < len(state.hosts) else ""
    # before ``ip netns exec`` (and ``sh``, for folders hidden) replace themselves with the command, the
    # process is still ``ip`` (or ``sh``)
    first = entry.launch or entry.command
    if not entry.command or list(now.command) not in (entry.command, entry.launch, _in_netns(netns, first)):
        return "its command differs from the one recorded"
    return "ours"


def _alive(state: LabState, entry: Process) -> bool:
    return _verdict(state, entry, seen(entry.pid)) == "ours"


def signal_process(state: LabState, entry: Process, sig: int) -> bool:
    """Send ``sig`` to one of the lab's processes if it still is the one the lab started; return whether
    it was sent (a fault injected on purpose: a worker killed mid-run, say)."""
    return send_signal(entry.pid, sig, lambda now: _verdict(state, entry, now) == "ours")


def stop_processes(state: LabState, grace_s: float = 5.0) -> None:
    """End the lab's recorded processes by PID (SIGTERM, then SIGKILL after ``grace_s``), workers first.

    A PID is signalled only while the process holding it has the start time and command line recorded
    when the lab started it; any other is left alone with a warning line on stderr.
    """
    entries = sorted(state.processes, key=lambda e: e.role == "scheduler")
    ours = []
    for entry in entries:
        verdict = _verdict(state, entry, seen(entry.pid))
        if verdict == "ours":
            ours.append(entry)
            signal_process(state, entry, signal.SIGTERM)
        elif verdict == "gone":
            _reap(entry.pid)
        else:
            warn(f"lab {state.name}: pid {entry.pid} ({entry.role} on host {entry.host}) is not the process "
                 f"the lab started ({verdict}); left alone")  # fmt: skip
    deadline = time.monotonic() + grace_s
    for entry in ours:
        while _alive(state, entry) and time.monotonic() < deadline:
            _reap(entry.pid)
            time.sleep(0.1)
        signal_process(state, entry, signal.SIGKILL)
        _reap(entry.pid)
    state.processes = []
    state.scheduler = ""


def _reap(pid: int) -> None:
    # a child of this process (``cluster`` and ``down`` in one Python session) must be waited for
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
