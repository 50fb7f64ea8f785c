"""Warm-up of a sparsifier's ratio (Lin et al., "Deep Gradient Compression", ICLR 2018): keep many
values in the first epochs, while gradients change fast, then exponentially fewer, down to the target.

The ratio is a function of the epoch alone, which every worker knows, so all workers keep the same
``k`` at the same step and random-k's coordinates stay shared.

>>> [round(warmup_ratio(0.01, 3, e), 4) for e in range(5)]
[0.3162, 0.1, 0.0316, 0.01, 0.01]
>>> warmup_ratio(0.01, 0, 0)
0.01
"""

from __future__ import annotations

from ..registry import Param

__all__ = ["WARMUP", "warmup_ratio"]

WARMUP = Param(0, "epochs over which the kept share falls exponentially to ratio (0: no warm-up)",
               low=0, high=1000)  # fmt: skip


def warmup_ratio(target: float, warmup_epochs: int, epoch: int) -> float:
    """The share of values kept in ``epoch`` (0-based): ``target ** ((epoch + 1) / (warmup_epochs +
    1))`` during the warm-up, ``target`` from epoch ``warmup_epochs`` on.

    Parameters
    ----------
    target : float
        The ratio after the warm-up, in [0, 1].
    warmup_epochs : int
        Length of the warm-up; 0 keeps ``target`` from the start.
    epoch : int
        The epoch.
    """
    if warmup_epochs <= 0 or epoch >= warmup_epochs or target <= 0.0:
        return target
    return target ** ((max(epoch, 0) + 1) / (warmup_epochs + 1))
