"""What every ring reducer shares: how a rank's values enter the sum (:class:`Weighting`), what a
reducer is given (:class:`Context`), a rank's share of a step (:class:`Reducer`) and the per-piece
arithmetic of a reduce-scatter (:class:`PieceReducer`).

A reducer is arithmetic only: it says what a rank sends first, what it forwards after adding its own
share at a hop, and what the chunk's owner makes of the full sum. It never moves a payload; a
schedule (``schedule.py``, ``allgather.py``) does the moving and calls it.
Sample counts travel inside the same payloads (``counts.py``): each rank adds its count to the
partial sum it forwards, so the owner of a chunk ends with the step's total and no separate round
of counts is needed.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...codecs import Codec
from ...codecs.base import ChunkKey, Payload
from ...memory import Memory
from ...memory.own import encode_own
from ..chunking import Piece

__all__ = ["FINAL_HOP", "Context", "KeyFn", "PieceReducer", "Reducer", "Weighting"]

KeyFn = Callable[[int, int], ChunkKey]  # (piece id, hop) -> codec key of this rank
FINAL_HOP = 1 << 16  # the hop in the key of an owner's final encoding: draws of its own


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


@dataclass(frozen=True)
class Context:
    """What a ring gives its reducer for one step.

    Attributes
    ----------
    codec : Codec
        The codec whose payloads travel.
    key : KeyFn
        ``key(piece id, hop)``: this rank's codec key of a piece.
    memory : Memory or None
        The memory around this rank's own share (``adass.memory``); None: none.
    workspace : callable or None
        ``workspace(size, device)``: a float32 buffer of ``size`` values on ``device`` (the
        gradient's) kept from step to step, for
        reducers that make partial sums in place; None where payloads travel by reference (in
        process), so partial sums must be new tensors.
    """

    codec: Codec
    key: KeyFn
    memory: Memory | None = None
    workspace: Callable[[int, torch.device], torch.Tensor] | None = None


class Reducer:
    """This rank's part of one ring step: its flat ``x``, how it is weighted, and the step's total
    once known. One object per step, built from a :class:`Context`; subclasses add the arithmetic
    their schedule asks for.

    Attributes
    ----------
    total : float or None
        The step's total count, once a final payload has shown it (None before, or unweighted).
    """

    spreads_nonfinite = False  # whether a NaN or Inf in any rank's x reaches every rank's result

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        self.codec, self.key, self.memory = ctx.codec, ctx.key, ctx.memory
        self.x, self.w = x, weighting
        self.total: float | None = None
        self._shares: dict[int, torch.Tensor] = {}

    def encode_own(self, values: torch.Tensor, pid: int, scale: torch.Tensor | None = None) -> Payload:
        """The codec payload of this rank's own ``values`` of piece ``pid`` (hop 0's key); with a
        memory, compensated and the memory updated."""
        return encode_own(self.codec, self.memory, values, self.key(pid, 0), scale)

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


class PieceReducer(Reducer, ABC):
    """Per-piece arithmetic of a ring reduce-scatter and all-gather, which the pipelined schedule
    (``schedule.reduce_pieces``) drives: prepare a piece, send it first, combine at each hop, finish
    as the owner, place a final."""

    agreed = False  # both sides know every payload's size: it travels as one bare tensor

    def warm(self, piece: Piece, out: torch.Tensor) -> None:
        """Work on ``piece`` that needs nothing from other ranks, done while transfers fly (``out``
        is the step's output, which may be the input: only a reducer done reading this rank's values
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

    # -- what receives may know in advance (``agreed`` reducers) --------------------------------
    def wire_numel(self, piece: Piece) -> int:
        """The dense length the travelling payloads of ``piece`` stand for (their ``numel``)."""
        return piece.numel

    def reduce_buffer(self, piece: Piece) -> torch.Tensor:
        """For an ``agreed`` reducer: the contiguous tensor a partial sum of ``piece`` is received
        into, posted early. (Other reducers' framed payloads are posted with the layouts the transport
        remembers from earlier steps.)"""
        raise NotImplementedError(f"{type(self).__name__} payloads are framed")

    def gather_buffer(self, piece: Piece, out: torch.Tensor) -> torch.Tensor:
        """As ``reduce_buffer``, for the final payloads of the all-gather."""
        raise NotImplementedError(f"{type(self).__name__} payloads are framed")
