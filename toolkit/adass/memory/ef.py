"""Error feedback (``--memory ef``, or ``--codec 'ef(SPEC)'``): the part of each chunk a lossy
codec did not send, added back next step, so what the codec drops is sent later instead of lost.

``compensate(x, key)`` returns ``x + residual`` for the chunk; after encoding, ``update(x_c,
decoded, key)`` stores ``x_c - decoded``. The residual stays bounded only for a contractive codec
(``||C(x) - x|| < ||x||``): top-k, random-k with ``scale=false`` (Stich, Cordonnier and Jaggi,
"Sparsified SGD with Memory", NeurIPS 2018), QSGD with enough bits; ``Memory.check`` refuses a codec
that declares itself not contractive. A codec built for a memory rounds to the nearest level where
its rounding is ``auto`` (QSGD; Seide et al.'s 1-bit SGD and Karimireddy et al.'s EF-SGD pair a
deterministic quantizer with the memory too).

An exchange that scales the sum of the encodings once the step's total count is known (the ring
weights shares by ``count / hint`` and multiplies the sum by ``hint / total``) calls
``settle(factor)`` after the step, so what the memory keeps is in the units of the mean the step
really gave, and a residual carried over is never scaled by a later step's factor. Momentum
correction (``mc.py``) is a memory of this kind that also keeps each chunk's velocity.
"""

from __future__ import annotations

from typing import Any

import torch

from ..codecs.base import ChunkKey, as_chunk
from .base import MEMORIES, Memory

__all__ = ["ErrorFeedback"]


class ErrorFeedback(Memory):
    """Residuals of past encodings, one float32 tensor per chunk id: ``--memory ef``.

    Parameters
    ----------
    kernels : {"reference", "fused"}, optional
        Fixed now (see :class:`~adass.memory.base.Memory`); None: the default.
    """

    name = "ef"

    def __init__(self, kernels: str | None = None) -> None:
        super().__init__(kernels)
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
        coordinates a sparsifier sent (its ``sparse`` declaration), None for every one; plain error
        feedback does not need them. ``arrived`` (the decoded values at ``sent`` alone) serves the
        memories that ``reads_sent_only``; this one needs ``decoded``."""
        if decoded is None:
            raise ValueError(f"memory: chunk {key.chunk} updated without its decoded chunk")
        residual = as_chunk(x_compensated) - as_chunk(decoded).to(x_compensated.device)
        self.residuals[key.chunk] = residual

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


@MEMORIES.register("ef", doc="error feedback: what the codec dropped is added to the next step's share")
def build_ef(kernels: str | None = None) -> ErrorFeedback:
    """Error feedback with the codec's kernels."""
    return ErrorFeedback(kernels)
