"""Live records: replicas send batches through Dask's structured events; the client keeps a RunStore.

On a replica, :class:`EventRelay` sends per-step totals in small batches with
``Worker.log_event``; on the client, ``Client.subscribe_topic`` hands each ``(timestamp, msg)`` to
:meth:`RunStore.handle`. The store is thread-safe: a progress bar or dashboard reads it while the
run goes on.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import pandas as pd

__all__ = ["EventRelay", "RunStore", "topic_for"]


def topic_for(run_id: str) -> str:
    return f"adass:{run_id}"


class EventRelay:
    """Replica side: forward lists of plain dicts under one topic (safe to call from any thread)."""

    def __init__(self, worker: Any, topic: str) -> None:
        self.worker, self.topic = worker, topic

    def send(self, kind: str, rows: list[dict]) -> None:
        if self.worker is not None and rows:
            self.worker.log_event(self.topic, {"kind": kind, "rows": rows, "sent": time.time()})


class RunStore:
    """Client side: rows of every kind received so far, in arrival order, plus arrival times."""

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
