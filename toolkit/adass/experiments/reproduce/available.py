"""Which arms this build can run: an arm whose codec or exchange does not parse is left out, by name."""

from __future__ import annotations

from collections.abc import Sequence

from ...config import RunConfig
from ...registry import SpecError
from .grid import Arm

__all__ = ["split_available"]


def split_available(
    base: RunConfig, arms: Sequence[Arm], workers: int, family: str = ""
) -> tuple[list[Arm], list[str]]:
    """The arms whose exchange and codec this build accepts, and a line for each of the others.

    With ``family`` (a coordinate name such as ``technique``), arms left out are reported once per
    value of that coordinate, with the first arm's specs and error.

    Parameters
    ----------
    base : RunConfig
        The grid's run options.
    arms : sequence of Arm
        Candidate arms.
    workers : int
        Replicas the arms run with (an exchange/codec pair is checked for it).
    family : str
        Coordinate that groups the lines of arms left out.
    """
    kept, left_out = [], {}
    for arm in arms:
        try:
            base.replace(workers=workers, exchange=arm.exchange, codec=arm.codec)
        except SpecError as err:
            if family:
                name = str(dict(arm.coords).get(family, arm.label))
                left_out.setdefault(name, f"{name} (all its arms), e.g. {arm.exchange} / {arm.codec} ({err})")
            else:
                left_out[arm.label] = f"{arm.label}: {arm.exchange} / {arm.codec} ({err})"
            continue
        kept.append(arm)
    return kept, list(left_out.values())
