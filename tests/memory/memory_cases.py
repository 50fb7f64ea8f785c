"""Shared cases for the memory tests: a codec and its memory driven together, as an exchange drives
them around a worker's own share, and seeded chunks."""

from __future__ import annotations

from typing import Any

import torch

from adass.codecs import Codec
from adass.codecs.base import ChunkKey, Payload
from adass.memory import Memory, build_pair, encode_own


def chunk(n: int, seed: int = 0) -> torch.Tensor:
    """A reproducible float32 chunk of ``n`` values with a spread of magnitudes."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=gen) * torch.rand(n, generator=gen).mul(3).exp()


class Paired:
    """``codec`` (as ``inner``) with ``memory``: ``encode`` compensates, encodes and keeps the loss;
    everything else is the codec's."""

    def __init__(self, codec: Codec, memory: Memory | None) -> None:
        self.inner, self.memory = codec, memory

    @classmethod
    def of(cls, codec: str, memory: str = "none", kernels: str | None = None) -> Paired:
        return cls(*build_pair(codec, memory, kernels))

    def encode(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None) -> Payload:
        return encode_own(self.inner, self.memory, x, key, scale)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
