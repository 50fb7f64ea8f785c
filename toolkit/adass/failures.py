"""Failures a run meets that are not bad input (a lost worker, diverging numbers, a broken checkpoint).

Each one ends the command with one line; :func:`one_line` turns any exception (a gloo or Dask
traceback included) into that line.
"""

from __future__ import annotations

__all__ = ["Diverged", "LostRank", "RunFailure", "one_line"]


class RunFailure(RuntimeError):
    """The run could not go on; the message is one line that names what failed."""


class LostRank(RunFailure):
    """A rank failed, its worker left or it gave no answer in time; a restart from a checkpoint may help."""


class Diverged(RunFailure):
    """The numbers went wrong: losses or gradients non-finite for too many steps in a row, a training
    loss far past its start, or test accuracy at chance epoch after epoch; a restart would not help."""


def one_line(err: BaseException, limit: int = 300) -> str:
    """``err`` as one line: its type and the first non-empty line of its message, at most ``limit`` chars.

    >>> one_line(ValueError("bad\\n  detail"))
    'ValueError: bad'
    """
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
