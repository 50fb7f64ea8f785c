"""The Agreement protocol: the few collectives a sampler with a global budget needs among the replicas.

The engine provides the implementations (adass.engine.agreement); samplers only call them.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

__all__ = ["Agreement"]


@runtime_checkable
class Agreement(Protocol):
    """Collectives among the ``world`` replicas; every replica calls each one in the same order.

    Attributes
    ----------
    rank, world : int
        This replica and how many there are.
    """

    rank: int
    world: int

    def sum_int(self, value: int) -> int:
        """The sum of every replica's ``value``."""
        ...

    def gather(self, values: torch.Tensor) -> list[torch.Tensor]:
        """Every replica's 1-D float tensor (lengths may differ), in rank order, as float32."""
        ...

    def take_bytes(self) -> tuple[int, int]:
        """``(raw_bytes, wire_bytes)`` sent to each peer since the last call; the count restarts."""
        ...
