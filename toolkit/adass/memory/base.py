"""The Memory protocol: what an exchange keeps around a worker's own share of each chunk between
steps (compensate before encoding, update after), and the registry of memory policies.

A memory is the third part of gradient compression beside the codec and the exchange (GRACE's
Memory): codecs do math on one chunk and forget it, exchanges move payloads, and a memory carries
what a lossy encoding dropped (and, for momentum correction, the velocity) to the next step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch

from ..codecs import Codec
from ..codecs.base import ChunkKey, Payload, SentValues
from ..codecs.kernels import choose as choose_kernels
from ..registry import Registry, SpecError

__all__ = ["MEMORIES", "Memory"]

MEMORIES = Registry("memory")


class Memory(ABC):
    """Per-chunk state kept around a worker's own share, one object per rank.

    An exchange calls, per chunk of its own share and step: ``compensate(x, key)`` for what to
    encode, then :meth:`absorb` (or :meth:`update`) with what the codec made of it; after the step
    :meth:`settle` with the factor it scaled the sum by. Chunks are told apart by ``key.chunk``, so
    the chunking must stay the same from step to step.

    Attributes
    ----------
    name : str
        The registry name (``ef``, ``mc``, ``dmc``).
    owns_momentum : bool
        Whether the memory applies the optimizer's momentum itself (then the optimizer must step
        without it); see :meth:`take_momentum`.
    reads_sent_only : bool
        Whether :meth:`update` reads the decoded chunk only at the sent coordinates, so that it can
        take just those values (``arrived``) when a sparsifier sent them.
    kernels : {"reference", "fused"}
        The kernels of memories with fused paths (``adass.codecs.kernels``), fixed when built: the
        argument, else the default of that moment.
    """

    name = "memory"
    owns_momentum = False
    reads_sent_only = False

    def __init__(self, kernels: str | None = None) -> None:
        self.kernels = choose_kernels(kernels)

    @classmethod
    def check(cls, codec: Codec) -> None:
        """Raise SpecError (one line) if this memory cannot work with ``codec``: a codec that
        declares itself not contractive (random-k's ``n/k`` gain) makes any residual grow without
        bound."""
        if not codec.traits.contractive:
            raise SpecError(
                f"memory {cls.name!r} around codec {codec.name!r}: the codec is not contractive "
                "(random-k's n/k gain), so the residual grows without bound; use scale=false"
            )

    @abstractmethod
    def compensate(self, x: torch.Tensor, key: ChunkKey) -> torch.Tensor:
        """What to encode of chunk ``key``'s share ``x``: a new float32 tensor (asking twice in one
        step gives the same answer; the kept state changes only in :meth:`update`)."""

    @abstractmethod
    def update(
        self, x_compensated: torch.Tensor, decoded: torch.Tensor | None, key: ChunkKey,
        sent: torch.Tensor | None = None, *, arrived: torch.Tensor | None = None,
    ) -> None:  # fmt: skip
        """Keep what encoding ``x_compensated`` (what :meth:`compensate` gave) as ``decoded`` lost.

        Parameters
        ----------
        x_compensated, decoded : Tensor
            What was wanted and what the payload stands for (``decoded`` may be None where
            ``arrived`` is given and the memory ``reads_sent_only``).
        key : ChunkKey
            The chunk.
        sent : Tensor, optional
            The coordinates a sparsifier sent; None: every one.
        arrived : Tensor, optional
            The decoded values at ``sent`` alone, in its order.
        """

    def absorb(self, codec: Codec, x_compensated: torch.Tensor, payload: Payload, key: ChunkKey) -> None:
        """:meth:`update` from what ``codec`` made of ``x_compensated`` (``payload``): decoded in full,
        or, for a memory that reads the sent coordinates alone, just the values sent there where the
        codec gives them (its ``sparse`` declaration), with no dense chunk of zeros to decode into."""
        sparse: SentValues | None = codec.sparse
        sent = None if sparse is None else sparse.sent_coordinates(payload)
        arrived = sparse.decode_sent(payload) if sparse is not None and self.reads_sent_only else None
        if arrived is None:
            self.update(x_compensated, codec.decode(payload), key, sent)
        else:
            self.update(x_compensated, None, key, sent, arrived=arrived)

    def settle(self, factor: float) -> None:
        """After a step whose sum the exchange multiplied by ``factor``: restate what the step kept
        as if the share had been weighted by ``factor`` from the start. Nothing by default."""
        return None

    def take_momentum(self, momentum: float) -> bool:
        """Where this memory owns the optimizer's momentum (``owns_momentum``), keep ``momentum`` as
        its factor and return True; False (the default) otherwise."""
        return False

    @abstractmethod
    def reset(self) -> None:
        """Forget everything kept."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps, as CPU tensors by chunk id (``torch.load(weights_only=True)``)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace what is kept with ``state`` (as :meth:`state_dict` made it)."""

    def __repr__(self) -> str:
        return self.name
