"""``selective_backprop:beta=..``: forward every batch, backprop each sample with probability
``percentile(loss) ** beta`` among recently seen losses (Jiang et al., 2019)."""

from __future__ import annotations

from typing import Any

import torch

from ..codecs.base import stable_seed
from ..registry import Param
from .base import SAMPLERS, SamplerBase, Selection

__all__ = ["SelectiveBackpropSampler"]


@SAMPLERS.register(
    "selective_backprop",
    doc="backprop with probability from the loss percentile",
    beta=Param(2.0, "selectivity: probability = percentile ** beta", low=0.0, high=10.0),
    history=Param(1024, "recent losses the percentile is taken over", low=16, high=1_000_000),
)
class SelectiveBackpropSampler(SamplerBase):
    two_pass = True

    def __init__(
        self, beta: float, history: int, *, n: int, seed: int = 0, epochs: int = 1, **_: object
    ) -> None:
        super().__init__(n, seed, epochs)
        self.beta = beta
        self.history = history
        self.recent = torch.empty(0)
        self.calls = 0

    def select(self, epoch: int) -> Selection:
        return self.everything(epoch)

    def backprop_weights(self, indices: torch.Tensor, losses: torch.Tensor) -> torch.Tensor:
        losses = losses.detach().float().cpu()
        self.recent = torch.cat([self.recent, losses])[-self.history :]
        ranked = torch.sort(self.recent).values
        percentile = torch.searchsorted(ranked, losses, right=True).float() / ranked.numel()
        prob = percentile.clamp(0, 1) ** self.beta
        gen = torch.Generator().manual_seed(stable_seed(self.seed, "sb", self.calls))
        self.calls += 1
        chosen = torch.rand(losses.numel(), generator=gen) < prob
        return chosen.float()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "recent": self.recent.clone(), "calls": self.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.recent = state["recent"].clone()
        self.calls = int(state["calls"])
