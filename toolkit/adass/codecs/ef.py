"""Error feedback around any codec: ``ef(SPEC)`` compensates each chunk with the residual of the
last encoding of that chunk, so what a lossy codec drops is sent later instead of lost.

The wrapper keeps the inner codec's wire format and capabilities. ``encode`` compensates, encodes
and updates the memory in one call, which is right for a worker's *own* chunk. An exchange takes
the two apart (``error_feedback()``): it keeps the memory around its own share and moves the inner
codec's payloads, so partial sums it re-encodes never touch the memory.

The residual stays bounded only for a contractive codec (``||C(x) - x|| < ||x||``): top-k, random-k
with ``scale=false`` (Stich, Cordonnier and Jaggi, "Sparsified SGD with Memory", NeurIPS 2018), QSGD
with enough bits. Unbiased but high-variance codecs (1-bit QSGD, random-k scaled by ``n/k``) make it
grow without bound; a codec that declares itself not contractive (``Codec.contractive``, random-k
with ``scale=true``) is refused with a SpecError. The wrapper encodes with the inner codec's
``under_memory()`` variant: QSGD's ``rounding=auto`` rounds to the nearest level here (Seide et al.'s
1-bit SGD and Karimireddy et al.'s EF-SGD pair a deterministic quantizer with the memory too).
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import SpecError
from .base import ChunkKey, Codec, Payload
from .memory import Memory

__all__ = ["ErrorFeedback"]


class ErrorFeedback(Codec):
    """Wrap ``inner`` with a residual :class:`Memory`.

    Parameters
    ----------
    inner : Codec
        The codec that does the encoding.
    memory : Memory, optional
        Residual store; a new empty one by default, with the inner codec's kernels.

    Raises
    ------
    SpecError
        ``inner`` is not contractive (random-k with ``scale=true``).
    """

    wrapper = "ef"  # the name of the spec's wrapper: ef(SPEC)
    memory_type: type[Memory] = Memory  # what a new wrapper's memory is: plain residuals here

    def __init__(self, inner: Codec, memory: Memory | None = None) -> None:
        self.name = f"{self.wrapper}({inner.name})"
        if not inner.contractive:
            raise SpecError(
                f"codec {self.name!r}: {inner.name!r} is not contractive (random-k's n/k gain), so the "
                "error-feedback residual grows without bound; use scale=false"
            )
        super().__init__(inner.kernels)
        self.inner = inner.under_memory()
        self.memory = memory if memory is not None else self.memory_type(kernels=self.kernels)
        self.summable = inner.summable
        self.needs_shared_scale = inner.needs_shared_scale
        self.can_share_scale = inner.can_share_scale
        self.fixed_size = inner.fixed_size
        self.lossless = inner.lossless
        self.requantizable = inner.requantizable

    def bytes_per_value(self) -> float:
        return self.inner.bytes_per_value()

    def set_epoch(self, epoch: int) -> None:
        """The inner codec's schedule follows the epoch."""
        self.inner.set_epoch(epoch)

    def sent_coordinates(self, payload: Payload) -> torch.Tensor | None:
        """The inner codec's."""
        return self.inner.sent_coordinates(payload)

    def decode_sent(self, payload: Payload) -> torch.Tensor | None:
        """The inner codec's."""
        return self.inner.decode_sent(payload)

    def observe(self, averaged: torch.Tensor, key: ChunkKey) -> None:
        """The inner codec learns."""
        self.inner.observe(averaged, key)

    def codec_state(self) -> dict[str, Any]:
        """The inner codec's."""
        return self.inner.codec_state()

    def load_codec_state(self, state: dict[str, Any]) -> None:
        """The inner codec's."""
        self.inner.load_codec_state(state)

    def error_feedback(self) -> tuple[Codec, Memory]:
        """The inner codec (what travels) and the memory, for an exchange to keep apart."""
        return self.inner, self.memory

    def with_shared_scale(self) -> ErrorFeedback:
        """The same memory around the inner codec's shared-scale variant."""
        if self.needs_shared_scale:
            return self
        return type(self)(self.inner.with_shared_scale(), self.memory)

    def local_scale(self, x: torch.Tensor, key: ChunkKey | None = None) -> torch.Tensor:
        """The inner codec's scale of the *compensated* chunk; needs ``key`` (the chunk id)."""
        if key is None:
            raise TypeError(f"codec {self.name!r}: local_scale needs the chunk key")
        return self.inner.local_scale(self.memory.compensate(x, key), key)

    def encode(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None) -> Payload:
        """Encode ``x + residual`` with the inner codec and store the new residual."""
        compensated = self.memory.compensate(x, key)
        payload = self.inner.encode(compensated, key, scale=scale)
        self.memory.absorb(self.inner, compensated, payload, key)
        return payload

    def decode(self, payload: Payload) -> torch.Tensor:
        """The inner codec's decoding."""
        return self.inner.decode(payload)

    def add(self, a: Payload, b: Payload) -> Payload:
        """The inner codec's sum."""
        return self.inner.add(a, b)

    def template(self, numel: int) -> Payload | None:
        """The inner codec's (the wire format is the inner codec's)."""
        return self.inner.template(numel)

    def keyed_template(self, numel: int, key: ChunkKey) -> Payload | None:
        """The inner codec's."""
        return self.inner.keyed_template(numel, key)
