"""The distribution of per-sample bounds in one epoch, kept and dropped, with the selection threshold."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd

from .style import HEIGHT, WIDTH, named

__all__ = ["bound_histogram", "latest_epoch", "selection_threshold"]


def latest_epoch(selection: pd.DataFrame) -> pd.DataFrame:
    """The SelectionRecord rows of the last epoch present (every rank's)."""
    if not len(selection):
        return selection
    return selection[selection["epoch"] == selection["epoch"].max()]


#: a cut is drawn only where at least this share of the kept samples lies above every dropped one
ABOVE_CUT = 0.1


def selection_threshold(epoch_rows: pd.DataFrame) -> float | None:
    """The bound above which the epoch kept every sample: the smallest kept bound above every
    dropped one.

    ADASS drops the smallest bounds first. Without resampling every dropped bound lies at or below
    every kept one; with it (``resample=p``, the default) a random part of the samples below the
    cut is kept too, and everything above it still is. Policies that drop by other rules (random
    subsets, loss percentiles) leave no such range: fewer than ``ABOVE_CUT`` of their kept samples
    lie above their highest dropped bound, and they give ``None``, as do epochs that dropped
    nothing and empty epochs.
    """
    if not len(epoch_rows):
        return None
    kept = epoch_rows["kept"].to_numpy(bool)
    bound = epoch_rows["bound"].to_numpy(float)
    if kept.all() or not kept.any():
        return None
    lowest_kept, highest_dropped = bound[kept].min(), bound[~kept].max()
    if highest_dropped <= lowest_kept:
        return float(lowest_kept)
    above = kept & (bound > highest_dropped)
    return float(bound[above].min()) if above.sum() >= ABOVE_CUT * kept.sum() else None


def _log_bounds(bound: np.ndarray) -> np.ndarray:
    positive = bound[np.isfinite(bound) & (bound > 0)]
    return np.log10(positive)


def bound_histogram(selection: pd.DataFrame, epoch: int | None = None, bins: int = 40) -> hv.Overlay:
    """Histogram of log10 bounds for one epoch (the last by default), kept and dropped stacked apart.

    Parameters
    ----------
    selection : DataFrame
        SelectionRecord rows (one epoch or many).
    epoch : int, optional
        Which epoch; the last one present if omitted.
    bins : int
        Number of bins over the finite, positive bounds.

    Returns
    -------
    Overlay
        Kept and dropped histograms on shared bins and a vertical line at the threshold (see
        :func:`selection_threshold`; hidden where there is none). Samples never visited have an
        infinite bound and are counted in the title instead.
    """
    rows = latest_epoch(selection) if epoch is None else selection[selection["epoch"] == epoch]
    bound = rows["bound"].to_numpy(float) if len(rows) else np.empty(0)
    kept = rows["kept"].to_numpy(bool) if len(rows) else np.empty(0, bool)
    logs = _log_bounds(bound)
    lo, hi = (float(logs.min()), float(logs.max())) if logs.size else (0.0, 1.0)
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
    kept_counts, _ = np.histogram(_log_bounds(bound[kept]), edges)
    dropped_counts, _ = np.histogram(_log_bounds(bound[~kept]), edges)
    x = hv.Dimension("log10_bound", label="log10 bound")
    count = hv.Dimension("samples")
    threshold = selection_threshold(rows)
    line_x = np.log10(threshold) if threshold is not None and threshold > 0 else lo
    unvisited = int(np.isinf(bound).sum())
    which = f"epoch {int(rows['epoch'].iloc[0])}" if len(rows) else "no epoch yet"
    title = f"bounds, {which}" + (f" ({unvisited} unvisited)" if unvisited else "")
    style = {"fill_alpha": 0.6, "line_alpha": 0.3, "framewise": True}
    line = hv.VLine(line_x, label="threshold").opts(color="black", line_dash="dashed", line_width=2,
                                                    line_alpha=1.0 if threshold is not None else 0.0)  # fmt: skip
    return (
        hv.Histogram((edges, kept_counts), kdims=[x], vdims=[count], label="kept").opts(**style)
        * hv.Histogram((edges, dropped_counts), kdims=[x], vdims=[count], label="dropped").opts(**style)
        * line
    ).opts(width=WIDTH, height=HEIGHT, title=title, legend_position="top_left", hooks=[named("adass-bounds")])
