"""Momentum correction with momentum-factor masking (Lin et al., "Deep Gradient Compression",
ICLR 2018): a worker applies SGD momentum to its own gradient *before* sparsifying, and accumulates
the velocity, not the gradient, in its error-feedback memory.

Per chunk, with momentum factor ``m``, gradient ``g``, velocity ``u`` and accumulation ``v`` (the
error-feedback residual)::

    u <- m * u + g            # local momentum
    v <- v + u                # what is sent is encode(v)
    v <- v - decode(sent)     # the residual keeps what was not sent
    u[masked] <- 0            # momentum-factor masking

Masking stops the momentum of a coordinate whose delayed values were just sent, so that the stale
velocity does not keep pushing it (DGC's fix for sparse updates that arrive late). It applies to the
coordinates a sparsifier sent (``Codec.sent_coordinates``) that held values of earlier steps (a
non-zero residual); a coordinate also sent the step before holds nothing delayed and keeps its
momentum. So with every coordinate sent (ratio 1, or a dense lossless codec) nothing is masked and
the exchange's mean is exactly the momentum buffer of SGD: the optimizer then steps without momentum
(``Exchange.take_momentum``). Codecs that are not sparsifiers send every coordinate: no masking.
"""

from __future__ import annotations

from typing import Any

import torch

from .base import ChunkKey, as_chunk
from .memory import Memory

__all__ = ["MomentumMemory"]


class MomentumMemory(Memory):
    """Error-feedback residuals plus one velocity per chunk id: DGC's momentum correction.

    Parameters
    ----------
    momentum : float
        The momentum factor ``m``; an exchange sets it from the run's optimizer settings.
    """

    owns_momentum = True

    def __init__(self, momentum: float = 0.0) -> None:
        super().__init__()
        self.momentum = float(momentum)
        self.velocities: dict[int, torch.Tensor] = {}
        self._pending: dict[int, torch.Tensor] = {}  # this step's velocity, until ``update``

    def velocity(self, x: torch.Tensor, key: ChunkKey) -> torch.Tensor:
        """``m * u + x`` for chunk ``key`` (a new float32 tensor; the memory is not changed)."""
        x = as_chunk(x)
        u = self.velocities.get(key.chunk)
        if u is None:
            return x.clone()
        if u.numel() != x.numel():
            raise ValueError(
                f"memory: chunk {key.chunk} has {x.numel()} values but its velocity has {u.numel()}"
            )
        return torch.add(x, u.to(x.device), alpha=self.momentum)

    def compensate(self, x: torch.Tensor, key: ChunkKey) -> torch.Tensor:
        """The accumulation ``v + m * u + x`` to encode; the new velocity waits for :meth:`update`
        (asking twice in one step gives the same answer)."""
        u = self.velocity(x, key)
        self._pending[key.chunk] = u
        return super().compensate(u, key)

    def update(
        self, x_compensated: torch.Tensor, decoded: torch.Tensor, key: ChunkKey,
        sent: torch.Tensor | None = None,
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
        super().update(x_compensated, decoded, key)
        if sent is not None and before is not None:
            sent = sent.to(device=u.device, dtype=torch.int64)
            u.index_fill_(0, sent[before.to(u.device)[sent] != 0], 0.0)
        self.velocities[key.chunk] = u

    def reset(self) -> None:
        """Forget all residuals and velocities."""
        super().reset()
        self.velocities.clear()
        self._pending.clear()

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
