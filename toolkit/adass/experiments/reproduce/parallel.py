"""Independent runs of ``adass reproduce`` in this process (``--jobs 1``) or in N worker processes.

A task is a module-level function and its arguments (so a spawned worker can import it); it returns a
:class:`Done`. Tasks carry their seeds in their arguments and every run pins one torch thread, so the
results are the same in any process and any order; they come back in the order the tasks were given.
Workers are started with ``spawn`` (no forked torch or Dask state), once per invocation, and ignore
Ctrl-C: this process takes it and stops them at once (their finished runs are in the store already).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .progress import Progress
from .store import RunStore

__all__ = ["Done", "Runner", "Task"]


@dataclass(frozen=True)
class Done:
    """What a finished task hands back: its value and what the progress line says about it.

    Attributes
    ----------
    value : object
        The task's result (a row, or a frame of rows).
    numbers : str
        The measured numbers for the progress line (``acc 0.912``).
    seconds : float
        Time the task's own runs took (0 where every run was reused).
    runs : int
        Runs the task stands for.
    reused : int
        Of those, how many were found finished in the store.
    """

    value: Any
    numbers: str = ""
    seconds: float = 0.0
    runs: int = 1
    reused: int = 0


@dataclass(frozen=True)
class Task:
    """A labelled call of a module-level function."""

    label: str
    fn: Callable[..., Done]
    args: tuple = ()


def _ignore_interrupt() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _call(item: tuple[int, Callable[..., Done], tuple]) -> tuple[int, Done]:
    index, fn, args = item
    return index, fn(*args)


class Runner:
    """Runs tasks with ``jobs`` processes and holds the store they read and write.

    Parameters
    ----------
    store : RunStore
        Finished runs (tasks receive it among their arguments).
    jobs : int
        Worker processes; 1 runs every task here, one after another.
    quiet : bool
        No progress lines.
    """

    def __init__(self, store: RunStore, jobs: int = 1, quiet: bool = False) -> None:
        self.store, self.jobs, self.quiet = store, jobs, quiet
        self._pool: multiprocessing.pool.Pool | None = None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.close(stop=kind is not None)

    def close(self, stop: bool = False) -> None:
        """Let the workers finish and exit, or with ``stop`` end them at once (Ctrl-C, a failed run):
        their unfinished runs are not in the store and run next time."""
        if self._pool is None:
            return
        if stop:
            self._pool.terminate()
        else:
            self._pool.close()
        self._pool.join()
        self._pool = None

    def progress(self, name: str, total: int) -> Progress:
        return Progress(name, total, self.quiet)

    def run(self, tasks: Sequence[Task], progress: Progress) -> list[Any]:
        """Every task's value, in the order of ``tasks``; one progress line as each finishes."""
        if self.jobs == 1 or len(tasks) <= 1:
            values = []
            for task in tasks:
                done = task.fn(*task.args)
                progress(task.label, done.numbers, done.seconds, runs=done.runs, reused=done.reused)
                values.append(done.value)
            return values
        if self._pool is None:
            self._pool = multiprocessing.get_context("spawn").Pool(self.jobs, initializer=_ignore_interrupt)
        values: list[Any] = [None] * len(tasks)
        items = [(i, t.fn, t.args) for i, t in enumerate(tasks)]
        # a failed run raises here and fails the invocation, as it would with --jobs 1
        for i, done in self._pool.imap_unordered(_call, items):
            progress(tasks[i].label, done.numbers, done.seconds, runs=done.runs, reused=done.reused)
            values[i] = done.value
        return values
