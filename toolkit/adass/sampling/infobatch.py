"""``infobatch:ratio=..,anneal=..``: prune a random share of below-mean-loss samples and rescale the rest.

Each epoch, samples whose last loss is below the mean are "well learned"; a random share ``ratio``
of them is skipped and the remaining well-learned ones get weight ``1 / (1 - ratio)`` so the
expected gradient is unchanged. The last ``anneal`` share of epochs uses the full data.
"""

from __future__ import annotations

import math

import torch

from ..codecs.base import stable_seed
from ..registry import Param
from .base import SAMPLERS, SamplerBase, Selection, shuffled

__all__ = ["InfoBatchSampler"]


@SAMPLERS.register(
    "infobatch",
    doc="prune below-mean-loss samples at random, rescale the rest",
    ratio=Param(0.5, "share of below-mean samples pruned", low=0.0, high=0.99),
    anneal=Param(0.125, "final share of epochs on full data", low=0.0, high=1.0),
)
class InfoBatchSampler(SamplerBase):
    def __init__(
        self, ratio: float, anneal: float, *, n: int, seed: int = 0, epochs: int = 1, **_: object
    ) -> None:
        super().__init__(n, seed, epochs)
        self.ratio = ratio
        self.anneal = anneal

    def select(self, epoch: int) -> Selection:
        seen = ~torch.isnan(self.last_loss)
        final = epoch >= math.floor((1.0 - self.anneal) * self.epochs)
        if final or not bool(seen.any()):
            return self.everything(epoch)
        scores = torch.where(seen, self.last_loss, torch.full_like(self.last_loss, float("inf")))
        well = seen & (scores < self.last_loss[seen].mean())
        gen = torch.Generator().manual_seed(stable_seed(self.seed, "infobatch", epoch))
        pruned = well & (torch.rand(self.n, generator=gen) < self.ratio)
        kept = torch.nonzero(~pruned).flatten()
        order = shuffled(kept, self.seed, epoch)
        weights = torch.where(well[order], 1.0 / (1.0 - self.ratio), 1.0).float()
        return Selection(order, weights)
