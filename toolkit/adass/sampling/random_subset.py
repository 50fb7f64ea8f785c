"""``random:ratio=..``: a fresh uniform subset of fixed size each epoch, the control for ADASS."""

from __future__ import annotations

import math

import torch

from ..codecs.base import stable_seed
from ..registry import Param
from .base import SAMPLERS, SamplerBase, Selection, shuffled

__all__ = ["RandomSampler"]


@SAMPLERS.register(
    "random",
    doc="uniform random subset each epoch",
    ratio=Param(0.6, "share of the shard kept each epoch", low=0.0, high=1.0),
)
class RandomSampler(SamplerBase):
    def __init__(self, ratio: float, *, n: int, seed: int = 0, epochs: int = 1, **_: object) -> None:
        super().__init__(n, seed, epochs)
        self.ratio = ratio

    def select(self, epoch: int) -> Selection:
        keep = min(self.n, max(1, math.ceil(self.ratio * self.n))) if self.n else 0
        gen = torch.Generator().manual_seed(stable_seed(self.seed, "random", epoch))
        subset = torch.randperm(self.n, generator=gen)[:keep]
        return Selection(shuffled(subset, self.seed, epoch), torch.ones(keep))
