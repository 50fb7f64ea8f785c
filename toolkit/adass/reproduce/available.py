"""Which arms this build can run: an arm whose codec or exchange does not parse is left out, by name."""

from __future__ import annotations

from collections.abc import Sequence

from ..config import RunConfig
from ..registry import SpecError
from .grid import Arm

__all__ = ["split_available"]


def split_available(base: RunConfig, arms: Sequence[Arm], workers: int) -> tuple[list[Arm], list[str]]:
    """The arms whose exchange and codec this build accepts, and a line for each of the others.

    Parameters
    ----------
    base : RunConfig
        The grid's run options.
    arms : sequence of Arm
        Candidate arms.
    workers : int
        Replicas the arms run with (an exchange/codec pair is checked for it).
    """
    kept, left_out = [], []
    for arm in arms:
        try:
            base.replace(workers=workers, exchange=arm.exchange, codec=arm.codec)
        except SpecError as err:
            left_out.append(f"{arm.label}: {arm.exchange} / {arm.codec} ({err})")
            continue
        kept.append(arm)
    return kept, left_out
