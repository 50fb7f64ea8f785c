"""A torch.distributed rank in a process of its own, started by a Dask task that waits on it.

A rank that trains inside a Dask worker shares the worker's GIL with the worker's event loop, which
sends its heartbeats: a backend whose threads take the GIL (gloo running a communication hook's Python
callbacks, or tearing down its threads while a callback still holds a reference) can keep the loop
from running until the scheduler counts the worker as lost. Here the Dask task starts a fresh Python
(``sys.executable``, importing from the worker's own paths), hands it the function and its arguments
over a pipe, and then only relays: the child's rendezvous calls go to the run's
:class:`~adass.runtime.cluster.rendezvous.KeyValue` actor over the worker's own Dask connection (no
port is opened for it), and the child's result or error comes back as the task's. The worker thread
waits on the pipe without the GIL; a child that outlives its time is killed.
"""

from __future__ import annotations

import contextlib
import datetime
import pickle
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe
from typing import Any

import torch.distributed as dist

from .rendezvous import DaskStore

__all__ = ["RankProcessError", "RelayedStore", "run_rank_process"]


class RankProcessError(RuntimeError):
    """The rank's process failed without an error of its own, died, or outlived its time (one line)."""


class RelayedStore(DaskStore):
    """A :class:`DaskStore` in the rank's process: each call travels over the pipe to the Dask task that
    started it, which makes it on the actor and sends back the answer.

    Parameters
    ----------
    conn : Connection
        The child's end of the pipe.
    timeout : timedelta
        How long ``get`` and ``wait`` wait for keys that are not there yet.
    """

    def __init__(self, conn: Connection, timeout: datetime.timedelta) -> None:
        super().__init__(None, timeout)
        self.conn = conn
        self.lock = threading.Lock()  # one call in flight: the answers come back in order

    def _call(self, method: str, *args: Any) -> Any:
        with self.lock:
            self.conn.send(("call", method, args))
            ok, value = self.conn.recv()
        if not ok:
            raise dist.DistStoreError(value)
        return value


def run_rank_process(fn: Callable[..., Any], kwargs: dict[str, Any], actor: Any, timeout_s: float) -> Any:
    """On a Dask worker: ``fn(store=..., **kwargs)`` in a new process, its store relayed to ``actor``.

    Parameters
    ----------
    fn : callable
        A module-level function (pickled by name) that takes the rank's ``store`` as a keyword.
    kwargs : dict
        Its other arguments (picklable).
    actor : distributed.Actor
        The run's :class:`~adass.runtime.cluster.rendezvous.KeyValue` actor.
    timeout_s : float
        The most the process may run, from its start; past it, it is killed.

    Returns
    -------
    object
        What ``fn`` returned.

    Raises
    ------
    Exception
        ``fn``'s own error, as it raised it (or, where it does not pickle, a RankProcessError with its
        traceback; a result that does not pickle is such an error too).
    RankProcessError
        The process died without an answer or outlived ``timeout_s``.
    """
    ours, theirs = Pipe(duplex=True)
    # the child imports what this worker imports, from the same paths (as multiprocessing's spawn does)
    boot = f"import sys; sys.path[:] = {sys.path!r}; from {__name__} import _child; _child({theirs.fileno()})"
    proc = subprocess.Popen(
        [sys.executable, "-c", boot], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL
    )
    theirs.close()
    store = DaskStore(actor, datetime.timedelta(seconds=timeout_s))
    deadline, answered = time.monotonic() + timeout_s, False
    try:
        ours.send((fn, kwargs, timeout_s))
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RankProcessError(f"{fn.__name__} (process {proc.pid}) outlived {timeout_s:g} s")
            if not ours.poll(min(left, 1.0)):
                continue
            try:
                kind, *body = ours.recv()
            except EOFError:
                raise RankProcessError(f"{fn.__name__} (process {proc.pid}) exited with code "
                                       f"{proc.wait()} without an answer") from None  # fmt: skip
            if kind == "result":
                answered = True
                return body[0]
            if kind == "error":
                raise _error(*body)
            method, args = body
            if method == "wait":  # a wait for keys ends by this process's deadline at the latest
                args = (args[0], min(args[1], max(0.0, deadline - time.monotonic())))
            try:
                ours.send((True, store._call(method, *args)))
            except dist.DistStoreError as err:
                ours.send((False, str(err)))
    finally:
        ours.close()
        _end(proc, grace_s=10.0 if answered else 0.0)


def _error(pickled: bytes | None, text: str) -> BaseException:
    """The child's own error where it unpickles here, else a RankProcessError with its traceback."""
    if pickled is not None:
        with contextlib.suppress(Exception):
            return pickle.loads(pickled)
    return RankProcessError(text)


def _end(proc: subprocess.Popen, grace_s: float) -> None:
    """Let the process exit on its own for ``grace_s`` (after its answer: it ends its threads), then kill it."""
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def _child(fd: int) -> None:
    """The rank's process: read the call, run it with a relayed store, send back its result or error."""
    conn = Connection(fd)
    fn, kwargs, timeout_s = conn.recv()
    store = RelayedStore(conn, datetime.timedelta(seconds=timeout_s))
    try:
        conn.send(("result", fn(store=store, **kwargs)))
    except BaseException as err:  # noqa: BLE001 - the parent raises it (a result that does not pickle too)
        text = "".join(traceback.format_exception(err)).strip()
        try:
            pickled: bytes | None = pickle.dumps(err)
        except Exception:  # noqa: BLE001 - its traceback travels alone
            pickled = None
        conn.send(("error", pickled, text))
    conn.close()
