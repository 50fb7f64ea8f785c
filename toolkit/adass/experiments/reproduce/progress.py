"""Progress of a long reproduction: one line per finished task on stderr, with the runs reused and an ETA."""

from __future__ import annotations

import sys
import time

__all__ = ["ETA_AFTER", "Progress"]

#: runs that must have run (not been reused) before an ETA is shown: the first ones pay start-up costs
ETA_AFTER = 3


def _duration(seconds: float) -> str:
    return (
        f"{seconds:.0f} s"
        if seconds < 90
        else f"{seconds / 60:.1f} min"
        if seconds < 5400
        else f"{seconds / 3600:.1f} h"
    )


class Progress:
    """Lines ``[claim] k/n label: numbers (seconds)``, then ``· r reused`` and ``· ETA ...`` when known.

    The ETA is the wall time since this part started over the runs that actually ran, times the runs
    still to go: with N worker processes it counts N runs at once, and reused runs cost it nothing.
    """

    def __init__(self, claim: str, total: int, quiet: bool = False) -> None:
        self.claim, self.total, self.quiet = claim, total, quiet
        self.done = self.reused = 0
        self.start = time.perf_counter()

    def __call__(self, label: str, numbers: str = "", seconds: float | None = None, runs: int = 1,
                 reused: int = 0) -> None:  # fmt: skip
        self.done += runs
        self.reused += reused
        if self.quiet:
            return
        text = f"[{self.claim}] {self.done}/{self.total} {label}"
        text += f": {numbers}" if numbers else ""
        if reused == runs:
            text += " (reused)"
        elif seconds is not None:
            text += f" ({seconds:.1f} s)"
        if self.reused:
            text += f" · {self.reused} reused"
        ran = self.done - self.reused
        if ran >= ETA_AFTER and self.done < self.total:
            rate = (time.perf_counter() - self.start) / ran
            text += f" · ETA {_duration(rate * (self.total - self.done))}"
        print(text, file=sys.stderr, flush=True)
