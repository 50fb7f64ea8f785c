"""Waiting on every rank at once: the first rank to fail, or a worker that left, ends the wait.

Ranks block on each other inside gloo collectives, so waiting on them one by one in rank order would
sit on a healthy rank (stuck waiting for a dead peer) until the collective's timeout, while the dead
rank's error was already there. Here all futures are polled together; a worker that left the cluster
is named as the cause, whichever rank's error came first.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from ...data import DataError, DataNotFound
from ...failures import LostRank, RunFailure, one_line
from ...registry import SpecError
from .bootstrap import GroupConnectError

__all__ = ["call_all", "call_each", "wait_all"]

_POLL_S = 0.05
_IMPORT_REPR = re.compile(r"\b(ModuleNotFoundError|ImportError)\(['\"]([^'\"]*)['\"]")
_MEMBERS_EVERY_S = 1.0
_CAUSE_GRACE_S = 2.0  # after a rank's error, how long to look for a worker that left (the cause)


def wait_all(
    futures: Sequence[Any], addresses: Sequence[str], timeout_s: float, what: str,
    alive: Callable[[], set[str]] | None = None,
) -> list[Any]:  # fmt: skip
    """Results of ``futures`` (one per rank, rank order), waiting on all of them together.

    Parameters
    ----------
    futures : sequence
        Dask (actor) futures with ``done()`` and ``result()``; ``futures[r]`` runs on ``addresses[r]``.
    addresses : sequence of str
        The worker of each rank.
    timeout_s : float
        How long the whole wait may take.
    what : str
        What the ranks are doing, for the message (``"epoch 3"``).
    alive : callable, optional
        The addresses of the workers in the cluster now; checked every second.

    Raises
    ------
    LostRank
        One line naming the rank and worker that failed (or left), or the ranks still running at the timeout.
    """
    results: dict[int, Any] = {}
    start = last_check = time.monotonic()
    while len(results) < len(futures):
        now = time.monotonic()
        for rank, future in enumerate(futures):
            if rank in results or not future.done():
                continue
            try:
                results[rank] = future.result()
            except RunFailure as err:  # the run's own verdict (divergence): every rank reaches it alike
                raise type(err)(f"{what}: {err}") from None
            except (
                SpecError,
                GroupConnectError,
            ):  # a bad option or an unreachable peer: a restart cannot help
                raise
            except DataError as err:  # nor can it give a worker the files it lacks
                where = (" (with --data-to-workers read each worker reads --data itself: its files must be at"
                         " that URL or path on every worker's machine; auto or stream sends a worker that lacks"
                         " them its rows from this process)") if isinstance(err, DataNotFound) else ""  # fmt: skip
                raise DataError(f"rank {rank} on worker {addresses[rank]}: {err}{where}") from None
            except Exception as err:  # the first error wins, unless a worker that left explains it
                missing = missing_code(err)
                if missing is not None:  # the worker's environment: every restart would fail alike
                    raise RunFailure(
                        f"{what}: rank {rank} on worker {addresses[rank]} cannot load the run's code ({missing});"
                        f" every worker needs the same adass, torch and dask as this process"
                    ) from None
                _raise_failed(addresses, alive, what, rank, err)
        if alive is not None and now - last_check >= _MEMBERS_EVERY_S:
            last_check = now
            _raise_lost(addresses, alive, what, wait_s=0.0)
        if now - start > timeout_s:
            waiting = [r for r in range(len(futures)) if r not in results]
            raise LostRank(f"{what}: ranks {waiting} (workers {[addresses[r] for r in waiting]}) gave no "
                           f"result within --timeout-s {timeout_s:g}")  # fmt: skip
        pending = [r for r in range(len(futures)) if r not in results]
        if pending:  # block briefly on one pending rank: its result is seen the moment it lands
            with contextlib.suppress(Exception):  # a timeout, or its error, collected by done() above
                futures[pending[0]].result(timeout=_POLL_S)
    return [results[r] for r in range(len(futures))]


def call_all(
    members: Sequence[Any], method: str, args: Sequence[Any], addresses: Sequence[str], timeout_s: float,
    what: str, alive: Callable[[], set[str]] | None = None,
) -> list[Any]:  # fmt: skip
    """``members[r].method(*args)`` on every rank (Dask actors), then :func:`wait_all` on the calls.

    A call can fail before it leaves: an actor whose worker is gone, or whose client lost the scheduler,
    refuses the call at once. Such a failure is named as one in a rank's result would be: the worker
    that left, the scheduler that is gone, or else the rank and its error.
    """
    return call_each(members, method, [args] * len(members), addresses, timeout_s, what, alive)


def call_each(
    members: Sequence[Any], method: str, args: Sequence[Sequence[Any]], addresses: Sequence[str],
    timeout_s: float, what: str, alive: Callable[[], set[str]] | None = None,
) -> list[Any]:  # fmt: skip
    """``members[r].method(*args[r])`` on every rank: :func:`call_all` with arguments of each rank's own."""
    futures = []
    for rank, (member, own) in enumerate(zip(members, args, strict=True)):
        try:
            futures.append(getattr(member, method)(*own))
        except Exception as err:  # noqa: BLE001 - distributed raises RuntimeError, CancelledError, OSError
            _raise_failed(addresses, alive, what, rank, err)
    return wait_all(futures, addresses, timeout_s, what, alive=alive)


def missing_code(err: BaseException) -> str | None:
    """What a worker lacked if ``err`` says it could not import or unpickle the run's code, else None."""
    seen: BaseException | None = err
    for _ in range(8):  # the chain of causes, not far
        if seen is None:
            break
        if isinstance(seen, ImportError):
            return one_line(seen)
        seen = seen.__cause__ or seen.__context__
    if "deserialization of the task graph" in str(err):
        return one_line(err)
    # ``client.run`` hands back a worker's import error as a plain Exception holding its repr
    named = _IMPORT_REPR.search(str(err))
    return f"{named.group(1)}: {named.group(2)}" if named else None


def _raise_failed(
    addresses: Sequence[str], alive: Callable[[], set[str]] | None, what: str, rank: int, err: BaseException
) -> None:
    """Raise the failure of ``rank``: a worker that left (looked for a moment) or else the rank's error."""
    _raise_lost(addresses, alive, what, wait_s=_CAUSE_GRACE_S)
    raise LostRank(f"{what}: rank {rank} on worker {addresses[rank]} failed: {one_line(err)}") from None


def _raise_lost(
    addresses: Sequence[str], alive: Callable[[], set[str]] | None, what: str, wait_s: float
) -> None:
    """Raise RunFailure naming the first rank whose worker is gone, looking for up to ``wait_s``."""
    if alive is None:
        return
    deadline = time.monotonic() + wait_s
    while True:
        try:
            present = alive()
        except RunFailure:  # the scheduler is gone: no restart can help
            raise
        except Exception as err:
            raise LostRank(f"{what}: the Dask scheduler does not answer: {one_line(err)}") from None
        gone = [r for r, a in enumerate(addresses) if a not in present]
        if gone:
            rank = gone[0]
            raise LostRank(f"{what}: worker {addresses[rank]} (rank {rank}) left the cluster")
        if time.monotonic() >= deadline:
            return
        time.sleep(0.2)
