"""``random:ratio=..``: a fresh uniform subset of fixed size each epoch, the control for ADASS.

``random:schedule=S0/S1/..`` keeps the share ``S_e`` in epoch ``e`` instead (the last share for any
later epoch): ``adass compare`` replays an ADASS run's measured per-epoch kept shares, warm-up and
final full epochs included, so the control differs from ADASS only in which samples it keeps.
"""

from __future__ import annotations

import math

import torch

from ..codecs.base import stable_seed
from ..registry import Param, SpecError
from .base import SAMPLERS, SamplerBase, Selection, shuffled

__all__ = ["RandomSampler", "parse_schedule", "schedule_text"]


def parse_schedule(text: str) -> list[float]:
    """``"1/0.6/0.55"`` -> ``[1.0, 0.6, 0.55]``; every share in [0, 1]."""
    try:
        shares = [float(part) for part in text.split("/")] if text else []
    except ValueError:
        raise SpecError(f"random: schedule={text!r} is not a list of shares like 1/0.6/0.5") from None
    if any(not 0.0 <= s <= 1.0 for s in shares):
        raise SpecError(f"random: schedule={text!r} has a share outside [0, 1]")
    return shares


def schedule_text(shares: list[float]) -> str:
    """The ``schedule`` value for per-epoch kept shares (6 significant digits: ``round(share * n)``
    gives a count back exactly for any shard of up to 100,000 samples; ``1`` for full epochs)."""
    return "/".join(f"{min(1.0, max(0.0, s)):.6g}" for s in shares)


@SAMPLERS.register(
    "random",
    doc="uniform random subset each epoch",
    ratio=Param(0.6, "share of the shard kept each epoch", low=0.0, high=1.0),
    schedule=Param("", "per-epoch shares S0/S1/.. that replace ratio (the last one repeats); empty: ratio"),
)
class RandomSampler(SamplerBase):
    def __init__(
        self, ratio: float, schedule: str = "", *, n: int, seed: int = 0, epochs: int = 1, **_: object
    ) -> None:
        super().__init__(n, seed, epochs)
        self.ratio = ratio
        self.shares = parse_schedule(schedule)

    def share_at(self, epoch: int) -> float:
        """The share of the shard kept in ``epoch``."""
        if not self.shares:
            return self.ratio
        return self.shares[min(epoch, len(self.shares) - 1)]

    def select(self, epoch: int) -> Selection:
        share = self.share_at(epoch)
        # a replayed share names a count (kept / n): rounding gives it back; a ratio rounds up
        count = round(share * self.n) if self.shares else math.ceil(share * self.n)
        keep = min(self.n, max(1, count)) if self.n else 0
        gen = torch.Generator().manual_seed(stable_seed(self.seed, "random", epoch))
        subset = torch.randperm(self.n, generator=gen)[:keep]
        return Selection(shuffled(subset, self.seed, epoch), torch.ones(keep))
