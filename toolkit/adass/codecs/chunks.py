"""How a chunk is named (ChunkKey), what travels for it (Payload), and the randomness seeded from its name.

The little types every codec, memory and exchange speaks in; they know nothing of codecs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["ChunkKey", "Payload", "as_chunk", "generator_for", "seed_for", "stable_seed"]


@dataclass(frozen=True)
class ChunkKey:
    """Identifies one chunk of one step: every worker derives the same randomness from it.

    Attributes
    ----------
    seed, step, chunk : int
        Run seed, training step and chunk id. Randomness that all workers must share (the
        coordinates random-k keeps) comes from these three only.
    rank, hop : int
        Who encodes, and at which hop of an exchange (both default 0). Randomness that must be
        independent across workers (the stochastic rounding of QSGD) mixes these in too, so that
        the rounding errors of different workers, or of re-encodings at successive ring hops, do
        not line up. An exchange sets them with ``dataclasses.replace(key, rank=r, hop=h)``.
    """

    seed: int
    step: int
    chunk: int
    rank: int = 0
    hop: int = 0


def stable_seed(*parts: int | str) -> int:
    """A 63-bit seed from a stable hash of ``parts`` (never Python's ``hash``, which is salted)."""
    text = "/".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") & (2**63 - 1)


def generator_for(
    key: ChunkKey,
    salt: str = "",
    device: str | torch.device = "cpu",
    shared: bool = True,
) -> torch.Generator:
    """A ``torch.Generator`` seeded from (run seed, step, chunk, salt): same key, same draws.

    Parameters
    ----------
    key : ChunkKey
        The chunk being encoded.
    salt : str
        Separates the streams of different uses of one key (``"randk"``, ``"qsgd"``).
    device : str or torch.device
        Where the draws happen. CPU and CUDA generators give different streams, so workers that
        must agree on draws must draw on the same device type.
    shared : bool
        True (default): the same on every worker (``key.rank`` and ``key.hop`` are ignored).
        False: also seeded by ``key.rank`` and ``key.hop``, so independent across workers and hops.
    """
    gen = torch.Generator(device=device)
    gen.manual_seed(seed_for(key, salt, shared))
    return gen


def seed_for(key: ChunkKey, salt: str = "", shared: bool = True) -> int:
    """The 63-bit seed behind ``generator_for(key, salt, shared=shared)``."""
    if shared:
        return stable_seed(key.seed, key.step, key.chunk, salt)
    return stable_seed(key.seed, key.step, key.chunk, salt, "rank", key.rank, key.hop)


def as_chunk(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a contiguous 1-D float32 tensor; anything not 1-D raises ValueError."""
    if x.dim() != 1:
        raise ValueError(f"codecs encode 1-D chunks; got a tensor of shape {tuple(x.shape)}")
    return x.detach().to(torch.float32).contiguous()


@dataclass
class Payload:
    """What travels between workers for one chunk.

    Attributes
    ----------
    tensors : dict of str to Tensor
        The data on the wire (packed codes, values, indices, scales).
    numel : int
        Length of the dense chunk this payload stands for.
    header : dict
        Small metadata (bits, counts); travels too, counted in ``header_bytes``.
    header_bytes : int
        Bytes the header costs on the wire (each codec documents its header fields and their sizes).
    """

    tensors: dict[str, torch.Tensor]
    numel: int
    header: dict[str, Any] = field(default_factory=dict)
    header_bytes: int = 0

    @property
    def nbytes(self) -> int:
        """Real size on the wire: tensor bytes plus header bytes."""
        return self.header_bytes + sum(t.numel() * t.element_size() for t in self.tensors.values())

    @property
    def raw_bytes(self) -> int:
        """Size of the same chunk as dense fp32."""
        return 4 * self.numel
