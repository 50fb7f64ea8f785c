"""How a ring reduces one piece, by codec kind: add raw fp32 values in place, add random-k's kept
values in place, add payloads directly, add integer codes under a shared scale, or
decode-add-re-encode (requantize) at every hop.

A policy says what a rank sends first, what it forwards after adding its own share at a hop, and
what the chunk's owner makes of the full sum; the ring schedule (``schedule.py``) does the moving.
Sample counts travel inside the same payloads (``counts.py``): each rank adds its count to the
partial sum it forwards, so the owner of a chunk ends with the step's total and no separate round
of counts is needed.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import torch

from ...codecs import Codec, ErrorFeedback, StackCodec
from ...codecs.base import ChunkKey, Payload
from ...codecs.randk import RandomK
from ..chunking import Piece
from ..counts import TAIL, read_tail, split_count, with_count, write_tail
from ..transport.bare import BareLayout

__all__ = [
    "CodecPolicy",
    "DenseAdd",
    "DirectAdd",
    "Policy",
    "Requantize",
    "SharedScale",
    "SparseAdd",
    "Weighting",
    "ring_plan",
]

KeyFn = Callable[[int, int], ChunkKey]  # (piece id, hop) -> codec key of this rank


def ring_plan(codec: Codec, strategy: str) -> str:
    """What the ring does with ``codec`` under ``strategy``: dense, sparse, add, shared, requantize
    or allgather.

    Summable codecs that need no scale (fp32/fp16/bf16, random-k) add directly under either strategy
    (lossless ones, fp32, as raw values summed in place: ``dense``; plain random-k as its kept
    values summed in place: ``sparse``), since there is nothing to agree on; quantizers requantize
    or share a scale; codecs that are neither (top-k) fall back to an all-gather of payloads.
    """
    if strategy == "allgather":
        return "allgather"
    if codec.summable and not codec.needs_shared_scale:
        if codec.lossless:
            return "dense"
        return "sparse" if type(codec) is RandomK else "add"
    if strategy == "shared_scale":
        return "shared"
    if codec.can_share_scale:
        return "requantize"
    return "allgather"


@dataclass(frozen=True)
class Weighting:
    """How this rank's values enter the sum, and the count that travels with them.

    Shares are ``x * count / hint``, where ``hint`` is a total every rank assumed before the step
    (the previous step's), so partial sums stay near the scale of the mean (fp16 keeps its range).
    The owner of a chunk learns the true ``total`` from the payloads and scales the sum by
    ``hint / total`` (nothing to do when the hint was right).

    Attributes
    ----------
    weight : float
        Multiplies this rank's values: ``count / hint``, or ``1 / P`` for equal weights.
    count : float or None
        This rank's count (on the grid of ``counts.grid_count``); None: equal weights, no count
        travels.
    hint : float
        The total the weights assumed.
    """

    weight: float
    count: float | None = None
    hint: float = 1.0

    def factor(self, total: float) -> float:
        """What the sum is multiplied by once the step's ``total`` is known (NaN if not positive)."""
        if self.count is None or total == self.hint:
            return 1.0
        return self.hint / total if total > 0 else math.nan


class Policy(ABC):
    """Per-piece arithmetic of a ring reduce-scatter over this rank's flat ``x``.

    Attributes
    ----------
    total : float or None
        The step's total count, once a final payload has shown it (None before, or unweighted).
    """

    agreed = False  # both sides know every payload's size: it travels as one bare tensor

    def __init__(self, codec: Codec, x: torch.Tensor, weighting: Weighting, key: KeyFn) -> None:
        self.codec, self.x, self.w, self.key = codec, x, weighting, key
        self.total: float | None = None
        self._shares: dict[int, torch.Tensor] = {}

    @property
    def counted(self) -> bool:
        return self.w.count is not None

    def share(self, piece: Piece) -> torch.Tensor:
        """This rank's weighted values of ``piece`` (a new tensor, computed once)."""
        if piece.pid not in self._shares:
            self._shares[piece.pid] = self.x[piece.lo : piece.hi] * self.w.weight
        return self._shares[piece.pid]

    def scales(self, pieces: list[Piece]) -> torch.Tensor | None:
        """This rank's scales to agree on before the first hop (None: nothing to agree)."""
        return None

    def agree(self, pieces: list[Piece], agreed: torch.Tensor) -> None:
        """Take the elementwise max over ranks of what ``scales`` returned."""
        return None

    def warm(self, piece: Piece, out: torch.Tensor) -> None:
        """Work on ``piece`` that needs nothing from other ranks, done while transfers fly (``out``
        is the step's output, which may be the input: only a policy done reading this rank's values
        of ``piece`` may write its part)."""
        return None

    @abstractmethod
    def first(self, piece: Piece) -> Payload:
        """What this rank sends for ``piece`` at hop 0: its own share (and count)."""

    @abstractmethod
    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        """The partial sum forwarded at ``hop``: ``received`` plus this rank's share (and count)."""

    def finish(self, piece: Piece, received: Payload | None, out: torch.Tensor) -> Payload:
        """The owner's final payload: the full sum, encoded once (``received`` is None for P = 1)."""
        return self.first(piece) if received is None else self.combine(piece, received, -1)

    @abstractmethod
    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        """Write the values of a final payload into ``out``, scaled to the step's total."""

    # -- what receives may know in advance (``agreed`` policies) --------------------------------
    def wire_numel(self, piece: Piece) -> int:
        """The dense length the travelling payloads of ``piece`` stand for (their ``numel``)."""
        return piece.numel

    def reduce_buffer(self, piece: Piece) -> torch.Tensor:
        """For an ``agreed`` policy: the contiguous tensor a partial sum of ``piece`` is received
        into, posted early. (Other policies' framed payloads are posted with the layouts the ring
        remembers from earlier steps.)"""
        raise NotImplementedError(f"{type(self).__name__} payloads are framed")

    def gather_buffer(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        """As ``reduce_buffer``, for the final payloads of the all-gather."""
        raise NotImplementedError(f"{type(self).__name__} payloads are framed")


class CodecPolicy(Policy):
    """Policies whose payloads come from the codec: the count travels beside the codec's header.

    Where the codec promises one layout and header per chunk length (``Codec.template``), every
    payload travels bare (``bare.py``): just the tensors' bytes, with the count in front, as an
    ``agreed`` transfer into a buffer posted early. Otherwise payloads are framed.
    """

    def __init__(self, codec: Codec, x: torch.Tensor, weighting: Weighting, key: KeyFn) -> None:
        super().__init__(codec, x, weighting, key)
        self._bare_layouts: dict[int, BareLayout | None] = {}

    @property
    def wire_codec(self) -> Codec:
        """The codec whose payloads travel."""
        return self.codec

    @cached_property
    def agreed(self) -> bool:  # type: ignore[override]
        return self._bare(0) is not None

    def _bare(self, numel: int) -> BareLayout | None:
        if numel not in self._bare_layouts:
            template = self.wire_codec.template(numel)
            self._bare_layouts[numel] = None if template is None else BareLayout(template, self.counted)
        return self._bare_layouts[numel]

    def _out(self, piece: Piece, payload: Payload, count: float | None) -> Payload:
        """What travels for a codec payload of ``piece`` and its partial count."""
        bare = self._bare(self.wire_numel(piece))
        if bare is not None:
            return bare.pack(payload, count)
        return with_count(payload, count) if self.counted else payload  # type: ignore[arg-type]

    def _in(self, piece: Piece, received: Payload) -> tuple[Payload, float | None]:
        """The codec payload and the partial count (None if unweighted) of what arrived."""
        bare = self._bare(self.wire_numel(piece))
        if bare is not None:
            return bare.unpack(received)
        return split_count(received) if self.counted else (received, None)

    @abstractmethod
    def _own(self, piece: Piece) -> Payload:
        """The codec payload of this rank's share of ``piece`` (hop 0)."""

    @abstractmethod
    def _add(self, piece: Piece, received: Payload, hop: int) -> Payload:
        """The codec payload of ``received`` plus this rank's share (``hop`` -1: the owner's final)."""

    def first(self, piece: Piece) -> Payload:
        return self._out(piece, self._own(piece), self.w.count)

    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        inner, count = self._in(piece, received)
        total = self._add(piece, inner, hop)
        return self._out(piece, total, None if count is None else count + self.w.count)

    def decode_into(self, piece: Piece, payload: Payload, dst: torch.Tensor) -> None:
        """The dense values of ``piece`` from a final codec payload (without the count), written
        into ``dst`` (the piece's part of the output)."""
        self.codec.decode_into(payload, dst)

    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        dst = out[piece.lo : piece.hi]
        inner, total = self._in(piece, payload)
        self.decode_into(piece, inner, dst)
        if total is not None:
            self.total = total
            factor = self.w.factor(total)
            if factor != 1.0:
                dst.mul_(factor)

    def reduce_buffer(self, piece: Piece) -> torch.Tensor:
        bare = self._bare(self.wire_numel(piece))
        if bare is None:
            return super().reduce_buffer(piece)
        return bare.empty(self.x.device)

    def gather_buffer(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        return self.reduce_buffer(piece)


class DirectAdd(CodecPolicy):
    """Summable codecs: each rank encodes its share once; payloads add along the ring."""

    def __init__(self, codec: Codec, x: torch.Tensor, weighting: Weighting, key: KeyFn) -> None:
        super().__init__(codec, x, weighting, key)
        self.own: dict[int, Payload] = {}

    def _encode(self, piece: Piece) -> Payload:
        return self.codec.encode_scaled(self.x[piece.lo : piece.hi], self.key(piece.pid, 0), self.w.weight)

    def _own(self, piece: Piece) -> Payload:
        if piece.pid not in self.own:
            self.own[piece.pid] = self._encode(piece)
        return self.own[piece.pid]

    def _add(self, piece: Piece, received: Payload, hop: int) -> Payload:
        return self.codec.add(received, self._own(piece))

    def warm(self, piece: Piece, out: torch.Tensor) -> None:
        self._own(piece)


class SharedScale(DirectAdd):
    """Quantizers in shared-scale mode: agree on the elementwise max scale, then codes add exactly.

    The ring gathers every rank's ``scales`` in one round, takes the max and hands it to ``agree``;
    each share is then encoded with its piece's agreed scale (when first needed, or by ``warm``).
    """

    def __init__(self, codec: Codec, x: torch.Tensor, weighting: Weighting, key: KeyFn) -> None:
        super().__init__(codec.with_shared_scale(), x, weighting, key)
        self.agreed_scale: dict[int, torch.Tensor] = {}
        self._sizes: list[int] = []

    def scales(self, pieces: list[Piece]) -> torch.Tensor | None:
        local = [self.codec.local_scale(self.share(p), self.key(p.pid, 0)).reshape(-1) for p in pieces]
        self._sizes = [s.numel() for s in local]
        return torch.cat(local).to(torch.float32) if local else torch.zeros(0)

    def agree(self, pieces: list[Piece], agreed: torch.Tensor) -> None:
        for p, scale in zip(pieces, agreed.split(self._sizes), strict=True):
            self.agreed_scale[p.pid] = scale

    def _encode(self, piece: Piece) -> Payload:
        return self.codec.encode(
            self.share(piece), self.key(piece.pid, 0), scale=self.agreed_scale[piece.pid]
        )


class Requantize(CodecPolicy):
    """Decode the partial sum, add this rank's share, re-encode for the next hop.

    For a stack ``randk+qsgd`` the ring works on the aligned k-value vector: shares are the kept
    values, the inner codec requantizes them, and only the final values are scattered back.
    With error feedback the share is the rank's own encoding (so the memory holds what was lost).
    """

    def __init__(self, codec: Codec, x: torch.Tensor, weighting: Weighting, key: KeyFn) -> None:
        super().__init__(codec, x, weighting, key)
        self.ef = isinstance(codec, ErrorFeedback)
        base = codec.inner if self.ef else codec
        self.stack = base if isinstance(base, StackCodec) else None
        if self.ef and self.stack is not None:
            raise TypeError(f"{codec.name}: error feedback around a stack cannot requantize in a ring")
        self.values_codec = self.stack.inner if self.stack is not None else base
        self.plain = self.stack is None and not self.ef  # the share is x * weight, added on the fly
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

    @property
    def wire_codec(self) -> Codec:
        return self.values_codec

    def wire_numel(self, piece: Piece) -> int:
        return piece.numel if self.stack is None else self.stack.outer.k_for(piece.numel)

    def warm(self, piece: Piece, out: torch.Tensor) -> None:
        if not self.plain:
            self._share(piece)

    def _own(self, piece: Piece) -> Payload:
        share = self._share(piece)
        if piece.pid in self.own:
            return self.own[piece.pid]
        return self.values_codec.encode(share, self.key(piece.pid, 0))

    def _add(self, piece: Piece, received: Payload, hop: int) -> Payload:
        total = self.values_codec.decode(received)  # a new tensor (the Codec.decode contract)
        if self.plain:
            total.add_(self.x[piece.lo : piece.hi], alpha=self.w.weight)
        else:
            total += self._share(piece)
        hop = hop if hop >= 0 else 1 << 16  # the owner's final encoding gets its own draws
        return self.values_codec.encode(total, self.key(piece.pid, hop))

    def decode_into(self, piece: Piece, payload: Payload, dst: torch.Tensor) -> None:
        if self.stack is None:
            self.values_codec.decode_into(payload, dst)
            return
        self._share(piece)  # the sparsifier's coordinates of this piece
        self.stack.outer.expand(self.values_codec.decode(payload), self.rest[piece.pid], out=dst)


class DenseAdd(Policy):
    """Lossless summable codecs (fp32): the float32 values travel as they are and partial sums are
    made in the received buffers, so no step copies more than it must.

    A partial sum of piece ``p`` is its ``p.numel`` values followed, when counts travel, by two
    float32 slots holding the partial count (``counts.TAIL``). With a ``workspace`` (float32, as long
    as ``x`` plus the tails of every piece, kept by the exchange from step to step), the first share
    and every partial sum of ``p`` live in one region of it (each chunk passes through a rank once
    per reduce-scatter), so a copying transport receives into memory that is already mapped. The
    owner's sum, scaled to the true total, is written straight into ``out``, and final payloads of
    other chunks, values only, are received into ``out`` too. Without a workspace (in process,
    where payloads travel by reference) partial sums are new tensors and the owner sends a copy of
    its values, so a caller changing its result cannot reach another rank's.
    """

    agreed = True

    def __init__(self, x: torch.Tensor, weighting: Weighting, workspace: torch.Tensor | None) -> None:
        super().__init__(None, x, weighting, lambda pid, hop: None)  # type: ignore[arg-type]
        self.workspace = workspace
        self.tail = TAIL if self.counted else 0

    @staticmethod
    def workspace_size(n: int, pieces: int, counted: bool) -> int:
        """Length of the workspace for ``n`` values in ``pieces`` pieces."""
        return n + (TAIL * pieces if counted else 0)

    def _len(self, piece: Piece) -> int:
        """How many values of ``piece`` travel."""
        return piece.numel

    def _mine(self, piece: Piece) -> torch.Tensor:
        """This rank's values of ``piece`` that travel (before weighting)."""
        return self.x[piece.lo : piece.hi]

    def _region(self, piece: Piece) -> torch.Tensor:
        """Where partial sums of ``piece`` (values, then the count's slots) are made."""
        if self.workspace is None:
            return torch.empty(self._len(piece) + self.tail, dtype=torch.float32)
        lo = piece.lo + self.tail * piece.pid
        return self.workspace[lo : lo + piece.numel + self.tail]

    def _final(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        """Where the final values of ``piece`` are made or received: its part of ``out``."""
        return out[piece.lo : piece.hi]

    def first(self, piece: Piece) -> Payload:
        m, buf = self._len(piece), self._region(piece)
        torch.mul(self._mine(piece), self.w.weight, out=buf[:m])
        if self.tail:
            write_tail(buf[m:], self.w.count)
        return Payload({"values": buf}, numel=piece.numel)

    def combine(self, piece: Piece, received: Payload, hop: int) -> Payload:
        m, values = self._len(piece), received.tensors["values"]
        values[:m].add_(self._mine(piece), alpha=self.w.weight)
        if self.tail:
            write_tail(values[m:], read_tail(values[m:]) + self.w.count)
        return received

    def finish(self, piece: Piece, received: Payload | None, out: torch.Tensor) -> Payload:
        m, dst = self._len(piece), self._final(piece, out)
        if received is None:
            total = self.w.count
            torch.mul(self._mine(piece), self.w.weight, out=dst)
        else:
            values = received.tensors["values"]
            total = read_tail(values[m:]) + self.w.count if self.tail else None
            torch.add(values[:m], self._mine(piece), alpha=self.w.weight, out=dst)
        if self.counted:
            self.total = total
            factor = self.w.factor(total)
            if factor != 1.0:
                dst.mul_(factor)
        return Payload({"values": dst.clone() if self.workspace is None else dst}, numel=piece.numel)

    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        dst, values = out[piece.lo : piece.hi], payload.tensors["values"]
        if values.data_ptr() != dst.data_ptr() or values.numel() != dst.numel():
            dst.copy_(values)

    def reduce_buffer(self, piece: Piece) -> torch.Tensor:
        return self._region(piece)

    def gather_buffer(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        return self._final(piece, out)


class SparseAdd(DenseAdd):
    """Plain random-k: every rank keeps the same ``k`` coordinates of a piece (they follow from the
    chunk key), so the kept values line up and the ring reduces them as :class:`DenseAdd` reduces
    dense values. Only the ``k`` float32 values travel (and, with counts, the two slots of
    ``counts.TAIL``): the receiver derives the coordinates itself, so no header is needed.

    The owner's final is the sum scaled to the true total (so finals need no count); every rank
    scatters a final into its part of ``out`` with the codec's ``n/k`` gain, which is the codec's
    own decode. With a ``workspace`` (float32, :meth:`sparse_workspace_size` values, kept by the
    exchange), partial sums live in one region per piece and finals in another; without one (in
    process) they are new tensors.
    """

    def __init__(self, codec: RandomK, x: torch.Tensor, weighting: Weighting, key: KeyFn,
                 pieces: list[Piece], workspace: torch.Tensor | None) -> None:  # fmt: skip
        super().__init__(x, weighting, workspace)
        self.codec, self.key = codec, key
        self.kept = {p.pid: codec.k_for(p.numel) for p in pieces}
        self._offsets: dict[int, tuple[int, int]] = {}
        at, final = 0, sum(self.kept.values()) + self.tail * len(pieces)
        for p in pieces:  # partial sums first, then the finals
            self._offsets[p.pid] = (at, final)
            at, final = at + self.kept[p.pid] + self.tail, final + self.kept[p.pid]
        self._values: dict[int, torch.Tensor] = {}
        self._rest: dict[int, Payload] = {}
        self._cleared: set[int] = set()

    @staticmethod
    def sparse_workspace_size(codec: RandomK, pieces: list[Piece], counted: bool) -> int:
        """Length of the workspace for ``pieces``: every piece's partial sum and final."""
        return 2 * sum(codec.k_for(p.numel) for p in pieces) + (TAIL * len(pieces) if counted else 0)

    def _len(self, piece: Piece) -> int:
        return self.kept[piece.pid]

    def _mine(self, piece: Piece) -> torch.Tensor:
        """This rank's values at the piece's shared coordinates (drawn once per piece)."""
        pid = piece.pid
        if pid not in self._values:
            self._values[pid], self._rest[pid] = self.codec.split(self.x[piece.lo : piece.hi], self.key(pid, 0))
        return self._values[pid]

    def warm(self, piece: Piece, out: torch.Tensor) -> None:
        """Draw the piece's coordinates and take its kept values; then its part of ``out``, no
        longer read, is cleared for the final's scatter."""
        self._mine(piece)
        if piece.pid not in self._cleared:
            out[piece.lo : piece.hi].zero_()
            self._cleared.add(piece.pid)

    def _region(self, piece: Piece) -> torch.Tensor:
        if self.workspace is None:
            return super()._region(piece)
        lo = self._offsets[piece.pid][0]
        return self.workspace[lo : lo + self.kept[piece.pid] + self.tail]

    def _final(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        if self.workspace is None:
            return torch.empty(self.kept[piece.pid], dtype=torch.float32)
        lo = self._offsets[piece.pid][1]
        return self.workspace[lo : lo + self.kept[piece.pid]]

    def place(self, piece: Piece, payload: Payload, out: torch.Tensor) -> None:
        self.warm(piece, out)  # the coordinates' key, and zeros where nothing is kept
        self.codec.scatter(payload.tensors["values"], self._rest[piece.pid], out[piece.lo : piece.hi])
