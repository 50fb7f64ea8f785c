"""Sparsifiers: codecs that keep ``k`` of ``n`` values (random-k, top-k) and can hand the kept value
vector to another codec (``randk+qsgd``, see ``stack.py``).

A sparsifier splits a chunk into the kept values and the rest of its payload (indices, header);
``encode`` sends the values as float32, a stack sends them through an inner codec instead. With a
warm-up (``warmup.py``) the share kept follows the epoch an exchange sets (``set_epoch``).
"""

from __future__ import annotations

from abc import abstractmethod

import torch

from .base import Codec
from .chunks import ChunkKey, Payload, as_chunk
from .warmup import warmup_ratio

__all__ = ["Sparsifier", "kept_count"]


def kept_count(numel: int, ratio: float) -> int:
    """``round(ratio * numel)`` values, at least 1 when ``numel > 0`` and at most ``numel``."""
    if numel <= 0:
        return 0
    return min(numel, max(1, round(ratio * numel)))


class Sparsifier(Codec):
    """A codec that sends ``k`` values of a chunk; subclasses say which and how they are found.

    Wire layout of a plain sparsifier payload: ``values`` (float32, ``(k,)``) plus whatever
    ``split`` adds (``indices`` for top-k) and its header.
    """

    ratio: float  # the target share kept
    warmup: int = 0  # epochs of warm-up before ``ratio`` is reached
    epoch: int = 0  # the epoch of the next encodings (``set_epoch``)

    @property
    def current_ratio(self) -> float:
        """The share kept in the current epoch: ``ratio`` once the warm-up is over."""
        return warmup_ratio(self.ratio, self.warmup, self.epoch)

    def set_epoch(self, epoch: int) -> None:
        """Keep the share of ``epoch``'s warm-up from now on."""
        self.epoch = int(epoch)

    def k_for(self, numel: int) -> int:
        """Number of values kept from a chunk of ``numel`` in the current epoch."""
        return kept_count(numel, self.current_ratio)

    @abstractmethod
    def kept_indices(self, rest: Payload, k: int) -> torch.Tensor:
        """The sorted coordinates (int64) of the ``k`` values of a payload whose rest is ``rest``."""

    @property
    def sparse(self) -> Sparsifier:  # type: ignore[override]
        """Itself: a sparsifier tells which coordinates a payload sent."""
        return self

    def sent_coordinates(self, payload: Payload) -> torch.Tensor:
        """The coordinates whose values ``payload`` carries."""
        return self.kept_indices(self.rest_of(payload), payload.tensors["values"].numel())

    @property
    def values_as_sent(self) -> bool:
        """Whether decoding writes the kept values unchanged, each at its coordinate of
        ``sent_coordinates`` (no gain): then ``decode_sent`` is the values themselves."""
        return False

    def decode_sent(self, payload: Payload) -> torch.Tensor | None:
        """The kept values as float32, where ``values_as_sent``."""
        return payload.tensors["values"].to(torch.float32) if self.values_as_sent else None

    @abstractmethod
    def split(self, x: torch.Tensor, key: ChunkKey) -> tuple[torch.Tensor, Payload]:
        """The kept values ``(k,)`` and the payload without them (indices, header)."""

    @abstractmethod
    def expand(self, values: torch.Tensor, rest: Payload, out: torch.Tensor | None = None) -> torch.Tensor:
        """The dense ``(numel,)`` tensor that ``values`` and ``rest`` stand for; with ``out``, it is
        written there (zeros, then the values) instead of into a new tensor."""

    def scatter(self, values: torch.Tensor, rest: Payload, out: torch.Tensor) -> None:
        """:meth:`expand` into ``out`` that already holds zeros."""
        self.expand(values, rest, out=out)

    def encode(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None) -> Payload:
        """Keep ``k`` values of ``x`` and send them as float32 (``scale`` is not used)."""
        values, rest = self.split(as_chunk(x), key)
        return self.merge(values, rest)

    def merge(self, values: torch.Tensor, rest: Payload) -> Payload:
        """Put the kept values (float32) back into the payload."""
        tensors = {"values": values.to(torch.float32), **rest.tensors}
        return Payload(tensors, numel=rest.numel, header=dict(rest.header), header_bytes=rest.header_bytes)

    def rest_of(self, payload: Payload) -> Payload:
        """``payload`` without its ``values`` tensor."""
        tensors = {k: v for k, v in payload.tensors.items() if k != "values"}
        return Payload(tensors, payload.numel, dict(payload.header), payload.header_bytes)

    def decode(self, payload: Payload) -> torch.Tensor:
        """Scatter the kept values into a dense float32 chunk of zeros."""
        return self.expand(payload.tensors["values"].to(torch.float32), self.rest_of(payload))

    def decode_into(self, payload: Payload, out: torch.Tensor) -> None:
        """Zero ``out``, then scatter the kept values into it."""
        self.expand(payload.tensors["values"], self.rest_of(payload), out=out)

    def aligned(self, a: Payload, b: Payload) -> bool:
        """Whether two payloads keep the same coordinates (so their value vectors can be added)."""
        return False
