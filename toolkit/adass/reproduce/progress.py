"""Progress of a long reproduction: one line per finished run on stderr."""

from __future__ import annotations

import sys

__all__ = ["Progress"]


class Progress:
    """One line per finished run on stderr: ``[claim] k/n label: numbers (seconds)``."""

    def __init__(self, claim: str, total: int, quiet: bool = False) -> None:
        self.claim, self.total, self.quiet, self.done = claim, total, quiet, 0

    def __call__(self, label: str, numbers: str = "", seconds: float | None = None) -> None:
        self.done += 1
        if self.quiet:
            return
        text = f"[{self.claim}] {self.done}/{self.total} {label}"
        text += f": {numbers}" if numbers else ""
        text += f" ({seconds:.1f} s)" if seconds is not None else ""
        print(text, file=sys.stderr, flush=True)
