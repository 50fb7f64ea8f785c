"""Momentum correction (``--memory mc``, or ``--codec 'mc(SPEC)'``) with momentum-factor masking
(Lin et al., "Deep Gradient Compression", ICLR 2018): a worker applies SGD momentum to its own
gradient *before* sparsifying, and accumulates the velocity, not the gradient, in its error-feedback
memory.

Per chunk, with momentum factor ``m``, gradient ``g``, velocity ``u`` and accumulation ``v`` (the
error-feedback residual)::

    u <- m * u + g            # local momentum
    v <- v + u                # what is sent is encode(v)
    v <- v - decode(sent)     # the residual keeps what was not sent
    u[masked] <- 0            # momentum-factor masking

Masking stops the momentum of a coordinate whose delayed values were just sent, so that the stale
velocity does not keep pushing it (DGC's fix for sparse updates that arrive late). It applies to the
coordinates a sparsifier sent (the codec's ``sparse`` declaration) that held values of earlier steps (a
non-zero residual); a coordinate also sent the step before holds nothing delayed and keeps its
momentum. So with every coordinate sent (ratio 1, or a dense lossless codec) nothing is masked and
the exchange's mean is exactly the momentum buffer of SGD: the optimizer then steps without momentum
(``Memory.take_momentum``). Codecs that are not sparsifiers send every coordinate: no masking.
"""

from __future__ import annotations

from typing import Any

import torch

from ..codecs.base import ChunkKey, as_chunk
from .base import MEMORIES
from .ef import ErrorFeedback

__all__ = ["MomentumCorrection"]


class MomentumCorrection(ErrorFeedback):
    """Error-feedback residuals plus one velocity per chunk id: DGC's momentum correction
    (``--memory mc``).

    Parameters
    ----------
    momentum : float
        The momentum factor ``m``; an exchange sets it from the run's optimizer settings.
    kernels : {"reference", "fused"}, optional
        Fixed now (see :class:`~adass.memory.base.Memory`); None: the default.
    """

    name = "mc"
    owns_momentum = True

    def __init__(self, momentum: float = 0.0, kernels: str | None = None) -> None:
        super().__init__(kernels)
        self.momentum = float(momentum)
        self.velocities: dict[int, torch.Tensor] = {}
        self._pending: dict[int, torch.Tensor] = {}  # this step's velocity, until ``update``
        self._decayed: dict[int, torch.Tensor | None] = {}  # this step's m * u, until ``settle``
        self._masked: dict[int, torch.Tensor] = {}  # this step's masked coordinates, until ``settle``

    def take_momentum(self, momentum: float) -> bool:
        """Keep ``momentum`` as the factor ``m``: this memory applies it, the optimizer must not."""
        self.momentum = float(momentum)
        return True

    def decayed(self, key: ChunkKey, numel: int) -> torch.Tensor | None:
        """``m * u`` of chunk ``key`` (a new tensor), or None before its first step."""
        u = self.velocities.get(key.chunk)
        if u is None:
            return None
        if u.numel() != numel:
            raise ValueError(f"memory: chunk {key.chunk} has {numel} values but its velocity has {u.numel()}")
        return u * self.momentum

    def velocity(self, x: torch.Tensor, key: ChunkKey) -> torch.Tensor:
        """``m * u + x`` for chunk ``key`` (a new float32 tensor; the memory is not changed)."""
        x = as_chunk(x)
        decayed = self.decayed(key, x.numel())
        return x.clone() if decayed is None else x + decayed.to(x.device)

    def compensate(self, x: torch.Tensor, key: ChunkKey) -> torch.Tensor:
        """The accumulation ``v + m * u + x`` to encode; the new velocity waits for :meth:`update`
        (asking twice in one step gives the same answer)."""
        x = as_chunk(x)
        decayed = self.decayed(key, x.numel())
        u = x.clone() if decayed is None else x + decayed.to(x.device)
        self._pending[key.chunk] = u
        accumulation = super().compensate(u, key)
        residual = self._carried[key.chunk]
        carried = [t for t in (residual, decayed) if t is not None]
        self._carried[key.chunk] = sum(carried[1:], carried[0]) if carried else None  # v + m * u
        self._decayed[key.chunk] = decayed
        return accumulation

    def update(
        self, x_compensated: torch.Tensor, decoded: torch.Tensor | None, key: ChunkKey,
        sent: torch.Tensor | None = None, *, arrived: torch.Tensor | None = None,
    ) -> None:  # fmt: skip
        """Store the residual and the step's velocity, zeroed at the masked coordinates: those of
        ``sent`` whose residual before this step was not zero.

        Raises
        ------
        RuntimeError
            No :meth:`compensate` of this chunk came first.
        """
        u = self._pending.pop(key.chunk, None)
        if u is None:
            raise RuntimeError(f"memory: chunk {key.chunk} updated without being compensated first")
        before = self.residuals.get(key.chunk)
        super().update(x_compensated, decoded, key)  # needs ``decoded``: not ``reads_sent_only``
        if sent is not None and before is not None:
            sent = sent.to(device=u.device, dtype=torch.int64)
            self._masked[key.chunk] = sent[before.to(u.device)[sent] != 0]
            u.index_fill_(0, self._masked[key.chunk], 0.0)
        self.velocities[key.chunk] = u

    def settle(self, factor: float) -> None:
        """As :meth:`ErrorFeedback.settle`, for the residuals (what was carried in is ``v + m * u``) and
        the velocities (``m * u + factor * share``, masked again)."""
        decayed, masked = self._decayed, self._masked
        self._decayed, self._masked = {}, {}
        super().settle(factor)
        if factor == 1.0:
            return
        for chunk, before in decayed.items():
            u = self.velocities.get(chunk)
            if u is None:
                continue
            u.mul_(factor)
            if before is not None:
                u.add_(before.to(u.device), alpha=1.0 - factor)
            if chunk in masked:
                u.index_fill_(0, masked[chunk], 0.0)

    def reset(self) -> None:
        """Forget all residuals and velocities."""
        super().reset()
        self.velocities.clear()
        self._pending.clear()
        self._decayed.clear()
        self._masked.clear()

    def state_dict(self) -> dict[str, Any]:
        """Residuals and velocities by chunk id, as CPU tensors."""
        state = super().state_dict()
        state["velocities"] = {int(c): u.detach().cpu().clone() for c, u in self.velocities.items()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace residuals and velocities with those of ``state`` (a state without velocities,
        from plain error feedback, starts them at zero)."""
        super().load_state_dict(state)
        self.velocities = {
            int(c): u.to(torch.float32).clone() for c, u in state.get("velocities", {}).items()
        }
        self._pending.clear()


@MEMORIES.register("mc", doc="momentum correction (DGC): momentum before encoding, masked where sent")
def build_mc(kernels: str | None = None) -> MomentumCorrection:
    """Momentum correction with the codec's kernels (momentum 0 until an exchange takes the run's)."""
    return MomentumCorrection(kernels=kernels)
