"""Start a process group of local processes (spawned, loopback; gloo, or gloo beside nccl for ranks
on GPUs), run one function on every rank, and collect the results; no process outlives the call.

The ranks meet through a FileStore in a folder only this user can enter, not a TCP port any local
process could reach.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from ..allocator import keep_freed_memory

__all__ = ["free_port", "run_processes"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _plain(value: Any) -> Any:
    """Tensors to numpy arrays (they cross the process boundary by plain pickling)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _entry(fn: Callable, rank: int, world: int, store_file: str, timeout_s: float, threads: int,
           args: tuple, results: Any, backend: str) -> None:  # fmt: skip
    import torch.distributed as dist

    torch.set_num_threads(threads)
    keep_freed_memory()
    try:
        timeout = timedelta(seconds=timeout_s)
        store = dist.FileStore(store_file, world)
        store.set_timeout(timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
        results.put((rank, True, _plain(fn(rank, world, *args))))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        results.put((rank, False, traceback.format_exc()))
    finally:
        # The result reaches the parent before the group is torn down: a backend that aborts
        # the process while it ends its threads (gloo has, when a future's callback held the
        # last reference to its work) then costs nothing but the exit code.
        results.close()
        results.join_thread()
        if dist.is_initialized():
            dist.destroy_process_group()


def run_processes(
    fn: Callable, world: int, args: tuple = (), timeout_s: float = 120.0, threads: int = 1,
    backend: str = "gloo",
) -> list[Any]:  # fmt: skip
    """Run ``fn(rank, world, *args)`` in ``world`` spawned processes joined in one process group.

    Parameters
    ----------
    fn : callable
        A module-level function (it is pickled by name); its result may hold tensors, which come
        back as numpy arrays.
    world : int
        Number of processes.
    args : tuple
        Extra arguments for ``fn`` (picklable).
    timeout_s : float
        Limit for the whole run and for every collective; past it all processes are killed.
    threads : int
        Intra-op threads per process.
    backend : str
        The group's backend: ``gloo``, or ``adass.devices.group_backend("cuda")`` for ranks that
        move CUDA tensors over nccl (each rank then picks its GPU itself).

    Returns
    -------
    list
        The results by rank.

    Raises
    ------
    RuntimeError
        A rank failed (its traceback is in the message).
    TimeoutError
        Not every rank finished within ``timeout_s``.
    """
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    folder = tempfile.TemporaryDirectory(prefix="adass-group-")  # mode 0700: this user's alone
    store_file = str(Path(folder.name) / "store")
    procs = [ctx.Process(target=_entry, args=(fn, r, world, store_file, timeout_s, threads, args, results, backend),
                         daemon=True, name=f"adass-gloo-{r}") for r in range(world)]  # fmt: skip
    out: dict[int, Any] = {}
    deadline = time.monotonic() + timeout_s
    try:
        for p in procs:
            p.start()
        while len(out) < world:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{world} gloo processes did not finish within {timeout_s} s")
            try:
                rank, ok, value = results.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                dead = [p.name for r, p in enumerate(procs) if r not in out and p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"gloo processes died without a result: {dead}") from None
                continue
            if not ok:
                raise RuntimeError(f"rank {rank} failed:\n{value}")
            out[rank] = value
    finally:
        _stop(procs)
        results.close()
        folder.cleanup()
    return [out[r] for r in range(world)]


def _stop(procs: list) -> None:
    """Join, then terminate, then kill whatever is still running."""
    for p in procs:
        if p.pid is not None:
            p.join(timeout=5.0)
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(timeout=2.0)
        if p.is_alive():
            os.kill(p.pid, 9)
            p.join(timeout=2.0)
