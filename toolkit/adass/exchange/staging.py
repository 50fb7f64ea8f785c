"""Gradients that live on an accelerator reach an exchange through host memory.

Transports send CPU tensors (gloo, the in-process hub) and codec state (error-feedback residuals,
shared-seed index caches) is kept on the CPU, so an exchange reduces a host copy of a CUDA
gradient and writes the result back to the gradient's device. Every ``Exchange.reduce`` is wrapped
once, where its class is defined (``Exchange.__init_subclass__``); CPU gradients pass straight
through.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["through_host"]

Reduce = Callable[..., torch.Tensor]


def through_host(reduce: Reduce) -> Reduce:
    """Wrap an exchange's ``reduce(flat_grad, count, out)`` so that a gradient or ``out`` on another
    device is reduced from a host copy, and the result lands on that device (in ``out`` where given)."""

    @functools.wraps(reduce)
    def staged(self: Any, flat_grad: torch.Tensor, count: float | None = None,
               out: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        on_host = flat_grad.device.type == "cpu" and (out is None or out.device.type == "cpu")
        if on_host:
            return reduce(self, flat_grad, count, out)
        result = reduce(self, flat_grad.detach().to("cpu"), count)
        if out is None:
            return result.to(flat_grad.device)
        return out.copy_(result.view(out.shape))

    staged.through_host = True  # type: ignore[attr-defined]
    return staged
