"""How a ring reduces one piece, by codec kind: add payloads directly, add integer codes under a
shared scale, or decode-add-re-encode (requantize) at every hop.

A policy says what a rank sends first, what it forwards after adding its own share at a hop, and
what the chunk's owner makes of the full sum; the ring schedule (``ring.py``) does the moving.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch

from ..codecs import Codec, ErrorFeedback, StackCodec
from ..codecs.base import ChunkKey, Payload
from .chunking import Piece

__all__ = ["DenseAdd", "DirectAdd", "FloatMerge", "Policy", "Requantize", "SharedScale", "ring_plan"]

KeyFn = Callable[[int, int], ChunkKey]  # (piece id, hop) -> codec key of this rank


def ring_plan(codec: Codec, strategy: str) -> str:
    """What the ring does with ``codec`` under ``strategy``: add, shared, requantize or allgather.

    Summable codecs add directly (lossless ones, fp32, as raw values summed in place: ``dense``);
    quantizers requantize or share a scale; codecs that are neither (top-k) fall back to an
    all-gather of payloads.
    """
    if strategy in ("allgather", "shared_scale"):
        return "allgather" if strategy == "allgather" else "shared"
    if codec.summable and not codec.needs_shared_scale:
        return "dense" if codec.lossless else "add"
    if codec.can_share_scale:
        return "requantize"
    return "allgather"


class Policy(ABC):
    """Per-piece arithmetic of a ring reduce-scatter over this rank's flat ``x`` times ``weight``."""

    def __init__(self, codec: Codec, x: torch.Tensor, weight: float, key: KeyFn) -> None:
        self.codec, self.x, self.weight, self.key = codec, x, weight, key
        self._shares: dict[int, torch.Tensor] = {}

    def share(self, piece: Piece) -> torch.Tensor:
        """This rank's weighted values of ``piece`` (a new tensor, computed once)."""
        if piece.pid not in self._shares:
            self._shares[piece.pid] = self.x[piece.lo : piece.hi] * self.weight
        return self._shares[piece.pid]

    def prepare(self, pieces: list[Piece]) -> None:
        """Work before the first hop (agreeing on scales)."""
        return None

    @abstractmethod
    def first(self, piece: Piece) -> Payload:
        """What this rank sends for ``piece`` at hop 0: its own share."""

    @abstractmethod
    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        """The partial sum forwarded at ``hop``: ``received`` plus this rank's share."""

    def finish(self, piece: Piece, received: Payload | None, out: torch.Tensor) -> Payload:
        """The owner's final payload: the full sum, encoded once (``received`` is None for P = 1)."""
        return self.first(piece) if received is None else self.combine(piece, received, -1)

    def decode(self, piece: Piece, payload: Payload) -> torch.Tensor:
        """Dense float32 values of ``piece`` from a final payload."""
        return self.codec.decode(payload)

    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        """Write the values of a final payload into ``out``."""
        out[piece.lo : piece.hi] = self.decode(piece, payload)

    def like(self, piece: Piece) -> Payload | None:
        """A payload laid out like every one that travels for ``piece`` (lets transports post
        buffers early), or None where layouts change along the ring."""
        return None

    agreed = False  # payloads are fully described by ``like`` (no header): they may travel unframed

    def reduce_buffer(self, piece: Piece) -> list[torch.Tensor] | None:
        """Buffers a partial sum of ``piece`` may be received into (None: the transport's own)."""
        return None

    def gather_buffer(self, piece: Piece, out: torch.Tensor) -> list[torch.Tensor] | None:
        """Buffers a final payload of ``piece`` may be received into (None: the transport's own)."""
        return None


class DirectAdd(Policy):
    """Summable codecs: each rank encodes its share once; payloads add along the ring."""

    def __init__(self, codec: Codec, x: torch.Tensor, weight: float, key: KeyFn) -> None:
        super().__init__(codec, x, weight, key)
        self.own: dict[int, Payload] = {}

    def _own(self, piece: Piece) -> Payload:
        if piece.pid not in self.own:
            self.own[piece.pid] = self.codec.encode(self.share(piece), self.key(piece.pid, 0))
        return self.own[piece.pid]

    def first(self, piece: Piece) -> Payload:
        return self._own(piece)

    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        return self.codec.add(received, self._own(piece))

    def like(self, piece: Piece) -> Payload | None:
        return self._own(piece) if self.codec.fixed_size else None


class SharedScale(DirectAdd):
    """Quantizers in shared-scale mode: agree on the elementwise max scale, then codes add exactly.

    ``agree`` takes this rank's concatenated local scales and returns the max over all ranks
    (the ring runs it as an all-reduce of its own, phase ``scale``).
    """

    def __init__(self, codec: Codec, x: torch.Tensor, weight: float, key: KeyFn,
                 agree: Callable[[torch.Tensor], torch.Tensor]) -> None:  # fmt: skip
        super().__init__(codec.with_shared_scale(), x, weight, key)
        self.agree = agree

    def prepare(self, pieces: list[Piece]) -> None:
        scales = [self.codec.local_scale(self.share(p), self.key(p.pid, 0)).reshape(-1) for p in pieces]
        sizes = [s.numel() for s in scales]
        cat = torch.cat(scales) if scales else torch.zeros(0)
        shared = self.agree(cat.to(torch.float32)).split(sizes)
        for p, scale in zip(pieces, shared, strict=True):
            self.own[p.pid] = self.codec.encode(self.share(p), self.key(p.pid, 0), scale=scale)

    def like(self, piece: Piece) -> Payload | None:
        return None  # sums of codes grow wider along the ring


class Requantize(Policy):
    """Decode the partial sum, add this rank's share, re-encode for the next hop.

    For a stack ``randk+qsgd`` the ring works on the aligned k-value vector: shares are the kept
    values, the inner codec requantizes them, and only the final values are scattered back.
    With error feedback the share is the rank's own encoding (so the memory holds what was lost).
    """

    def __init__(self, codec: Codec, x: torch.Tensor, weight: float, key: KeyFn) -> None:
        super().__init__(codec, x, weight, key)
        self.ef = isinstance(codec, ErrorFeedback)
        base = codec.inner if self.ef else codec
        self.stack = base if isinstance(base, StackCodec) else None
        if self.ef and self.stack is not None:
            raise TypeError(f"{codec.name}: error feedback around a stack cannot requantize in a ring")
        self.values_codec = self.stack.inner if self.stack is not None else base
        self.values: dict[int, torch.Tensor] = {}
        self.rest: dict[int, Payload] = {}
        self.own: dict[int, Payload] = {}

    def _share(self, piece: Piece) -> torch.Tensor:
        """What this rank adds at each hop: its values (the kept ones for a stack)."""
        pid = piece.pid
        if pid not in self.values:
            if self.stack is not None:
                self.values[pid], self.rest[pid] = self.stack.outer.split(self.share(piece), self.key(pid, 0))
            elif self.ef:
                self.own[pid] = self.codec.encode(self.share(piece), self.key(pid, 0))
                self.values[pid] = self.codec.decode(self.own[pid])
            else:
                self.values[pid] = self.share(piece)
        return self.values[pid]

    def first(self, piece: Piece) -> Payload:
        share = self._share(piece)
        if piece.pid in self.own:
            return self.own[piece.pid]
        return self.values_codec.encode(share, self.key(piece.pid, 0))

    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        total = self.values_codec.decode(received) + self._share(piece)
        hop = hop if hop >= 0 else 1 << 16  # the owner's final encoding gets its own draws
        return self.values_codec.encode(total, self.key(piece.pid, hop))

    def decode(self, piece: Piece, payload: Payload) -> torch.Tensor:
        values = self.values_codec.decode(payload)
        if self.stack is None:
            return values
        self._share(piece)
        return self.stack.outer.expand(values, self.rest[piece.pid])


class DenseAdd(Policy):
    """Lossless summable codecs (fp32): the float32 values travel as they are and partial sums are
    made in the received buffers, so no step copies more than it must.

    With a ``workspace`` (a float32 tensor as long as ``x``, kept by the exchange from step to
    step), the first share and every partial sum of piece ``p`` live in ``workspace[p.lo:p.hi]``
    (each chunk passes through a rank once per reduce-scatter), so a copying transport receives
    into memory that is already mapped. The owner's sum is written straight into ``out``, and final
    payloads of other chunks are received into ``out`` too. Without a workspace (in process,
    where payloads travel by reference) shares are new tensors and the owner sends a copy of its
    values, so a caller changing its result cannot reach another rank's.
    """

    agreed = True

    def __init__(self, x: torch.Tensor, weight: float, workspace: torch.Tensor | None) -> None:
        super().__init__(None, x, weight, lambda pid, hop: None)  # type: ignore[arg-type]
        self.workspace = workspace

    def _mine(self, piece: Piece) -> torch.Tensor:
        return self.x[piece.lo : piece.hi]

    def first(self, piece: Piece) -> Payload:
        if self.workspace is None:
            return _dense(self._mine(piece) * self.weight)
        return _dense(torch.mul(self._mine(piece), self.weight, out=self.workspace[piece.lo : piece.hi]))

    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        received.tensors["values"].add_(self._mine(piece), alpha=self.weight)
        return received

    def finish(self, piece: Piece, received: Payload | None, out: torch.Tensor) -> Payload:
        dst = out[piece.lo : piece.hi]
        if received is None:
            torch.mul(self._mine(piece), self.weight, out=dst)
        else:
            torch.add(received.tensors["values"], self._mine(piece), alpha=self.weight, out=dst)
        return _dense(dst.clone() if self.workspace is None else dst)

    def decode(self, piece: Piece, payload: Payload) -> torch.Tensor:
        return payload.tensors["values"]

    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        dst, values = out[piece.lo : piece.hi], payload.tensors["values"]
        if values.data_ptr() != dst.data_ptr() or values.numel() != dst.numel():
            dst.copy_(values)

    def like(self, piece: Piece) -> Payload | None:
        return _dense(torch.empty(1).expand(piece.numel))  # layout only: no memory

    def reduce_buffer(self, piece: Piece) -> list[torch.Tensor] | None:
        return None if self.workspace is None else [self.workspace[piece.lo : piece.hi]]

    def gather_buffer(self, piece: Piece, out: torch.Tensor) -> list[torch.Tensor] | None:
        return [out[piece.lo : piece.hi]]


class FloatMerge(DenseAdd):
    """Float32 control vectors merged elementwise (``torch.maximum`` to agree on scales)."""

    def __init__(self, x: torch.Tensor, merge: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        super().__init__(x, 1.0, workspace=None)
        self.merge = merge

    def first(self, piece: Piece) -> Payload:
        return _dense(self._mine(piece).clone())

    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        return _dense(self.merge(received.tensors["values"], self._mine(piece)))

    def finish(self, piece: Piece, received: Payload | None, out: torch.Tensor) -> Payload:
        merged = self.first(piece) if received is None else self.combine(piece, received, -1)
        out[piece.lo : piece.hi] = merged.tensors["values"]
        return merged


def _dense(values: torch.Tensor) -> Payload:
    """Float32 values as a payload (the layout of fp32: one ``values`` tensor, no header)."""
    return Payload({"values": values}, numel=values.numel())
