"""How an exchange drives its :class:`~adass.memory.base.Memory` around this worker's own share of
each chunk (compensate before encoding it, keep what the codec lost after), apart from the codec, as
GRACE keeps its Memory apart from its Compressor. Partial sums that an exchange re-encodes on the
way (ring hops) never touch the memory.
"""

from __future__ import annotations

import torch

from ..codecs import Codec
from ..codecs.base import ChunkKey, Payload
from .base import Memory

__all__ = ["compensate", "encode_own"]


def compensate(memory: Memory | None, x: torch.Tensor, key: ChunkKey) -> torch.Tensor:
    """``x`` plus the residual of chunk ``key`` (``x`` itself without a memory)."""
    return x if memory is None else memory.compensate(x, key)


def encode_own(
    codec: Codec, memory: Memory | None, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None
) -> Payload:
    """``codec.encode`` of this worker's own ``x``; with a memory, of ``x`` plus the chunk's residual,
    and the part the encoding lost becomes the chunk's new residual."""
    if memory is None:
        return codec.encode(x, key, scale=scale)
    compensated = memory.compensate(x, key)
    payload = codec.encode(compensated, key, scale=scale)
    memory.absorb(codec, compensated, payload, key)
    return payload
