"""Wire framing for real transports: a fixed 256-byte head, an optional overflow, then one body.

Head layout: ``b"AX"``, version (uint8), a zero byte, descriptor length ``L`` (uint32 little-endian),
then the first ``min(L, 248)`` bytes of the descriptor; a longer descriptor continues in one
overflow message of ``L - 248`` bytes. The descriptor is compact JSON: ``n`` numel, ``hb`` header
bytes, ``h`` the codec header, ``t`` ``[name, dtype, shape]`` per tensor, ``m`` the transfer
(phase, hop, chunk, step, epoch, raw bytes or -1) and ``ts`` (send time, release time). The
non-empty tensors then follow as one body message: their bytes in descriptor order, each starting
at a multiple of 8 bytes (a single tensor travels as it is, without a copy). One body per payload
keeps the number of messages, which cost far more than their bytes on a loopback, at two.
"""

from __future__ import annotations

import functools
import json
import struct
from dataclasses import dataclass
from typing import Any

import torch

from ...codecs.base import Payload
from .base import Transfer

__all__ = [
    "HEAD_BYTES", "Frame", "Layout", "alloc_bodies", "assemble", "body_sizes", "body_views", "joined_message",
    "head_source", "layout_of", "overflow_bytes", "pack_head", "padding_bytes", "unpack_head",
]  # fmt: skip

HEAD_BYTES = 256
_MAGIC, _VERSION = b"AX", 3
_ALIGN = 8  # every tensor of a packed body starts at a multiple of this many bytes
_PREFIX = struct.Struct("<2sBxIi")  # magic, version, descriptor length, sender rank (-1: unnamed)
_INLINE = HEAD_BYTES - _PREFIX.size

Layout = list[tuple[str, str, list[int]]]  # (name, dtype name, shape) per tensor


@dataclass
class Frame:
    """A parsed descriptor: everything about a payload except its tensor bytes."""

    numel: int
    header_bytes: int
    header: dict[str, Any]
    layout: Layout
    meta: Transfer
    sent_at: float
    not_before: float


def layout_of(payload: Payload) -> Layout:
    """Names, dtypes and shapes of the payload's tensors, in their order."""
    return [(k, str(t.dtype).removeprefix("torch."), list(t.shape)) for k, t in payload.tensors.items()]


def pack_head(
    payload: Payload, meta: Transfer, sent_at: float, not_before: float, src: int = -1
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The 256-byte head (uint8) and the overflow message, if the descriptor needs one. ``src``,
    the sender's rank, lets a receive from any source tell who sent the frame."""
    raw = -1 if meta.raw_bytes is None else meta.raw_bytes
    descriptor = {
        "n": payload.numel, "hb": payload.header_bytes, "h": payload.header, "t": layout_of(payload),
        "m": [meta.phase, meta.hop, meta.chunk, meta.step, meta.epoch, raw], "ts": [sent_at, not_before],
    }  # fmt: skip
    try:
        text = json.dumps(descriptor, separators=(",", ":")).encode()
    except TypeError as err:
        raise TypeError(f"payload header cannot travel (JSON values only): {payload.header!r}") from err
    head = bytearray(HEAD_BYTES)
    _PREFIX.pack_into(head, 0, _MAGIC, _VERSION, len(text), src)
    head[_PREFIX.size : _PREFIX.size + min(len(text), _INLINE)] = text[:_INLINE]
    overflow = text[_INLINE:]
    over = torch.frombuffer(bytearray(overflow), dtype=torch.uint8) if overflow else None
    return torch.frombuffer(head, dtype=torch.uint8), over


def overflow_bytes(head: torch.Tensor) -> int:
    """How many descriptor bytes follow in an overflow message (0 for most payloads)."""
    magic, version, length, _ = _PREFIX.unpack_from(head.numpy().tobytes(), 0)
    if magic != _MAGIC or version != _VERSION:
        raise RuntimeError(f"not an adass frame (magic {magic!r}, version {version})")
    return max(0, length - _INLINE)


def head_source(head: torch.Tensor) -> int:
    """The sender's rank written into a head by :func:`pack_head` (-1 where it named none)."""
    return _PREFIX.unpack_from(head.numpy().tobytes(), 0)[3]


def unpack_head(head: torch.Tensor, overflow: torch.Tensor | None = None) -> Frame:
    """Parse a head (and its overflow) into a Frame."""
    data = head.numpy().tobytes()
    _, _, length, _ = _PREFIX.unpack_from(data, 0)
    text = data[_PREFIX.size : _PREFIX.size + min(length, _INLINE)]
    if overflow is not None:
        text += overflow.numpy().tobytes()
    d = json.loads(text)
    phase, hop, chunk, step, epoch, raw = d["m"]
    meta = Transfer(phase, hop, chunk, step, epoch, None if raw < 0 else raw)
    layout = [(name, dtype, list(shape)) for name, dtype, shape in d["t"]]
    return Frame(d["n"], d["hb"], d["h"], layout, meta, d["ts"][0], d["ts"][1])


def _spans(layout: Layout) -> list[tuple[int, int]]:
    """``(offset, nbytes)`` in the body of each non-empty tensor of ``layout``, in order."""
    spans, end = [], 0
    for _, dtype, shape in layout:
        nbytes = _numel(shape) * _itemsize(dtype)
        if nbytes:
            offset = -(-end // _ALIGN) * _ALIGN
            spans.append((offset, nbytes))
            end = offset + nbytes
    return spans


def body_views(payload: Payload) -> list[torch.Tensor]:
    """The payload's body as a list of at most one flat uint8 tensor: a view of its only non-empty
    tensor, or its non-empty tensors packed into one new buffer."""
    views = _flat_views(payload)
    if len(views) <= 1:
        return views
    return [_pack(payload, views)]


def joined_message(payload: Payload, head: torch.Tensor) -> torch.Tensor:
    """``head`` followed by the payload's body, as one new uint8 buffer: the body's bytes are
    copied once, straight into place."""
    return _pack(payload, _flat_views(payload), head)


def _flat_views(payload: Payload) -> list[torch.Tensor]:
    return [
        t.detach().contiguous().reshape(-1).view(torch.uint8) for t in payload.tensors.values() if t.numel()
    ]


def _pack(payload: Payload, views: list[torch.Tensor], head: torch.Tensor | None = None) -> torch.Tensor:
    """``head`` (if any) and then the body of ``payload`` (``views``, its flat non-empty tensors)."""
    start = 0 if head is None else head.numel()
    spans = _spans(layout_of(payload)) if views else []
    size = spans[-1][0] + spans[-1][1] if spans else 0
    # a message with its head is for the host; a body alone stays where its tensors are
    device = head.device if head is not None or not views else views[0].device
    message = torch.empty(start + size, dtype=torch.uint8, device=device)
    if head is not None:
        message[:start] = head
    end = 0
    for (offset, nbytes), view in zip(spans, views, strict=True):
        message[start + end : start + offset] = 0  # padding
        message[start + offset : start + offset + nbytes] = view
        end = offset + nbytes
    return message


def body_sizes(layout: Layout) -> list[int]:
    """Byte size of the body message of ``layout`` (an empty list where it has no bytes)."""
    spans = _spans(layout)
    return [spans[-1][0] + spans[-1][1]] if spans else []


def padding_bytes(layout: Layout) -> int:
    """Bytes the body of ``layout`` spends on alignment between its tensors."""
    return sum(body_sizes(layout)) - sum(nbytes for _, nbytes in _spans(layout))


def alloc_bodies(layout: Layout, device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """An empty uint8 buffer on ``device`` for the body message of ``layout`` (none where it has no
    bytes)."""
    return [torch.empty(size, dtype=torch.uint8, device=device) for size in body_sizes(layout)]


def assemble(frame: Frame, buffers: list[torch.Tensor], device: torch.device | str = "cpu") -> Payload:
    """The Payload of ``frame`` from its received body (its tensors are views of the body; empty
    ones are made on ``device``, the body's)."""
    tensors, spans = {}, iter(_spans(frame.layout))
    for name, dtype, shape in frame.layout:
        kind = getattr(torch, dtype)
        if _numel(shape):
            offset, nbytes = next(spans)
            tensors[name] = buffers[0][offset : offset + nbytes].view(kind).reshape(shape)
        else:
            tensors[name] = torch.empty(shape, dtype=kind, device=device)
    return Payload(tensors, frame.numel, frame.header, frame.header_bytes)


@functools.cache
def _itemsize(dtype: str) -> int:
    """Bytes per element of the torch dtype named ``dtype`` (looked up once per name)."""
    return torch.empty(0, dtype=getattr(torch, dtype)).element_size()


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
