"""The easiest and hardest samples of an epoch (smallest and largest bounds), as images where they are."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
import torch

from ..data import Dataset
from .selection import latest_epoch
from .style import WIDTH, named

__all__ = ["display_pixels", "extreme_ids", "extreme_samples", "montage"]


def extreme_ids(selection: pd.DataFrame, k: int = 8) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``k`` rows with the smallest and the ``k`` with the largest finite bound in the last epoch."""
    rows = latest_epoch(selection)
    rows = rows[np.isfinite(rows["bound"].to_numpy(float))] if len(rows) else rows
    ordered = rows.sort_values(["bound", "sample_id"], kind="stable")
    return ordered.head(k), ordered.tail(k).iloc[::-1]


def montage(images: np.ndarray, gap: int = 1) -> np.ndarray:
    """``(k, C, H, W)`` images in [0, 1] side by side -> ``(H, k*(W+gap)-gap, 3)`` RGB array."""
    k, c, h, w = images.shape
    rgb = np.repeat(images, 3, axis=1) if c == 1 else images[:, :3]
    out = np.ones((h, k * (w + gap) - gap if k else 1, 3), dtype=np.float32)
    for i in range(k):
        out[:, i * (w + gap) : i * (w + gap) + w] = np.transpose(rgb[i], (1, 2, 0))
    return np.clip(out, 0.0, 1.0)


def display_pixels(dataset: Dataset, ids: np.ndarray) -> np.ndarray:
    """The training images at ``ids`` as ``(k, C, H, W)`` values in [0, 1], ready to draw.

    Standardized data is first taken back to the loader's scale (``dataset.standardization``);
    an image whose values still leave [0, 1] (a loader that does not scale to it) is stretched
    from its own minimum to its maximum, so no image is clipped to black and white.
    """
    x = dataset.x_train[torch.from_numpy(np.array(ids, dtype=np.int64))]  # a fresh array: any strides
    if dataset.standardization is not None:
        x = dataset.standardization.invert(x)
    pixels = x.numpy().astype(np.float32, copy=True)
    for image in pixels:  # each (C, H, W) in place
        lo, hi = float(image.min(initial=0.0)), float(image.max(initial=1.0))
        if lo < 0.0 or hi > 1.0:
            image -= image.min()
            image /= max(float(image.max()), 1e-12)
    return pixels


def _ticks(rows: pd.DataFrame, dataset: Dataset | None) -> list[tuple[float, str]]:
    ticks = []
    for i, (sample, bound) in enumerate(zip(rows["sample_id"], rows["bound"], strict=True)):
        label = f"#{int(sample)}"
        if dataset is not None and 0 <= int(sample) < dataset.n_train:
            label += f" y={int(dataset.y_train[int(sample)])}"
        ticks.append((i + 0.5, f"{label}\n{bound:.2g}"))
    return ticks


def extreme_samples(selection: pd.DataFrame, dataset: Dataset | None = None, k: int = 8,
                    which: str = "hardest") -> hv.Element:  # fmt: skip
    """The ``k`` hardest (largest bound) or easiest (smallest bound) samples of the last epoch.

    Parameters
    ----------
    selection : DataFrame
        SelectionRecord rows.
    dataset : Dataset, optional
        The training data; with image data the samples are drawn as one strip of images.
    k : int
        How many samples.
    which : str
        ``"hardest"`` or ``"easiest"``.

    Returns
    -------
    RGB or Bars
        An image strip labelled ``#id y=label`` and the bound when ``dataset`` holds images, otherwise bars of
        the bounds by sample id.
    """
    easiest, hardest = extreme_ids(selection, k)
    rows = hardest if which == "hardest" else easiest
    title = f"{which} samples" + (" (largest bound)" if which == "hardest" else " (smallest bound)")
    name = f"adass-{which}"
    if dataset is not None and dataset.is_image:
        ids = rows["sample_id"].to_numpy(np.int64)
        rows = rows[(ids >= 0) & (ids < dataset.n_train)]
        ids = rows["sample_id"].to_numpy(np.int64)
        strip = montage(display_pixels(dataset, ids)) if ids.size else np.ones((1, 1, 3), dtype=np.float32)
        # sized for k cells whatever arrived: a live plot keeps the size of its first (blank) frame
        cell_px = WIDTH / max(k, 1)
        image_px = cell_px * dataset.shape[-2] / dataset.shape[-1]  # one cell keeps the image's aspect
        # a blank strip still gets one tick: Bokeh cannot draw an axis whose tick list is empty
        ticks = _ticks(rows, dataset) if ids.size else [(0.5, "no epoch yet")]
        return hv.RGB(strip, bounds=(0, 0, max(len(ids), 1), 1)).opts(
            width=WIDTH, height=int(min(max(image_px + 90, 120), 260)), xticks=ticks, yaxis=None,
            xlabel="", fontsize={"xticks": "7pt"}, title=title, toolbar=None, hooks=[named(name)], framewise=True,
        )  # fmt: skip
    frame = pd.DataFrame(
        {"sample": [f"#{int(s)}" for s in rows["sample_id"]], "bound": rows["bound"].to_numpy(float)}
    )
    if not len(frame):  # one empty bar keeps the sample axis categorical until records arrive
        frame = pd.DataFrame({"sample": ["-"], "bound": [0.0]})
    return hv.Bars(frame, "sample", "bound").opts(
        width=WIDTH, height=180, title=title, tools=["hover"], xrotation=45, hooks=[named(name)], framewise=True,
        color="#c44e52" if which == "hardest" else "#55a868",
    )  # fmt: skip
