"""``full``: every sample, every epoch, in a seeded random order (Epoch-SGD)."""

from __future__ import annotations

from .base import SAMPLERS, SamplerBase, Selection

__all__ = ["FullSampler"]


@SAMPLERS.register("full", doc="every sample every epoch (Epoch-SGD)")
class FullSampler(SamplerBase):
    def __init__(self, *, n: int, seed: int = 0, epochs: int = 1, **_: object) -> None:
        super().__init__(n, seed, epochs)

    def select(self, epoch: int) -> Selection:
        return self.everything(epoch)
