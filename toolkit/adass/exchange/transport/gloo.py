"""Transport over torch.distributed point-to-point (gloo) between real processes, framed by
``framing.py``: heads, overflow and bodies go on three tags so each stays in FIFO order. A payload
is at most a head and one body message, or one message of both for a repeating transfer whose
layout both sides have seen (``layouts.py``); transfers both sides agree on (``isend_values``)
travel as the bare tensor. On a throttled transport a bare tensor is preceded by a 16-byte stamp
(send and release times, on a fourth tag), so the receiver paces it from when it was sent, as it
does framed payloads; a small one (up to ``JOINED_STAMP_MAX_BYTES``) travels in one message with
its stamp, on the stamp's tag, since a second message would cost it more than its bytes.

Heads, overflow and stamps are host tensors and go over gloo. Bodies travel on the transport's wire
device: the gradients' own device where the group carries it (CUDA tensors over nccl, in a group
made ``cpu:gloo,cuda:nccl``), the host otherwise, through a copy on each side. Every rank of a group
decides alike, so a body is received where it was sent from. nccl runs a pair's messages in both
directions on one stream, where a receive posted before a send to the same peer (a ring of two, the
scale agreement) would wait for ever; device bodies therefore go over two nccl groups, one per
direction (to a higher rank, to a lower one), each in the order posted, as the body tag is.
"""

from __future__ import annotations

import time
from collections.abc import Hashable

import torch
import torch.distributed as dist

from ...codecs.base import Payload
from ..link import Link, parse_link
from . import framing
from .base import RecvHandle, SendHandle, Transfer, Transport
from .layouts import LayoutMemory
from .segments import LOOPBACK_SEGMENT_BYTES

__all__ = ["JOINED_STAMP_MAX_BYTES", "GlooTransport", "wire_device"]

# Bare tensors up to this size go out behind their stamp in one message (a copy of at most this
# much on each side), larger ones in two. Both sides decide from the agreed size alone.
JOINED_STAMP_MAX_BYTES = 64 << 10
_STAMP_BYTES = 16  # send and release times, float64


def _joined(nbytes: int) -> bool:
    """Whether a throttled bare tensor of ``nbytes`` travels in one message with its stamp."""
    return nbytes <= JOINED_STAMP_MAX_BYTES


def wire_device(group: dist.ProcessGroup | None, device: torch.device) -> torch.device:
    """Where bodies of a transport on ``device`` travel: ``device`` itself where the group's backend
    carries it (the host always; CUDA where the group has nccl), the host otherwise."""
    if device.type == "cpu" or (device.type == "cuda" and "nccl" in str(dist.get_backend(group))):
        return device
    return torch.device("cpu")


def _direction_groups(group: dist.ProcessGroup | None) -> tuple[dist.ProcessGroup, dist.ProcessGroup]:
    """Two nccl groups over ``group``'s ranks: bodies to a higher rank, bodies to a lower one (made
    by every rank of the default group alike, as ``new_group`` requires)."""
    ranks = None if group is None else dist.get_process_group_ranks(group)
    return dist.new_group(ranks, backend="nccl"), dist.new_group(ranks, backend="nccl")


def _on(payload: Payload, device: torch.device) -> Payload:
    """``payload`` with its tensors on ``device`` (the same object where they are there already)."""
    if all(t.device == device for t in payload.tensors.values()):
        return payload
    tensors = {k: t.to(device) for k, t in payload.tensors.items()}
    return Payload(tensors, payload.numel, payload.header, payload.header_bytes)


class _Sent(SendHandle):
    def __init__(self, works: list, keep: list[torch.Tensor]) -> None:
        self.works, self.keep = works, keep  # the tensors stay alive until the sends complete

    def wait(self) -> None:
        for w in self.works:
            w.wait()
        self.works, self.keep = [], []


class _Recv(RecvHandle):
    """A receive of a framed payload; with ``like`` (the layout of a repeating transfer, seen
    before) head and body arrive as one message, posted at once. ``remember``: the transfer's key
    in the transport's layouts, noted on arrival."""

    def __init__(
        self, transport: GlooTransport, src: int, like: Payload | None, remember: Hashable | None
    ) -> None:
        super().__init__(transport._queue(src))
        self.transport, self.src, self.remember = transport, src, remember
        self.head = self.head_work = None
        self.layout = framing.layout_of(like) if like is not None else None
        self.bodies: list[torch.Tensor] = []
        self.body_works: list = []
        if self.layout is not None:  # head and body in one message, on the body tag (host wires only)
            sizes = framing.body_sizes(self.layout)
            message = torch.empty(framing.HEAD_BYTES + sum(sizes), dtype=torch.uint8)
            self.head, self.bodies = (
                message[: framing.HEAD_BYTES],
                [message[framing.HEAD_BYTES :]] if sizes else [],
            )
            self.head_work = transport._post_recv(message, src, transport.tag_body)
            return
        self.head = torch.empty(framing.HEAD_BYTES, dtype=torch.uint8)
        self.head_work = transport._post_recv(self.head, src, transport.tag_head)

    def _post_bodies(self, buffers: list[torch.Tensor]) -> None:
        t = self.transport
        self.bodies = buffers
        self.body_works = [t._post_recv(b, self.src, t.tag_body) for b in buffers]

    def _complete(self) -> Payload:
        frame = self._frame()
        for w in self.body_works:
            w.wait()
        t = self.transport
        payload = _on(framing.assemble(frame, self.bodies, t.wire), t.device)
        if self.remember is not None:
            t.layouts.received(self.remember, payload)
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
            self._post_bodies(framing.alloc_bodies(frame.layout, t.wire))
        elif frame.layout != self.layout:
            raise RuntimeError(
                f"rank {t.rank}: payload from {self.src} has layout {frame.layout}, expected {self.layout}"
            )
        return frame


class _Arrived:
    """A receive already waited for."""

    def wait(self) -> None:
        return None


class _RecvAny(_Recv):
    """A framed payload from whichever source's head arrives first (``recv_anysource`` on the head
    tag); its overflow and body then come from that source, as for :class:`_Recv`."""

    def __init__(self, transport: GlooTransport) -> None:
        head = torch.empty(framing.HEAD_BYTES, dtype=torch.uint8)
        work = transport._pg.recv_anysource([head], transport.tag_head)
        work.wait()
        src = framing.head_source(head)  # the sender names itself (gloo's source_rank is deprecated)
        RecvHandle.__init__(self, transport._queue(src))
        self.transport, self.src, self.remember = transport, src, None
        self.head, self.head_work, self.layout = head, _Arrived(), None  # gloo's wait() must not run twice
        self.bodies, self.body_works = [], []


class _RecvValues(RecvHandle):
    """A receive of one agreed tensor, posted straight into its destination (no frame), or into a
    copy on the wire device where the destination is elsewhere; on a throttled transport its stamp
    comes first, on a tag of its own."""

    def __init__(
        self, transport: GlooTransport, src: int, into: torch.Tensor, numel: int, meta: Transfer
    ) -> None:
        super().__init__(transport._queue(src))
        self.transport, self.src, self.values, self.numel, self.meta = transport, src, into, numel, meta
        self.posted_at = time.time()
        self.stamp = self.joined = None
        self.wired = into  # where the body is received (a host copy of ``into`` on a host wire)
        if transport.clock is not None and _joined(into.numel() * into.element_size()):
            self.joined = torch.empty(_STAMP_BYTES + into.numel() * into.element_size(), dtype=torch.uint8)
            self.work = transport._post_recv(self.joined, src, transport.tag_stamp)
            return
        if transport.clock is not None:
            self.stamp = torch.empty(2, dtype=torch.float64)
            self.stamp_work = transport._post_recv(self.stamp, src, transport.tag_stamp)
        if into.device != transport.wire:
            self.wired = torch.empty_like(into, device=transport.wire)
        self.work = transport._post_recv(self.wired, src, transport.tag_body)

    def _complete(self) -> Payload:
        self.work.wait()
        if self.wired is not self.values:
            self.values.copy_(self.wired)
        payload = Payload({"values": self.values}, self.numel)
        t = self.transport
        if self.joined is not None:  # stamp, then the body, copied into place
            self.values.view(-1).view(torch.uint8).copy_(self.joined[_STAMP_BYTES:])
            self.stamp = self.joined[:_STAMP_BYTES].view(torch.float64)
        elif self.stamp is not None:
            self.stamp_work.wait()
        if self.stamp is None:  # nothing to pace: the records time it from the posted receive
            sent_at, not_before = self.posted_at, time.time()
        else:
            t.log.frame_bytes += _STAMP_BYTES
            sent_at, not_before = self.stamp.tolist()
        t._deliver(self.src, payload, self.meta, sent_at, not_before)
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
        Preferred pipeline piece size for exchanges. The default, 64 MiB
        (``segments.LOOPBACK_SEGMENT_BYTES``), sends most chunks whole: on a loopback with more
        processes than cores every message costs the peer a wake-up, and few large pieces
        measured fastest. Between hosts, smaller pieces let encoding overlap the transfer:
        ``segments.segment_bytes_for(address)`` gives 256 KiB there.
    between_hosts : bool
        The peers are on other hosts (this rank's address is not loopback): see
        :attr:`Transport.between_hosts`.
    tag_base : int
        First of the four tags used (head, overflow, body, stamp); separate transports on one
        group need separate tag ranges.
    device : torch.device or str
        Where this rank's gradients live and received payloads are delivered (see
        :func:`wire_device` for where their bodies travel).
    """

    def __init__(
        self,
        group: dist.ProcessGroup | None = None,
        link: str | Link | None = None,
        throttle: bool = False,
        segment_bytes: int = LOOPBACK_SEGMENT_BYTES,
        tag_base: int = 0,
        between_hosts: bool = False,
        device: torch.device | str = "cpu",
    ) -> None:
        if not dist.is_initialized():
            raise RuntimeError("GlooTransport needs torch.distributed.init_process_group first")
        self.group = group
        super().__init__(dist.get_rank(group), dist.get_world_size(group), parse_link(link), throttle, device)
        self.wire = wire_device(group, self.device)
        self._directions = None if self.wire.type == "cpu" else _direction_groups(group)
        self.segment_bytes, self.between_hosts = segment_bytes, between_hosts
        self.tag_head, self.tag_overflow, self.tag_body = tag_base + 1, tag_base + 2, tag_base + 3
        self.tag_stamp = tag_base + 4
        # the process group itself: its send/recv take ranks within the group and skip the checks
        # of torch.distributed's wrappers, which cost more than a small message's bytes
        self._pg = group if group is not None else dist.group.WORLD
        self.layouts = LayoutMemory()  # of repeating transfers, by (peer, repeat)

    def _group_for(self, tensor: torch.Tensor, peer: int, sending: bool) -> dist.ProcessGroup:
        """The group a message travels in: host tensors in the transport's own (tagged), device
        bodies in the nccl group of their direction."""
        if self._directions is None or tensor.device.type == "cpu":
            return self._pg
        upward = peer > self.rank if sending else peer < self.rank
        return self._directions[0 if upward else 1]

    def _post_recv(self, tensor: torch.Tensor, src: int, tag: int):
        return self._group_for(tensor, src, False).recv([tensor], src, tag)

    def _post_send(self, tensor: torch.Tensor, dst: int, tag: int):
        self.log.wire_messages += 1
        return self._group_for(tensor, dst, True).send([tensor], dst, tag)

    def _send_body(self, body: torch.Tensor, dst: int, tag: int) -> tuple[object, torch.Tensor]:
        """Post ``body`` on the wire device (copied there where it lives elsewhere); returns the work
        and the tensor to keep alive until it completes."""
        wired = body if body.device == self.wire else body.to(self.wire)
        return self._post_send(wired, dst, tag), wired

    def _host_wire(self) -> bool:
        """Whether bodies travel as host tensors (then a head may share their message)."""
        return self.wire.type == "cpu"

    def isend(self, dst: int, payload: Payload, meta: Transfer, repeat: Hashable | None = None) -> SendHandle:
        self._check_peer(dst)
        joined = repeat is not None and self._host_wire() and self.layouts.joined((dst, repeat), payload)
        works, keep = [], []
        sent_at, not_before = self._stamp(payload.nbytes)
        head, overflow = framing.pack_head(payload, meta, sent_at, not_before, src=self.rank)
        if joined:  # one message: head, then the body (its bytes copied once, into place)
            bodies = [framing.joined_message(payload, head)]
        else:
            bodies = framing.body_views(payload)
            works.append(self._post_send(head, dst, self.tag_head))
            keep.append(head)
        if overflow is not None:
            works.append(self._post_send(overflow, dst, self.tag_overflow))
            keep.append(overflow)
        for body in bodies:
            work, wired = self._send_body(body, dst, self.tag_body)
            works.append(work)
            keep.append(wired)
        self.log.sent(payload.nbytes)
        return _Sent(works, keep)

    def irecv(self, src: int, repeat: Hashable | None = None) -> RecvHandle:
        key = None if repeat is None else (src, repeat)
        like = None if key is None or not self._host_wire() else self.layouts.expected(key)
        return _Recv(self, src, like, key)

    def recv_any(self, sources: range) -> tuple[int, Payload]:
        handle = _RecvAny(self)
        if handle.src not in sources:
            raise RuntimeError(f"rank {self.rank}: a message from {handle.src}, outside {sources}")
        return handle.src, handle.wait()

    def isend_values(self, dst: int, values: torch.Tensor, numel: int, meta: Transfer) -> SendHandle:
        self._check_peer(dst)
        nbytes = values.numel() * values.element_size()
        works, keep = [], [values]
        if self.clock is None:
            work, wired = self._send_body(values, dst, self.tag_body)
            works.append(work)
            keep.append(wired)
        elif _joined(nbytes):  # one message: the stamp the receiver paces this transfer by, the body
            message = torch.empty(_STAMP_BYTES + nbytes, dtype=torch.uint8)
            message[:_STAMP_BYTES] = torch.tensor(self._stamp(nbytes), dtype=torch.float64).view(torch.uint8)
            message[_STAMP_BYTES:] = values.reshape(-1).view(torch.uint8)
            works.append(self._post_send(message, dst, self.tag_stamp))
            keep.append(message)
        else:
            stamp = torch.tensor(self._stamp(nbytes), dtype=torch.float64)
            works.append(self._post_send(stamp, dst, self.tag_stamp))
            work, wired = self._send_body(values, dst, self.tag_body)
            works.append(work)
            keep += [stamp, wired]
        self.log.sent(nbytes)
        return _Sent(works, keep)

    def irecv_values(self, src: int, into: torch.Tensor, numel: int, meta: Transfer) -> RecvHandle:
        if not into.is_contiguous():
            raise ValueError(f"rank {self.rank}: a receive buffer must be contiguous")
        return _RecvValues(self, src, into, numel, meta)
