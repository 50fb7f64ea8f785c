"""An epoch's batches of samples gathered a chunk of steps at a time: one gather (and one move to the
model's device) per chunk instead of two per step; each step then takes its rows as a view.

>>> x, y = torch.arange(10.0).reshape(5, 2), torch.arange(5)
>>> rows = EpochRows(x, y, torch.tensor([4, 0, 3, 1, 2]), [slice(0, 2), slice(2, 5)], torch.device("cpu"))
>>> [(bx.tolist(), by.tolist()) for bx, by in (rows.next(), rows.next())]
[([[8.0, 9.0], [0.0, 1.0]], [4, 0]), ([[6.0, 7.0], [2.0, 3.0], [4.0, 5.0]], [3, 1, 2])]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["CHUNK_BYTES", "EpochRows"]

#: rows of about this many bytes (samples and labels) are gathered at once: the whole epoch of a small
#: data set, a few batches of a large one
CHUNK_BYTES = 16 << 20


class EpochRows:
    """The rows of ``(x, y)`` that consecutive batches of ``order`` visit, step after step.

    Each call of :meth:`next` gives the next batch's samples and labels on ``device``: views of a
    chunk gathered (``index_select``) and moved once for several batches. The values are those a
    per-step ``x.index_select(0, order[part])`` gives, so training is the same bit for bit.

    Parameters
    ----------
    x, y : Tensor
        ``(n, ...)`` samples and ``(n,)`` labels on the host.
    order : Tensor
        ``(m,)`` int64 rows of ``x`` in visiting order.
    batches : sequence of slice
        The steps' batches, consecutive slices of ``order`` (see :func:`consecutive`).
    device : torch.device
        Where the model takes its inputs.
    chunk_bytes : int
        About how many bytes of rows one gather takes (at least one batch).
    """

    def __init__(
        self, x: torch.Tensor, y: torch.Tensor, order: torch.Tensor, batches: Sequence[slice],
        device: torch.device, chunk_bytes: int = CHUNK_BYTES,
    ) -> None:  # fmt: skip
        if not consecutive(batches):
            raise ValueError("EpochRows: the batches must be consecutive slices of the order")
        self.x, self.y, self.order, self.device = x, y, order, device
        self.sizes = [b.stop - b.start for b in batches]
        row_bytes = x[:1].nbytes + y[:1].nbytes
        self.chunk_rows = max(1, chunk_bytes // max(1, row_bytes))
        self.start = batches[0].start if batches else 0  # of the next chunk, in ``order``
        self.step = 0  # the next batch, in ``batches``
        self.ready: list[tuple[torch.Tensor, torch.Tensor]] = []  # the chunk's batches left, last first

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The next batch's ``(x, y)``, gathering the next chunk where the last one is used up."""
        if not self.ready:
            self._gather()
        self.step += 1
        return self.ready.pop()

    def _gather(self) -> None:
        """Gather the rows of the next batches, as many whole ones as fit in a chunk (at least one)."""
        end, rows = self.step, 0
        while end < len(self.sizes) and (end == self.step or rows + self.sizes[end] <= self.chunk_rows):
            rows += self.sizes[end]
            end += 1
        idx = self.order[self.start : self.start + rows]
        x = self.x.index_select(0, idx).to(self.device)
        y = self.y.index_select(0, idx).to(self.device)
        sizes = self.sizes[self.step : end]
        self.ready = list(zip(x.split(sizes), y.split(sizes), strict=True))[::-1]
        self.start += rows


def consecutive(batches: Sequence[slice]) -> bool:
    """Whether every batch starts where the one before it stopped (what both splits of
    :mod:`adass.engine.batches` give)."""
    return all(b.start == a.stop for a, b in zip(batches, batches[1:], strict=False))
