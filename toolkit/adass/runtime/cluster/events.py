"""Live records over Dask: replicas send batches through Dask's structured events to the client's
:class:`~adass.engine.live.RunStore`.

On a replica, :class:`EventRelay` sends per-step totals in small batches with
``Worker.log_event``; on the client, ``Client.subscribe_topic`` hands each ``(timestamp, msg)`` to
:meth:`RunStore.handle`.
"""

from __future__ import annotations

import time
from typing import Any

from ...engine.live import RunStore

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
