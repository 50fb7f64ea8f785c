"""The sample x epoch kept raster, aggregated so that 60,000 samples stay a small image.

:class:`KeptGrid` gathers SelectionRecord frames as they arrive (one per rank and epoch) into a
``(samples, epochs)`` array; :func:`kept_raster` bins consecutive samples into at most ``max_rows``
rows whose pixels hold the share of the bin that was kept.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd

from .style import HEIGHT, WIDTH, named

__all__ = ["KeptGrid", "aggregate_rows", "kept_raster"]


class KeptGrid:
    """``kept`` per sample and epoch, filled in as SelectionRecord frames arrive (NaN: not reported)."""

    def __init__(self) -> None:
        self.ids = np.empty(0, dtype=np.int64)  # sorted sample ids, one row each
        self.columns: dict[int, np.ndarray] = {}  # epoch -> (samples,) float32 of 1 kept / 0 dropped

    def add(self, frame: pd.DataFrame) -> None:
        """Merge SelectionRecord rows (any ranks, any epochs)."""
        if not len(frame):
            return
        ids = frame["sample_id"].to_numpy(np.int64)
        fresh = np.setdiff1d(ids, self.ids)
        if fresh.size:
            merged = np.union1d(self.ids, fresh)
            where = np.searchsorted(merged, self.ids)
            for epoch, column in self.columns.items():
                grown = np.full(merged.size, np.nan, dtype=np.float32)
                grown[where] = column
                self.columns[epoch] = grown
            self.ids = merged
        epochs = frame["epoch"].to_numpy(np.int64)
        kept = frame["kept"].to_numpy(bool).astype(np.float32)
        rows = np.searchsorted(self.ids, ids)
        for epoch in np.unique(epochs):
            column = self.columns.setdefault(int(epoch), np.full(self.ids.size, np.nan, dtype=np.float32))
            mask = epochs == epoch
            column[rows[mask]] = kept[mask]

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """``(epochs, grid)``: consecutive epochs and the ``(samples, epochs)`` float32 grid."""
        if not self.columns:
            return np.empty(0, dtype=np.int64), np.empty((self.ids.size, 0), dtype=np.float32)
        epochs = np.arange(min(self.columns), max(self.columns) + 1)
        empty = np.full(self.ids.size, np.nan, dtype=np.float32)
        return epochs, np.stack([self.columns.get(int(e), empty) for e in epochs], axis=1)

    @classmethod
    def from_frame(cls, selection: pd.DataFrame) -> KeptGrid:
        """A grid holding ``selection`` (SelectionRecord rows)."""
        grid = cls()
        grid.add(selection)
        return grid


def aggregate_rows(grid: np.ndarray, max_rows: int) -> np.ndarray:
    """Mean of consecutive row blocks so at most ``max_rows`` rows remain (NaN-aware)."""
    n = grid.shape[0]
    if n <= max_rows:
        return grid
    size = -(-n // max_rows)  # ceil: rows per bin
    padded = np.full((size * (-(-n // size)), grid.shape[1]), np.nan, dtype=np.float32)
    padded[:n] = grid
    blocks = padded.reshape(-1, size, grid.shape[1])
    seen = np.isfinite(blocks).sum(axis=1)
    total = np.nansum(blocks, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(seen > 0, total / np.maximum(seen, 1), np.nan).astype(np.float32)


def kept_raster(grid: KeptGrid | pd.DataFrame, max_rows: int = 400, order: str = "id") -> hv.Image:
    """Which samples each epoch kept, as an image: x epoch, y sample, colour the kept share.

    Parameters
    ----------
    grid : KeptGrid or DataFrame
        Gathered selection, or SelectionRecord rows to gather.
    max_rows : int
        Most image rows; with more samples, each row is the mean of a block of consecutive samples,
        so the page receives at most ``max_rows x epochs`` pixels whatever the dataset size.
    order : str
        ``"id"`` (sample id) or ``"kept"`` (samples kept least often at the bottom).
    """
    if isinstance(grid, pd.DataFrame):
        grid = KeptGrid.from_frame(grid)
    epochs, values = grid.matrix()
    n = values.shape[0]
    if order == "kept" and n:
        values = values[np.argsort(np.nansum(values, axis=1), kind="stable")]
    shown = aggregate_rows(values, max_rows) if values.size else np.full((1, 1), np.nan, dtype=np.float32)
    first = int(epochs[0]) if epochs.size else 0
    last = int(epochs[-1]) if epochs.size else 0
    per_row = -(-max(n, 1) // shown.shape[0])
    ylabel = (
        "sample"
        + (f" (rows of {per_row})" if per_row > 1 else "")
        + (", by kept count" if order == "kept" else "")
    )
    # an Image's first array row is its top; put sample 0 at the bottom
    image = hv.Image(shown[::-1], bounds=(first - 0.5, 0, last + 0.5, max(n, 1)),
                     kdims=["epoch", "sample"], vdims=[hv.Dimension("kept", range=(0, 1))])  # fmt: skip
    return image.opts(
        width=WIDTH, height=HEIGHT, cmap="Blues", clim=(0, 1), colorbar=True, ylabel=ylabel,
        title=f"kept raster: {n} samples x {epochs.size} epochs", tools=["hover"], framewise=True,
        clipping_colors={"NaN": "#f4f4f4"}, hooks=[named("adass-raster")],
    )  # fmt: skip
