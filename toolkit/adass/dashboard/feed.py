"""The thread-safe hand-off from a running training job to a page: a message queue and a sink feeding it.

Training threads and Dask's event thread only ever ``put`` into a :class:`LiveFeed`; the page drains it
from its own thread. Stopping is cooperative: once :meth:`LiveFeed.stop` is called, the next record the
run delivers raises :class:`StopRun`, and the trainer's own cleanup tears its cluster down.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import pandas as pd

from ..metrics import EvalRecord, MemorySink, SelectionRecord, TrafficRecord
from .messages import EpochTraffic, EvalDone, Message, SelectionFrame, StepRows, TrafficRows

__all__ = ["LiveFeed", "LiveSink", "StopRun"]

#: The engine's names for the rows a distributed run streams (``RunStore`` listeners get them).
_LIVE_ROWS: dict[str, type[StepRows] | type[TrafficRows]] = {"steps": StepRows, "traffic": TrafficRows}

#: Per-epoch frames a run writes -> the message that shows them (steps arrive live instead).
_FRAMES: dict[type, type[SelectionFrame] | type[EpochTraffic]] = {
    SelectionRecord: SelectionFrame,
    TrafficRecord: EpochTraffic,
}


class StopRun(Exception):
    """Raised inside a training run once its page asked it to stop."""


class LiveFeed:
    """A queue of messages plus a stop flag, shared by one run and one page."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Message] = queue.SimpleQueue()
        self._stop = threading.Event()

    def put(self, message: Message) -> None:
        """Queue one message (safe from any thread)."""
        self._queue.put(message)

    def drain(self, limit: int = 10_000) -> list[Message]:
        """Every message queued so far (at most ``limit``), oldest first, without blocking."""
        out: list[Message] = []
        while len(out) < limit:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return out

    def stop(self) -> None:
        """Ask the run to stop at its next record."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether a stop was asked for."""
        return self._stop.is_set()

    def check_stop(self) -> None:
        """Raise :class:`StopRun` when a stop was asked for."""
        if self._stop.is_set():
            raise StopRun("stopped from the dashboard")

    def progress(self, record: EvalRecord) -> None:
        """A ``progress`` callback for ``train``/``train_distributed`` (the end of an epoch)."""
        self.check_stop()

    def listener(self, kind: str, rows: list[dict]) -> None:
        """A ``RunStore`` listener: live per-step rows and sampled traffic (rows of other kinds are not shown)."""
        message = _LIVE_ROWS.get(kind)
        if message is not None:
            self.put(message(list(rows)))


class LiveSink(MemorySink):
    """A sink that forwards records to a :class:`LiveFeed` and, optionally, to a sink that keeps them.

    It keeps nothing itself, so a long run does not grow the page's memory. Per-step rows arrive live
    through the run's RunStore (:meth:`LiveFeed.listener`), so the per-epoch step frame only goes to
    ``inner``.

    Parameters
    ----------
    feed : LiveFeed
        Where the page picks the records up.
    inner : MemorySink, optional
        A sink that keeps the records (a ``ParquetSink`` saves the run for later comparison).
    """

    def __init__(self, feed: LiveFeed, inner: MemorySink | None = None) -> None:
        super().__init__()
        self.feed, self.inner = feed, inner

    def write(self, record: Any) -> None:
        if self.inner is not None:
            self.inner.write(record)
        if isinstance(record, EvalRecord):
            self.feed.put(EvalDone(record))

    def write_frame(self, kind: type, frame: pd.DataFrame) -> None:
        if self.inner is not None:
            self.inner.write_frame(kind, frame)
        message = _FRAMES.get(kind)
        if message is not None:
            self.feed.put(message(frame))

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
