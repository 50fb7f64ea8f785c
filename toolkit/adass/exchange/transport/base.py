"""The Transport protocol (point-to-point payloads between ranks) and its byte and time accounting.

A transfer is described by a :class:`Transfer` that travels with the payload; the receiving rank
turns each delivered transfer into a :class:`~adass.metrics.TrafficRecord`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

import torch

from ...codecs.base import Payload
from ...metrics import TrafficRecord
from ..link import Link, LinkClock

__all__ = ["PHASES", "RecvHandle", "SendHandle", "TrafficLog", "Transfer", "Transport", "split_phase"]

PHASES = ("scale", "push", "reduce_scatter", "all_gather", "pull")


def split_phase(phase: str) -> tuple[str, str]:
    """``(round, phase)`` of a recorded phase: an exchange that reduces in rounds (a low-rank codec's
    ``p`` and ``q``) names its transfers ``ROUND.PHASE``; other phases have the round ``""``.

    >>> split_phase("q.reduce_scatter"), split_phase("push")
    (('q', 'reduce_scatter'), ('', 'push'))
    """
    round_name, _, own = phase.rpartition(".")
    return round_name, own


@dataclass(frozen=True)
class Transfer:
    """What a message is, for the records: phase, hop and chunk of one step.

    ``raw_bytes`` overrides ``payload.raw_bytes`` for control messages whose dense fp32 size is
    not ``4 * numel``.
    """

    phase: str
    hop: int = 0
    chunk: int = 0
    step: int = 0
    epoch: int = 0
    raw_bytes: int | None = None


@dataclass
class TrafficLog:
    """Per-endpoint accounting: totals of what was sent and delivered, and one record per delivery.

    ``frame_bytes`` counts what a transport adds around payloads on the wire (gloo frame heads);
    ``wire_bytes`` in the records is the payloads' own ``nbytes``. ``wire_messages`` counts the
    messages a copying transport sent, which may be more than the payloads (head, overflow, body).
    """

    run: str = ""
    sent_bytes: int = 0
    sent_messages: int = 0
    received_bytes: int = 0
    received_messages: int = 0
    frame_bytes: int = 0
    wire_messages: int = 0
    seconds: float = 0.0
    sim_seconds: float = 0.0
    records: list[TrafficRecord] = field(default_factory=list)

    def sent(self, nbytes: int) -> None:
        """Count one payload of ``nbytes`` bytes sent."""
        self.sent_bytes += nbytes
        self.sent_messages += 1

    def delivered(
        self, src: int, dst: int, payload: Payload, meta: Transfer, seconds: float, link: Link | None
    ) -> TrafficRecord:
        """Count one delivered message and keep its record."""
        sim = link.seconds(payload.nbytes) if link is not None else 0.0
        raw = payload.raw_bytes if meta.raw_bytes is None else meta.raw_bytes
        record = TrafficRecord(
            run=self.run, epoch=meta.epoch, step=meta.step, phase=meta.phase, hop=meta.hop,
            src=src, dst=dst, chunk=meta.chunk, raw_bytes=raw, wire_bytes=payload.nbytes,
            seconds=seconds, sim_seconds=sim,
        )  # fmt: skip
        self.received_bytes += payload.nbytes
        self.received_messages += 1
        self.seconds += seconds
        self.sim_seconds += sim
        self.records.append(record)
        return record

    def drain(self) -> list[TrafficRecord]:
        """The records kept so far; the log starts a new list (totals keep counting)."""
        out, self.records = self.records, []
        return out


class SendHandle(ABC):
    """A send in flight; ``wait`` returns once the payload's buffers may be reused."""

    @abstractmethod
    def wait(self) -> None: ...


class RecvHandle(ABC):
    """A receive in flight; ``wait`` returns the delivered payload.

    Receives from one source complete in the order they were posted: waiting on a later handle
    first completes the earlier ones (their payloads are kept for their own ``wait``).
    """

    def __init__(self, queue: deque[RecvHandle]) -> None:
        self._queue = queue
        self._payload: Payload | None = None
        queue.append(self)

    def wait(self) -> Payload:
        while self._payload is None:
            head = self._queue.popleft()
            head._payload = head._complete()
        return self._payload

    @abstractmethod
    def _complete(self) -> Payload:
        """Block until this (the oldest pending) receive from its source has arrived."""


class Transport(ABC):
    """Moves payloads between ``world`` ranks; this object is one rank's endpoint.

    Parameters
    ----------
    rank, world : int
        This endpoint and the number of ranks.
    link : Link, optional
        The link model: every delivered transfer gets ``sim_seconds`` from it.
    throttle : bool
        Also pace the real transfers so none finishes before ``link`` allows.
    device : torch.device or str
        Where received payloads are delivered: the device of this rank's gradients (the CPU by
        default).

    Attributes
    ----------
    segment_bytes : int or None
        Preferred size of pipeline sub-chunks; None where overlap gains nothing (in process).
    by_reference : bool
        Payloads reach the receiver as the same objects (in process), not as copies.
    between_hosts : bool
        Peers are reached over a network link, whose two directions carry data at once (rather than
        through this machine's memory): where one peer is both neighbours of a ring (P = 2), it posts
        its receives before its sends.
    log : TrafficLog
        Totals and records of this endpoint's deliveries.
    """

    segment_bytes: int | None = None
    by_reference: bool = False
    between_hosts: bool = False

    def __init__(self, rank: int, world: int, link: Link | None = None, throttle: bool = False,
                 device: torch.device | str = "cpu") -> None:  # fmt: skip
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not in a world of {world}")
        if throttle and link is None:
            raise ValueError("throttle=True needs a link model")
        self.rank, self.world = rank, world
        self.device = torch.device(device)
        self.link = link
        self.clock = LinkClock(link) if throttle and link is not None else None
        self.log = TrafficLog()
        self._pending: dict[int, deque[RecvHandle]] = {}

    @abstractmethod
    def isend(self, dst: int, payload: Payload, meta: Transfer, repeat: Hashable | None = None) -> SendHandle:
        """Start sending ``payload`` to ``dst``; the payload must not change until ``wait``.

        ``repeat`` names a transfer that recurs step after step with one layout (tensor names,
        dtypes, shapes); the receive of it passes the same name. A transport may remember the
        layout and move such a transfer in fewer messages from its second time on.
        """

    @abstractmethod
    def irecv(self, src: int, repeat: Hashable | None = None) -> RecvHandle:
        """Post a receive of the next payload from ``src`` (``repeat``: as in :meth:`isend`)."""

    def isend_values(self, dst: int, values: torch.Tensor, numel: int, meta: Transfer) -> SendHandle:
        """Send one contiguous tensor as it is, for a receive posted with :meth:`irecv_values`.

        Both sides know the transfer (size, dtype and ``meta``), so nothing needs to describe it on
        the wire; ``numel`` is the dense length it stands for (the records' raw bytes). This
        default sends an ordinary payload; copying transports override this and
        :meth:`irecv_values` with a route that sends the bytes alone.
        """
        return self.isend(dst, Payload({"values": values}, numel), meta)

    def irecv_values(self, src: int, into: torch.Tensor, numel: int, meta: Transfer) -> RecvHandle:
        """Receive what :meth:`isend_values` sends, straight into ``into`` (contiguous, the sent
        size and dtype); ``wait`` returns a payload whose ``values`` hold the bytes received (in
        ``into`` where the transport copies)."""
        return self.irecv(src)

    def recv_any(self, sources: range) -> tuple[int, Payload]:
        """Receive the next payload from whichever of ``sources`` sends first; return its source
        and the payload. No receive from those sources may be pending (a server that takes pushes as
        they come uses nothing else for them).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot receive from any source")

    def send(self, dst: int, payload: Payload, meta: Transfer) -> None:
        """Send and wait."""
        self.isend(dst, payload, meta).wait()

    def recv(self, src: int) -> Payload:
        """Receive the next payload from ``src``."""
        return self.irecv(src).wait()

    def _check_peer(self, dst: int) -> None:
        """Raise ValueError unless ``dst`` is another rank of this world."""
        if not 0 <= dst < self.world or dst == self.rank:
            raise ValueError(f"rank {self.rank}: cannot send to {dst} in a world of {self.world}")

    def _queue(self, src: int) -> deque[RecvHandle]:
        if not 0 <= src < self.world or src == self.rank:
            raise ValueError(f"rank {self.rank}: cannot receive from {src} in a world of {self.world}")
        return self._pending.setdefault(src, deque())

    def _stamp(self, nbytes: int) -> tuple[float, float]:
        """Send time and the time the sender's egress releases a message of ``nbytes`` (pacing)."""
        now = time.time()
        not_before = self.clock.egress(nbytes, now) if self.clock is not None else now
        return now, not_before

    def _deliver(self, src: int, payload: Payload, meta: Transfer, sent_at: float, not_before: float) -> None:
        """Pace (when throttled) and record a delivered message."""
        if self.clock is not None:
            done = self.clock.ingress(payload.nbytes, not_before)
            delay = done - time.time()
            if delay > 0:
                time.sleep(delay)
        seconds = max(0.0, time.time() - sent_at)
        self.log.delivered(src, self.rank, payload, meta, seconds, self.link)
