"""Delay-aware momentum correction (``--memory dmc``, or ``--codec 'dmc(SPEC)'``): the momentum
acts on what is sent, and a coordinate's velocity decays by ``m`` per step while it waits, so a sum
delayed by a sparsifier is applied about once instead of ``1/(1-m)`` times.

Why: under DGC's momentum correction (``mc.py``) every gradient still counts ``1/(1-m)`` times
in the end, as in SGD with momentum; but random-k holds a coordinate for about ``1/ratio`` steps,
and the whole amplified sum then lands in one step with no fresh gradient of that coordinate in
between to correct it. With an effective step ``lr/(1-m)`` and a delay of ``1/ratio`` steps that
overshoots (at momentum 0 and the same effective step, error feedback fails alike). Here, per chunk,
with residual ``r``, velocity ``u`` and gradient ``g``::

    v <- r + g                # error feedback accumulates gradients, as error feedback
    y <- v + m * u            # encode(y); the velocity rides along
    sent coordinates:   u <- decode(sent),  r <- y - decode(sent)
    other coordinates:  u <- m * u,         r <- v

A coordinate sent at every step follows ``u <- m * u + g``: with every coordinate sent (ratio 1, a
dense lossless codec) this is SGD with momentum exactly. A coordinate sent again after ``t`` steps
carries ``m**t`` of its last velocity, so a delayed sum counts ``1/(1 - m**t)`` times, close to once.
"""

from __future__ import annotations

from typing import Any

import torch

from ..codecs.base import ChunkKey, as_chunk
from ..codecs.kernels import FUSED
from .base import MEMORIES
from .ef import ErrorFeedback
from .mc import MomentumCorrection

__all__ = ["DelayAwareMomentumCorrection"]


def _dense_fusable(kernels: str, *tensors: torch.Tensor | None) -> bool:
    """Whether fused loops may read and write these chunks (None: absent): ``kernels`` fused,
    and every tensor on the CPU, contiguous, float32, of no autograd graph, all of one
    length."""
    present = [t for t in tensors if t is not None]
    return kernels == FUSED and all(
        t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous() and not t.requires_grad
        and t.numel() == present[0].numel() for t in present
    )  # fmt: skip


def _fusable(kernels: str, *tensors: torch.Tensor | None) -> bool:
    """Whether ``update``'s sparse case can run fused: the dense chunks as ``_dense_fusable`` asks,
    and the coordinates (the last) int64 on the CPU, contiguous."""
    *dense, sent = tensors
    return (
        _dense_fusable(kernels, *dense) and sent is not None and sent.device.type == "cpu"
        and sent.dtype == torch.int64 and sent.is_contiguous()
    )  # fmt: skip


class DelayAwareMomentumCorrection(MomentumCorrection):
    """Residuals of gradients plus one velocity per chunk id, which only what is sent renews
    (``--memory dmc``).

    Parameters
    ----------
    momentum : float
        The momentum factor ``m``; an exchange sets it from the run's optimizer settings.
    kernels : {"reference", "fused"}, optional
        Fixed now (see :class:`~adass.memory.base.Memory`); None: the default.
    """

    name = "dmc"
    reads_sent_only = True

    def __init__(self, momentum: float = 0.0, kernels: str | None = None) -> None:
        super().__init__(momentum, kernels)
        self._sent: dict[int, torch.Tensor | None] = {}  # this step's sent coordinates, until ``settle``

    def compensate(self, x: torch.Tensor, key: ChunkKey) -> torch.Tensor:
        """``r + x + m * u`` to encode (asking twice in one step gives the same answer)."""
        x = as_chunk(x)
        residual, u = self.residuals.get(key.chunk), self.velocities.get(key.chunk)
        if residual is not None and u is not None and _dense_fusable(self.kernels, x, residual, u):
            from ..codecs.kernels import fused

            accumulation, decayed, y = (torch.empty_like(x) for _ in range(3))
            fused.compensate_delayed(x.numpy(), residual.numpy(), u.numpy(), self.momentum,
                                     accumulation.numpy(), decayed.numpy(), y.numpy())  # fmt: skip
            self._carried[key.chunk] = residual  # as ErrorFeedback.compensate keeps it for ``settle``
            self._pending[key.chunk], self._decayed[key.chunk] = accumulation, decayed
            return y
        decayed = self.decayed(key, x.numel())
        accumulation = ErrorFeedback.compensate(self, x, key)  # r + x; keeps r for ``settle``
        self._pending[key.chunk] = accumulation
        self._decayed[key.chunk] = decayed
        return accumulation if decayed is None else accumulation + decayed.to(x.device)

    def update(
        self, x_compensated: torch.Tensor, decoded: torch.Tensor | None, key: ChunkKey,
        sent: torch.Tensor | None = None, *, arrived: torch.Tensor | None = None,
    ) -> None:  # fmt: skip
        """Renew the velocity where values were sent (``sent``; None: everywhere), decay it elsewhere;
        the residual keeps what the encoding lost where sent, the accumulated gradients elsewhere.
        ``arrived``: the decoded values at ``sent`` (in its order), in place of ``decoded``, which
        is then not needed.

        Raises
        ------
        RuntimeError
            No :meth:`compensate` of this chunk came first.
        ValueError
            Neither ``decoded`` nor, with ``sent``, ``arrived``.
        """
        accumulation = self._pending.pop(key.chunk, None)
        if accumulation is None:
            raise RuntimeError(f"memory: chunk {key.chunk} updated without being compensated first")
        if decoded is None and (arrived is None or sent is None):
            raise ValueError(f"memory: chunk {key.chunk} updated without its decoded values")
        y = as_chunk(x_compensated)
        decayed = self._decayed.get(key.chunk)
        if sent is None:
            decoded = as_chunk(decoded).to(y.device)
            residual, velocity = y - decoded, decoded.clone()
        else:
            # this step's r + x and m * u are spent: they become the residual and the velocity in
            # place (no copies of the chunk); settle needs m * u only where sent, kept apart first
            sent = sent.to(device=y.device, dtype=torch.int64)
            if arrived is None:
                arrived = as_chunk(decoded).to(y.device)[sent]
            arrived = arrived.to(device=y.device, dtype=torch.float32)
            residual = accumulation
            velocity = torch.zeros_like(y) if decayed is None else decayed.to(y.device)
            if _fusable(self.kernels, y, accumulation, decayed, sent) and arrived.is_contiguous():
                from ..codecs.kernels import fused

                before = torch.empty(0 if decayed is None else sent.numel(), dtype=torch.float32)
                fused.sent_update(y.numpy(), arrived.numpy(), sent.numpy(), residual.numpy(),
                                  velocity.numpy(), before.numpy())  # fmt: skip
            else:
                residual[sent] = y[sent] - arrived
                before = None if decayed is None else velocity[sent].clone()
                velocity[sent] = arrived
            if decayed is not None:
                self._decayed[key.chunk] = before
        self._sent[key.chunk] = sent
        self.residuals[key.chunk] = residual
        self.velocities[key.chunk] = velocity

    def settle(self, factor: float) -> None:
        """As :meth:`ErrorFeedback.settle`: where sent, the velocity is what arrived (``factor`` times what
        was sent) and the residual's carried part was ``r + m * u``; elsewhere only ``r`` was."""
        carried, decayed, sent = self._carried, self._decayed, self._sent
        self._carried, self._decayed, self._sent = {}, {}, {}
        if factor == 1.0:
            return
        for chunk, before in carried.items():
            residual, velocity = self.residuals.get(chunk), self.velocities.get(chunk)
            if residual is None or velocity is None or chunk not in sent:
                continue
            where, d = sent[chunk], decayed.get(chunk)
            residual.mul_(factor)
            if before is not None:
                residual.add_(before.to(residual.device), alpha=1.0 - factor)
            if d is not None:  # m * u: the chunk's, or (where sent) its values there
                d = d.to(residual.device)
                if where is None:
                    residual.add_(d, alpha=1.0 - factor)
                else:
                    residual.index_add_(0, where, d, alpha=1.0 - factor)
            if where is None:
                velocity.mul_(factor)
            else:
                velocity[where] *= factor

    def reset(self) -> None:
        """Forget all residuals and velocities."""
        super().reset()
        self._sent.clear()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._sent.clear()


@MEMORIES.register("dmc", doc="delay-aware momentum correction: only what is sent renews the velocity")
def build_dmc(kernels: str | None = None) -> DelayAwareMomentumCorrection:
    """Delay-aware momentum correction with the codec's kernels (momentum 0 until an exchange takes
    the run's)."""
    return DelayAwareMomentumCorrection(kernels=kernels)
