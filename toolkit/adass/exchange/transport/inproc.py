"""In-process transport: virtual workers as threads of one process, one FIFO queue per ordered pair.

Payloads pass by reference (no copy), so a sender must not change a payload after sending it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass

import torch

from ...codecs.base import Payload
from ..link import Link, parse_link
from .base import RecvHandle, SendHandle, Transfer, Transport

__all__ = ["MAX_WORLD", "InProcHub", "InProcTransport"]

MAX_WORLD = 64


@dataclass(frozen=True)
class _Envelope:
    payload: Payload
    meta: Transfer
    sent_at: float
    not_before: float


class InProcHub:
    """The queues shared by ``world`` in-process endpoints; ``abort`` wakes every waiting receive.

    Parameters
    ----------
    world : int
        Number of ranks, 1..64.
    timeout_s : float
        A receive that waits longer raises TimeoutError (a lost message would otherwise hang).
    """

    def __init__(self, world: int, timeout_s: float = 120.0) -> None:
        if not 1 <= world <= MAX_WORLD:
            raise ValueError(f"world={world} is not allowed; expected an integer in [1, {MAX_WORLD}]")
        self.world = world
        self.timeout_s = timeout_s
        self._queues = {(s, d): queue.SimpleQueue() for s in range(world) for d in range(world) if s != d}
        self._aborted = threading.Event()

    def transport(self, rank: int, link: str | Link | None = None, throttle: bool = False,
                  device: torch.device | str = "cpu") -> InProcTransport:  # fmt: skip
        """The endpoint of ``rank``, whose gradients live on ``device`` (payloads travel by
        reference, so every rank of a hub works on one device)."""
        return InProcTransport(self, rank, parse_link(link), throttle, device)

    def abort(self) -> None:
        """Make every pending and future receive raise (a peer failed)."""
        self._aborted.set()

    def put(self, src: int, dst: int, envelope: _Envelope) -> None:
        self._queues[(src, dst)].put(envelope)

    def get(self, src: int, dst: int) -> _Envelope:
        box = self._queues[(src, dst)]
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self._aborted.is_set():
                raise RuntimeError(f"rank {dst}: receive from {src} aborted (a peer failed)")
            try:
                return box.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"rank {dst}: nothing from {src} in {self.timeout_s} s") from None

    def get_any(self, sources: range, dst: int) -> tuple[int, _Envelope]:
        """The first envelope for ``dst`` from any of ``sources`` (polled in turn: a test and
        teaching transport, where a short sleep between rounds costs nothing that matters)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self._aborted.is_set():
                raise RuntimeError(f"rank {dst}: receive from any of {sources} aborted (a peer failed)")
            for src in sources:
                try:
                    return src, self._queues[(src, dst)].get_nowait()
                except queue.Empty:
                    pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank {dst}: nothing from {sources} in {self.timeout_s} s")
            time.sleep(0.0002)


class _Sent(SendHandle):
    def wait(self) -> None:
        return None


class _Recv(RecvHandle):
    def __init__(self, transport: InProcTransport, src: int) -> None:
        super().__init__(transport._queue(src))
        self.transport, self.src = transport, src

    def _complete(self) -> Payload:
        t = self.transport
        env = t.hub.get(self.src, t.rank)
        t._deliver(self.src, env.payload, env.meta, env.sent_at, env.not_before)
        return env.payload


class InProcTransport(Transport):
    """One rank's endpoint on an :class:`InProcHub` (built by ``hub.transport(rank)``)."""

    segment_bytes = None
    by_reference = True

    def __init__(self, hub: InProcHub, rank: int, link: Link | None = None, throttle: bool = False,
                 device: torch.device | str = "cpu") -> None:  # fmt: skip
        super().__init__(rank, hub.world, link, throttle, device)
        self.hub = hub

    def isend(self, dst: int, payload: Payload, meta: Transfer, repeat: Hashable | None = None) -> SendHandle:
        self._check_peer(dst)
        sent_at, not_before = self._stamp(payload.nbytes)
        self.hub.put(self.rank, dst, _Envelope(payload, meta, sent_at, not_before))
        self.log.sent(payload.nbytes)
        return _Sent()

    def irecv(self, src: int, repeat: Hashable | None = None) -> RecvHandle:
        return _Recv(self, src)

    def recv_any(self, sources: range) -> tuple[int, Payload]:
        for src in sources:
            self._queue(src)  # checks every source
        src, env = self.hub.get_any(sources, self.rank)
        self._deliver(src, env.payload, env.meta, env.sent_at, env.not_before)
        return src, env.payload
