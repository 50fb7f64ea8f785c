"""Transport over torch.distributed point-to-point (gloo) between real processes, framed by
``framing.py``: heads, overflow and bodies go on three tags so each stays in FIFO order. A payload
is at most a head and one body message, or one message of both where the receiver knows the layout
(``joined``); transfers both sides agree on (``expect``, ``isend_values``) travel as the bare body.
On a throttled transport a bare body is preceded by a 16-byte stamp (send and release times, on a
fourth tag), so the receiver paces it from when it was sent, as it does framed payloads.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ..codecs.base import Payload
from . import framing
from .link import Link, parse_link
from .transport import RecvHandle, SendHandle, Transfer, Transport

__all__ = ["GlooTransport"]


class _Sent(SendHandle):
    def __init__(self, works: list, keep: list[torch.Tensor]) -> None:
        self.works, self.keep = works, keep  # the tensors stay alive until the sends complete

    def wait(self) -> None:
        for w in self.works:
            w.wait()
        self.works, self.keep = [], []


class _Recv(RecvHandle):
    def __init__(self, transport: GlooTransport, src: int, like: Payload | None,
                 into: list[torch.Tensor] | None, expect: Transfer | None, joined: bool) -> None:  # fmt: skip
        super().__init__(transport._queue(src))
        if (expect is not None or joined) and like is None:
            raise ValueError("an agreed (unframed) or joined receive needs like=")
        if joined and (expect is not None or into is not None):
            raise ValueError("a joined receive brings its own head: no expect= or into=")
        self.transport, self.src, self.like, self.expect = transport, src, like, expect
        self.posted_at = time.time()
        self.head = self.head_work = None
        self.stamp = transport._post_stamp(src) if expect is not None else None
        self.layout = framing.layout_of(like) if like is not None else None
        self.bodies: list[torch.Tensor] = []
        self.body_works: list = []
        if joined:  # head and body in one message, on the body tag
            sizes = framing.body_sizes(self.layout)
            message = torch.empty(framing.HEAD_BYTES + sum(sizes), dtype=torch.uint8)
            self.head, self.bodies = (
                message[: framing.HEAD_BYTES],
                [message[framing.HEAD_BYTES :]] if sizes else [],
            )
            self.head_work = transport._post_recv(message, src, transport.tag_body)
            return
        if expect is None:
            self.head = torch.empty(framing.HEAD_BYTES, dtype=torch.uint8)
            self.head_work = transport._post_recv(self.head, src, transport.tag_head)
        if self.layout is not None:  # the layout is known: post the body buffers now
            if into is None:
                buffers = framing.alloc_bodies(self.layout)
            else:
                buffers = [b.reshape(-1).view(torch.uint8) for b in into]
                if [b.numel() for b in buffers] != framing.body_sizes(self.layout):
                    raise ValueError(
                        f"rank {transport.rank}: receive buffers do not fit layout {self.layout}"
                    )
            self._post_bodies(buffers)

    def _post_bodies(self, buffers: list[torch.Tensor]) -> None:
        t = self.transport
        self.bodies = buffers
        self.body_works = [t._post_recv(b, self.src, t.tag_body) for b in buffers]

    def _complete(self) -> Payload:
        frame = self._frame() if self.expect is None else None
        for w in self.body_works:
            w.wait()
        t = self.transport
        if frame is None:  # agreed transfer: everything but the bytes is known here
            like = self.like
            sent_at, not_before = t._stamp_of(self.stamp, self.posted_at)
            frame = framing.Frame(like.numel, like.header_bytes, dict(like.header), self.layout,
                                  self.expect, sent_at, not_before)  # fmt: skip
        payload = framing.assemble(frame, self.bodies)
        t._deliver(self.src, payload, frame.meta, frame.sent_at, frame.not_before)
        return payload

    def _frame(self) -> framing.Frame:
        """Wait for the head (and overflow), check or post the bodies."""
        t = self.transport
        self.head_work.wait()
        extra = framing.overflow_bytes(self.head)
        overflow = None
        if extra:
            overflow = torch.empty(extra, dtype=torch.uint8)
            t._post_recv(overflow, self.src, t.tag_overflow).wait()
        frame = framing.unpack_head(self.head, overflow)
        t.log.frame_bytes += framing.HEAD_BYTES + extra + framing.padding_bytes(frame.layout)
        if self.layout is None:
            self._post_bodies(framing.alloc_bodies(frame.layout))
        elif frame.layout != self.layout:
            raise RuntimeError(
                f"rank {t.rank}: payload from {self.src} has layout {frame.layout}, expected {self.layout}"
            )
        return frame


class _RecvValues(RecvHandle):
    """A receive of one agreed tensor, posted straight into its destination (no frame)."""

    def __init__(
        self, transport: GlooTransport, src: int, into: torch.Tensor, numel: int, meta: Transfer
    ) -> None:
        super().__init__(transport._queue(src))
        self.transport, self.src, self.values, self.numel, self.meta = transport, src, into, numel, meta
        self.posted_at = time.time()
        self.stamp = transport._post_stamp(src)
        self.work = transport._post_recv(into, src, transport.tag_body)

    def _complete(self) -> Payload:
        self.work.wait()
        payload = Payload({"values": self.values}, self.numel)
        sent_at, not_before = self.transport._stamp_of(self.stamp, self.posted_at)
        self.transport._deliver(self.src, payload, self.meta, sent_at, not_before)
        return payload


class GlooTransport(Transport):
    """One process's endpoint in a torch.distributed process group (gloo).

    Parameters
    ----------
    group : ProcessGroup, optional
        The group to use (the default group if None); ranks are ranks within it.
    link : str or Link, optional
        Link model for ``sim_seconds``; with ``throttle=True`` the real link is paced to it.
    throttle : bool
        Deliver no message before the link model allows. Every rank's transport must be throttled
        alike: bare bodies then travel with their stamps.
    segment_bytes : int
        Preferred pipeline piece size for exchanges. The default, 64 MiB, sends most chunks whole:
        on a loopback with more processes than cores every message costs the peer a wake-up, and
        few large pieces measured fastest. On a real network, smaller pieces (1-4 MiB) let
        encoding overlap the transfer.
    tag_base : int
        First of the four tags used (head, overflow, body, stamp); separate transports on one
        group need separate tag ranges.
    """

    def __init__(
        self,
        group: dist.ProcessGroup | None = None,
        link: str | Link | None = None,
        throttle: bool = False,
        segment_bytes: int = 64 << 20,
        tag_base: int = 0,
    ) -> None:
        if not dist.is_initialized():
            raise RuntimeError("GlooTransport needs torch.distributed.init_process_group first")
        self.group = group
        super().__init__(dist.get_rank(group), dist.get_world_size(group), parse_link(link), throttle)
        self.segment_bytes = segment_bytes
        self.tag_head, self.tag_overflow, self.tag_body = tag_base + 1, tag_base + 2, tag_base + 3
        self.tag_stamp = tag_base + 4
        # the process group itself: its send/recv take ranks within the group and skip the checks
        # of torch.distributed's wrappers, which cost more than a small message's bytes
        self._pg = group if group is not None else dist.group.WORLD

    def _post_recv(self, tensor: torch.Tensor, src: int, tag: int):
        return self._pg.recv([tensor], src, tag)

    def _post_send(self, tensor: torch.Tensor, dst: int, tag: int):
        self.log.wire_messages += 1
        return self._pg.send([tensor], dst, tag)

    def _send_stamp(self, nbytes: int, dst: int, works: list, keep: list[torch.Tensor]) -> None:
        """On a throttled transport, send the stamps of a bare body of ``nbytes`` ahead of it."""
        if self.clock is None:
            return
        stamp = torch.tensor(self._stamp(nbytes), dtype=torch.float64)
        works.append(self._post_send(stamp, dst, self.tag_stamp))
        keep.append(stamp)

    def _post_stamp(self, src: int) -> tuple[torch.Tensor, object] | None:
        """On a throttled transport, post the receive of a bare body's stamps (None otherwise)."""
        if self.clock is None:
            return None
        stamp = torch.empty(2, dtype=torch.float64)
        return stamp, self._post_recv(stamp, src, self.tag_stamp)

    def _stamp_of(self, posted: tuple[torch.Tensor, object] | None, posted_at: float) -> tuple[float, float]:
        """Send and release times of a bare body: its stamps where it has them, else the time its
        receive was posted and now (no pacing to do)."""
        if posted is None:
            return posted_at, time.time()
        stamp, work = posted
        work.wait()
        self.log.frame_bytes += stamp.numel() * stamp.element_size()
        sent_at, not_before = stamp.tolist()
        return sent_at, not_before

    def isend(self, dst: int, payload: Payload, meta: Transfer, framed: bool = True,
              joined: bool = False) -> SendHandle:  # fmt: skip
        self._check_peer(dst)
        works, keep = [], []
        if framed or joined:
            sent_at, not_before = self._stamp(payload.nbytes)
            head, overflow = framing.pack_head(payload, meta, sent_at, not_before)
            if joined:  # one message: head, then the body (its bytes copied once, into place)
                bodies = [framing.joined_message(payload, head)]
            else:
                bodies = framing.body_views(payload)
                works.append(self._post_send(head, dst, self.tag_head))
                keep.append(head)
            if overflow is not None:
                works.append(self._post_send(overflow, dst, self.tag_overflow))
                keep.append(overflow)
        else:
            self._send_stamp(payload.nbytes, dst, works, keep)
            bodies = framing.body_views(payload)
        for body in bodies:
            works.append(self._post_send(body, dst, self.tag_body))
            keep.append(body)
        self.log.sent(payload.nbytes)
        return _Sent(works, keep)

    def irecv(self, src: int, like: Payload | None = None, into: list[torch.Tensor] | None = None,
              expect: Transfer | None = None, joined: bool = False) -> RecvHandle:  # fmt: skip
        return _Recv(self, src, like, into, expect, joined)

    def isend_values(self, dst: int, values: torch.Tensor, numel: int, meta: Transfer) -> SendHandle:
        self._check_peer(dst)
        nbytes = values.numel() * values.element_size()
        works, keep = [], []
        self._send_stamp(nbytes, dst, works, keep)
        works.append(self._post_send(values, dst, self.tag_body))
        keep.append(values)
        self.log.sent(nbytes)
        return _Sent(works, keep)

    def irecv_values(self, src: int, into: torch.Tensor, numel: int, meta: Transfer) -> RecvHandle:
        if not into.is_contiguous():
            raise ValueError(f"rank {self.rank}: a receive buffer must be contiguous")
        return _RecvValues(self, src, into, numel, meta)
