"""No memory (``--memory none``, the default): each worker encodes its share as it is, and what a
lossy codec drops is lost. The policy builds nothing, so an exchange holds no memory at all and
takes the paths that never compensate.
"""

from __future__ import annotations

from .base import MEMORIES

__all__ = ["build_none"]


@MEMORIES.register("none", doc="no memory: what a lossy codec drops is lost")
def build_none(kernels: str | None = None) -> None:
    """Nothing: an exchange without a memory."""
    return None
