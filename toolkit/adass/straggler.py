"""A forced straggler (``--straggler``): one replica slowed by a sleep in every step, or each in turn,
so that consistency models can be compared on a cluster whose machines are alike.

``RANK:DELAY_S`` slows replica RANK by DELAY_S seconds per step; ``rotate:DELAY_S:STEPS`` slows
replica ``(step // STEPS) % P`` instead, so the slow one changes every STEPS steps.

>>> str(parse_straggler("2:0.05"))
'2:0.05'
>>> parse_straggler("rotate:0.1:4").delay_s(rank=1, step=5, world=3)
0.1
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .options import parse_int, parse_number
from .registry import SpecError

__all__ = ["Straggler", "parse_straggler"]

_FORMS = "RANK:DELAY_S (e.g. 0:0.05) or rotate:DELAY_S:STEPS (e.g. rotate:0.05:10)"


@dataclass(frozen=True)
class Straggler:
    """Who is slowed and by how much; ``delay_s == 0`` is nobody.

    Attributes
    ----------
    rank : int or None
        The replica always slowed; None when the slow replica rotates.
    extra_s : float
        Seconds added to each slowed step.
    every : int
        Steps each replica stays the slow one, when it rotates.
    """

    rank: int | None = None
    extra_s: float = 0.0
    every: int = 0

    def delay_s(self, rank: int, step: int, world: int) -> float:
        """Seconds replica ``rank`` of ``world`` sleeps at ``step``."""
        if self.rank is None and self.every:
            return self.extra_s if (step // self.every) % world == rank else 0.0
        return self.extra_s if rank == self.rank else 0.0

    def wait(self, rank: int, step: int, world: int) -> None:
        """Sleep as long as :meth:`delay_s` says."""
        seconds = self.delay_s(rank, step, world)
        if seconds > 0:
            time.sleep(seconds)

    def __str__(self) -> str:
        if not self.extra_s:
            return ""
        if self.rank is None:
            return f"rotate:{self.extra_s:g}:{self.every}"
        return f"{self.rank}:{self.extra_s:g}"


def parse_straggler(text: str) -> Straggler:
    """Parse ``RANK:DELAY_S`` or ``rotate:DELAY_S:STEPS``; an empty text slows nobody.

    Raises
    ------
    SpecError
        One line naming the value and the forms allowed.
    """
    text = str(text).strip()
    if not text:
        return Straggler()
    parts = text.split(":")
    try:
        if parts[0] == "rotate" and len(parts) == 3:
            straggler = Straggler(None, parse_number(parts[1]), parse_int(parts[2]))
        elif len(parts) == 2:
            straggler = Straggler(parse_int(parts[0]), parse_number(parts[1]))
        else:
            raise ValueError
    except ValueError:
        raise SpecError(f"straggler {text!r} is not allowed; expected {_FORMS}") from None
    ok = 0 < straggler.extra_s <= 60 and (straggler.rank is None or straggler.rank >= 0)
    if not ok or (straggler.rank is None and straggler.every < 1):
        raise SpecError(f"straggler {text!r} is not allowed; expected {_FORMS}, with 0 < DELAY_S <= 60, "
                        "RANK >= 0 and STEPS >= 1")  # fmt: skip
    return straggler
