"""Error-feedback memory: the part of each chunk a lossy codec did not send, added back next step.

``compensate(x, key)`` returns ``x + residual`` for the chunk; after encoding, ``update(x_c,
decoded, key)`` stores ``x_c - decoded``. Residuals are kept per chunk id (``key.chunk``), so the
same chunking must be used from step to step. The state goes into checkpoints.

An exchange that scales the sum of the encodings once the step's total count is known (the ring
weights shares by ``count / hint`` and multiplies the sum by ``hint / total``) calls
``settle(factor)`` after the step, so what the memory keeps is in the units of the mean the step
really gave, and a residual carried over is never scaled by a later step's factor. Momentum correction
(``momentum.py``) is a memory of this kind that also keeps each chunk's velocity.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from .chunks import ChunkKey, Payload, as_chunk
from .kernels import choose as choose_kernels

__all__ = ["Memory", "SentValues"]


class SentValues(Protocol):
    """What :meth:`Memory.absorb` asks of the codec that encoded a chunk (every Codec gives it)."""

    def decode(self, payload: Payload) -> torch.Tensor:
        """The dense chunk ``payload`` stands for."""
        ...

    def sent_coordinates(self, payload: Payload) -> torch.Tensor | None:
        """The coordinates whose values ``payload`` carries; None where every coordinate travels."""
        ...

    def decode_sent(self, payload: Payload) -> torch.Tensor | None:
        """The decoded values at ``sent_coordinates(payload)`` alone, where the codec can give them."""
        ...


class Memory:
    """Residuals of past encodings, one float32 tensor per chunk id.

    Attributes
    ----------
    owns_momentum : bool
        Whether the memory applies the optimizer's momentum itself (then the optimizer must not);
        False for plain error feedback.
    kernels : {"reference", "fused"}
        The kernels of memories with fused paths (``adass.codecs.kernels``), fixed when built: the
        argument, else the default of that moment.
    """

    owns_momentum = False
    #: whether :meth:`update` reads the decoded chunk only at the sent coordinates, so that it can
    #: take just those values (``arrived``) when a sparsifier sent them
    reads_sent_only = False

    def __init__(self, kernels: str | None = None) -> None:
        self.kernels = choose_kernels(kernels)
        self.residuals: dict[int, torch.Tensor] = {}
        self._carried: dict[int, torch.Tensor | None] = {}  # what this step's compensation added

    def compensate(self, x: torch.Tensor, key: ChunkKey) -> torch.Tensor:
        """``x`` plus this chunk's residual (a new float32 tensor; the memory is not changed).

        Raises
        ------
        ValueError
            The stored residual has another length than ``x`` (the chunking changed).
        """
        x = as_chunk(x)
        residual = self.residuals.get(key.chunk)
        self._carried[key.chunk] = residual
        if residual is None:
            return x.clone()
        if residual.numel() != x.numel():
            raise ValueError(
                f"memory: chunk {key.chunk} has {x.numel()} values but its residual has {residual.numel()}"
            )
        return x + residual.to(x.device)

    def update(
        self, x_compensated: torch.Tensor, decoded: torch.Tensor | None, key: ChunkKey,
        sent: torch.Tensor | None = None, *, arrived: torch.Tensor | None = None,
    ) -> None:  # fmt: skip
        """Store ``x_compensated - decoded`` as the residual of chunk ``key.chunk``. ``sent``: the
        coordinates a sparsifier sent (``Codec.sent_coordinates``), None for every one; plain error
        feedback does not need them. ``arrived`` (the decoded values at ``sent`` alone) serves the
        memories that ``reads_sent_only``; this one needs ``decoded``."""
        if decoded is None:
            raise ValueError(f"memory: chunk {key.chunk} updated without its decoded chunk")
        residual = as_chunk(x_compensated) - as_chunk(decoded).to(x_compensated.device)
        self.residuals[key.chunk] = residual

    def absorb(self, codec: SentValues, x_compensated: torch.Tensor, payload: Payload, key: ChunkKey) -> None:
        """:meth:`update` from what ``codec`` made of ``x_compensated`` (``payload``): decoded in full,
        or, for a memory that reads the sent coordinates alone, just the values sent there where the
        codec gives them (``Codec.decode_sent``), with no dense chunk of zeros to decode into."""
        sent = codec.sent_coordinates(payload)
        arrived = codec.decode_sent(payload) if sent is not None and self.reads_sent_only else None
        if arrived is None:
            self.update(x_compensated, codec.decode(payload), key, sent)
        else:
            self.update(x_compensated, None, key, sent, arrived=arrived)

    def settle(self, factor: float) -> None:
        """After a step whose sum the exchange multiplied by ``factor``: restate the residuals of the
        chunks encoded in it as if their new values had been weighted by ``factor`` from the start.

        What was wanted is ``carried + factor * share`` and what arrived ``factor * decoded``; the
        stored ``carried + share - decoded`` becomes ``factor * stored + (1 - factor) * carried``.
        """
        carried, self._carried = self._carried, {}
        if factor == 1.0:
            return
        for chunk, before in carried.items():
            residual = self.residuals.get(chunk)
            if residual is not None:
                residual.mul_(factor)
                if before is not None:
                    residual.add_(before.to(residual.device), alpha=1.0 - factor)

    def residual(self, key: ChunkKey) -> torch.Tensor | None:
        """The stored residual of chunk ``key.chunk``, or None."""
        return self.residuals.get(key.chunk)

    def reset(self) -> None:
        """Forget all residuals."""
        self.residuals.clear()
        self._carried.clear()

    def state_dict(self) -> dict[str, Any]:
        """Residuals by chunk id, as CPU tensors (loadable with ``torch.load(weights_only=True)``)."""
        return {"residuals": {int(c): r.detach().cpu().clone() for c, r in self.residuals.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the residuals with those of ``state`` (as made by :meth:`state_dict`)."""
        self.residuals = {int(c): r.to(torch.float32).clone() for c, r in state["residuals"].items()}

    def __len__(self) -> int:
        return len(self.residuals)
