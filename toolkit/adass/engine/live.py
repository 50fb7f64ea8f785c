"""Live step records: a step hook that hands rows on in batches a few times per second, and the
store that receives them while the run goes on (every backend's replicas feed one).

Every batch a Dask replica sends (an event) wakes the scheduler and the client; a few per second keep
the progress live without taking the cores the ring is waiting for. The store is thread-safe: a
progress bar or dashboard reads it while the run goes on.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pandas as pd

__all__ = ["LiveBatches", "RunStore"]


class LiveBatches:
    """A step hook (see :class:`~adass.engine.loop.Engine`) that sends ``send(kind, rows)`` batches.

    ``"steps"`` rows (per-step totals) go for every step, ``"traffic"`` rows (per-chunk detail) for
    every ``detail_every``-th step. A batch leaves after the epoch's first and last step and whenever
    ``every_s`` seconds have passed since the last one.

    Parameters
    ----------
    send : callable
        Receives ``(kind, rows)``.
    steps : int
        Steps in the epoch (the last one flushes).
    detail_every : int
        Full traffic detail for every this-many-th step.
    every_s : float
        Seconds between batches.
    """

    def __init__(self, send: Callable[[str, list[dict]], None], steps: int, detail_every: int = 10,
                 every_s: float = 0.5) -> None:  # fmt: skip
        self.send, self.steps, self.detail_every, self.every_s = send, steps, detail_every, every_s
        self.seen = 0
        self.sent_at = time.perf_counter()
        self.pending: list[dict[str, Any]] = []
        self.detail: list[dict[str, Any]] = []

    def __call__(self, row: dict[str, Any], traffic: list[dict[str, Any]]) -> None:
        self.pending.append(row)
        if row["step"] % self.detail_every == 0:
            self.detail += traffic
        now = time.perf_counter()
        if self.seen in (0, self.steps - 1) or now - self.sent_at >= self.every_s:
            self.send("steps", self.pending)
            self.send("traffic", self.detail)
            self.pending, self.detail, self.sent_at = [], [], now
        self.seen += 1


class RunStore:
    """Rows of every kind received so far, in arrival order, plus arrival times."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, list[dict]] = defaultdict(list)
        self.arrivals: list[tuple[float, str, int]] = []  # (arrival time, kind, rows)
        self.listeners: list[Any] = []

    def handle(self, event: tuple[float, dict]) -> None:
        """The ``subscribe_topic`` handler: ``event`` is ``(timestamp, msg)``."""
        _, msg = event
        self.add(msg["kind"], msg["rows"])

    def add(self, kind: str, rows: list[dict]) -> None:
        with self._lock:
            self._rows[kind].extend(rows)
            self.arrivals.append((time.time(), kind, len(rows)))
            listeners = list(self.listeners)
        for listener in listeners:
            listener(kind, rows)

    def count(self, kind: str) -> int:
        with self._lock:
            return len(self._rows[kind])

    def frame(self, kind: str) -> pd.DataFrame:
        with self._lock:
            return pd.DataFrame(list(self._rows[kind]))
