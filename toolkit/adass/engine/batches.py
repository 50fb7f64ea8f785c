"""How a replica cuts its epoch's selection into the epoch's steps.

>>> [(s.start, s.stop) for s in in_order(5, 3, 2)]
[(0, 2), (2, 4), (4, 5)]
>>> [(s.start, s.stop) for s in spread_evenly(5, 3, 2)]
[(0, 1), (1, 3), (3, 5)]
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Split", "in_order", "spread_evenly"]

#: ``split(n, steps, batch_size)`` -> one slice of the ``n`` selected samples per step
Split = Callable[[int, int, int], list[slice]]


def in_order(n: int, steps: int, batch_size: int) -> list[slice]:
    """Consecutive batches of ``batch_size`` (the last may be short): one process's Epoch-SGD."""
    return [slice(s * batch_size, min(n, (s + 1) * batch_size)) for s in range(steps)]


def spread_evenly(n: int, steps: int, batch_size: int) -> list[slice]:
    """The ``n`` samples split evenly over ``steps``: a replica keeping more samples than another
    takes larger local batches instead of running on alone at the epoch's end (where every step
    would see a small, lopsided global batch at the full learning rate)."""
    return [slice(s * n // steps, (s + 1) * n // steps) for s in range(steps)]
