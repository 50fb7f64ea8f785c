"""The thread-safe hand-off from a running training job to its pages: a message log and a sink feeding it.

Training threads and Dask's event thread only ever ``put`` into a :class:`LiveFeed`; each page drains
it through a reader of its own, from its own thread. Stopping is cooperative: once :meth:`LiveFeed.stop` is called, the next record the
run delivers raises :class:`StopRun`, and the trainer's own cleanup tears its cluster down.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any

import pandas as pd

from ..metrics import EvalRecord, MemorySink, SelectionRecord, TrafficRecord
from .messages import EpochTraffic, EvalDone, Message, SelectionFrame, StepRows, TrafficRows

__all__ = ["FeedReader", "LiveFeed", "LiveSink", "StopRun"]

#: The engine's names for the rows a distributed run streams (``RunStore`` listeners get them).
_LIVE_ROWS: dict[str, type[StepRows] | type[TrafficRows]] = {"steps": StepRows, "traffic": TrafficRows}

#: Messages a run sends per step; a feed keeps only the last of them for pages that attach later.
_ROW_MESSAGES = (StepRows, TrafficRows)

#: Per-epoch frames a run writes -> the message that shows them (steps arrive live instead).
_FRAMES: dict[type, type[SelectionFrame] | type[EpochTraffic]] = {
    SelectionRecord: SelectionFrame,
    TrafficRecord: EpochTraffic,
}


class StopRun(Exception):
    """Raised inside a training run once its page asked it to stop."""


class LiveFeed:
    """What one run has told its pages so far, kept in order, plus a stop flag.

    A run outlives the page that started it, and a page that opens later (a reload, another tab)
    replays the run from its first message: every page reads the log through a reader of its own
    (:meth:`reader`). Rows that arrive per step are many and the views keep only the last of them, so
    beyond ``keep_rows`` such messages the oldest are dropped; every other message stays.

    Parameters
    ----------
    keep_rows : int
        Step and traffic row messages kept for pages that attach later.
    """

    def __init__(self, keep_rows: int = 4_000) -> None:
        self.keep_rows = keep_rows
        self._lock = threading.Lock()
        self._seqs: list[int] = []  # ascending: the number of each kept message
        self._messages: list[Message] = []
        self._rows = 0  # row messages among them
        self._next = 0
        self._stop = threading.Event()
        self._own: FeedReader | None = None

    def put(self, message: Message) -> None:
        """Add one message (safe from any thread)."""
        with self._lock:
            self._seqs.append(self._next)
            self._messages.append(message)
            self._next += 1
            if isinstance(message, _ROW_MESSAGES):
                self._rows += 1
                if self._rows > self.keep_rows:
                    self._forget_rows(self._rows - self.keep_rows // 2)

    def _forget_rows(self, count: int) -> None:
        """Drop the ``count`` oldest row messages (called with the lock held)."""
        kept_seqs, kept = [], []
        for seq, message in zip(self._seqs, self._messages, strict=True):
            if count and isinstance(message, _ROW_MESSAGES):
                count -= 1
                self._rows -= 1
                continue
            kept_seqs.append(seq)
            kept.append(message)
        self._seqs, self._messages = kept_seqs, kept

    def since(self, seq: int, limit: int) -> tuple[list[Message], int]:
        """Messages numbered ``seq`` or later (at most ``limit``), and the number to ask for next."""
        with self._lock:
            first = bisect.bisect_left(self._seqs, seq)
            out = self._messages[first : first + limit]
            following = self._seqs[first + len(out)] if first + len(out) < len(self._seqs) else self._next
            return out, following

    def reader(self) -> FeedReader:
        """A reader from the run's first message on (each page has its own)."""
        return FeedReader(self)

    def drain(self, limit: int = 10_000) -> list[Message]:
        """Messages not drained before through this call (its own reader), oldest first."""
        if self._own is None:
            self._own = self.reader()
        return self._own.drain(limit)

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


class FeedReader:
    """One page's place in a :class:`LiveFeed`: :meth:`drain` returns what it has not seen yet."""

    def __init__(self, feed: LiveFeed) -> None:
        self.feed, self._next = feed, 0

    def drain(self, limit: int = 10_000) -> list[Message]:
        """Messages that arrived since the last call (at most ``limit``), oldest first, without blocking."""
        out, self._next = self.feed.since(self._next, limit)
        return out


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
