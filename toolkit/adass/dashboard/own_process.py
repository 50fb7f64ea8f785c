"""A page's run of one model (or of replicas on threads) in a process of its own.

Training in the server's own interpreter would hold its lock between the page updates: every click,
and every page another visitor opens, would wait on the run. The run goes instead to a child process,
forked from a server of processes that has imported the toolkit and torch once (``forkserver`` with
those modules preloaded), so a run starts in a fraction of a second. Messages come back through a
queue; the stop flag is an event both processes see.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..allocator import ENVIRON, wanted
from ..config import RunConfig
from ..data import load_dataset
from ..failures import one_line
from .feed import LiveFeed, StopRun
from .messages import Message
from .training import train_for_page

__all__ = ["process_context", "run_in_own_process"]

log = logging.getLogger(__name__)

_PRELOAD = ["adass.dashboard.own_process"]


def process_context() -> Any:
    """The multiprocessing context runs start from: a forkserver with the toolkit loaded, where the
    platform has one (else ``spawn``). Calling it early (as the server does) pays the imports once,
    before the first Start."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    from multiprocessing import forkserver

    if wanted():  # read by glibc when the server starts; what it forks (runs, Dask workers) inherits it
        os.environ.update(ENVIRON)
    forkserver.ensure_running()
    return context


class _ChildFeed(LiveFeed):
    """The child's side of the feed: messages go into the queue, the stop flag is shared."""

    def __init__(self, messages: Any, stop: Any) -> None:
        super().__init__()
        self._queue, self._stop = messages, stop

    def put(self, message: Message) -> None:
        self._queue.put(("message", message))


def _child(config: RunConfig, run_id: str, save_dir: Path | None, messages: Any, stop: Any) -> None:
    feed = _ChildFeed(messages, stop)
    try:
        dataset = load_dataset(config.data.data, seed=config.optim.seed)  # read again here: not sent
        messages.put(("end", train_for_page(config, feed, dataset, run_id, save_dir)))
    except StopRun:
        messages.put(("end", "stopped"))
    except BaseException as err:  # noqa: BLE001 - every failure goes back to the page as one line
        messages.put(("error", (one_line(err), traceback.format_exc())))


def run_in_own_process(config: RunConfig, feed: LiveFeed, run_id: str, save_dir: Path | None,
                       seen: Callable[[Message], None]) -> str:  # fmt: skip
    """Train ``config`` in a child process, its messages into ``feed`` (each also to ``seen``);
    ``finished`` or ``stopped``. ``feed.stop()`` reaches the child at its next step or epoch.

    Raises
    ------
    RuntimeError
        The child failed (its one line), or ended without a word (its exit code).
    """
    context = process_context()
    messages, stop = context.Queue(), context.Event()
    child = context.Process(target=_child, args=(config, run_id, save_dir, messages, stop),
                            name=f"adass-run-{run_id}", daemon=True)  # fmt: skip
    child.start()
    try:
        ended = False  # the child has exited: what it queued last may still be on its way
        while True:
            if feed.stopping:
                stop.set()
            try:
                kind, payload = messages.get(timeout=1.0 if ended else 0.2)
            except queue.Empty:
                if ended:
                    raise RuntimeError(
                        f"the run's process ended without a result (exit code {child.exitcode})"
                    ) from None
                ended = not child.is_alive()
                continue
            if kind == "message":
                seen(payload)
                feed.put(payload)
            elif kind == "end":
                return payload
            else:
                text, trace = payload
                log.error("run %s failed in its process:\n%s", run_id, trace)
                raise RuntimeError(text)
    finally:
        stop.set()
        child.join(30)
        if child.is_alive():  # it did not stop in time: it is ours, by its PID
            child.kill()
            child.join(5)
        messages.close()
