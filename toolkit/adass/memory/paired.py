"""One worker's codec and memory driven together, as an exchange drives them around the worker's own
share: the form the notebooks and tests use to watch a memory at work without an exchange."""

from __future__ import annotations

from typing import Any

import torch

from ..codecs import Codec
from ..codecs.base import ChunkKey, Payload
from .base import Memory
from .own import encode_own
from .spec import build_pair

__all__ = ["Paired"]


class Paired:
    """``codec`` (as ``inner``) with ``memory``: :meth:`encode` compensates, encodes and keeps what
    the encoding left out; everything else (``decode``, ``observe``, ...) is the codec's.

    Examples
    --------
    >>> import torch
    >>> ef = Paired.of("topk:ratio=0.5", "ef")
    >>> sent = ef.decode(ef.encode(torch.tensor([4.0, 1.0]), ChunkKey(0, 0, 0)))
    >>> sent.tolist(), ef.memory.residual(ChunkKey(0, 0, 0)).tolist()
    ([4.0, 0.0], [0.0, 1.0])
    """

    def __init__(self, codec: Codec, memory: Memory | None) -> None:
        self.inner, self.memory = codec, memory

    @classmethod
    def of(cls, codec: str, memory: str = "none", kernels: str | None = None) -> Paired:
        """Build the pair from a codec spec (which may name its memory: ``ef(SPEC)``) and a memory name."""
        return cls(*build_pair(codec, memory, kernels))

    def encode(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None) -> Payload:
        return encode_own(self.inner, self.memory, x, key, scale)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
