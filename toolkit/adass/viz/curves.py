"""Learning curves from EvalRecords: accuracy, loss and the kept fraction against a chosen x axis."""

from __future__ import annotations

import holoviews as hv
import pandas as pd

from ..metrics import EvalRecord, columns
from .style import HEIGHT, WIDTH, byte_ticks, named

__all__ = [
    "FRACTIONS",
    "METRICS",
    "X_AXES",
    "axis_opts",
    "empty_evals",
    "kept_fraction",
    "learning_curve",
    "loss_curves",
]

#: x axes every learning curve can be drawn against (column -> axis label).
X_AXES: dict[str, str] = {
    "epoch": "epoch",
    "train_s": "training time (s)",
    "backprops": "backprops",
    "wire_bytes": "wire bytes",
}

#: y columns of EvalRecord worth plotting (column -> axis label).
METRICS: dict[str, str] = {
    "test_acc": "test accuracy",
    "test_loss": "test loss",
    "train_loss": "train loss",
    "kept_frac": "kept fraction",
}


def empty_evals() -> pd.DataFrame:
    """An EvalRecord frame with no rows and numeric columns (what a Buffer starts from)."""
    frame = pd.DataFrame({c: pd.Series(dtype="float64") for c in columns(EvalRecord)})
    return frame.astype({"run": "object"})


#: metrics that are shares, drawn on a fixed 0-1 axis
FRACTIONS = ("test_acc", "kept_frac")


def _dims(x: str, y: str) -> tuple[hv.Dimension, hv.Dimension]:
    return hv.Dimension(x, label=X_AXES.get(x, x)), hv.Dimension(y, label=METRICS.get(y, y))


def axis_opts(x: str, y: str | None = None) -> dict:
    """Plot options for ``x`` and ``y``: byte ticks on a byte axis, a 0-1 range for a share."""
    opts: dict = {"xformatter": byte_ticks()} if x.endswith("_bytes") else {}
    if y in FRACTIONS:
        opts["ylim"] = (0.0, 1.02)
    return opts


def learning_curve(evals: pd.DataFrame, y: str = "test_acc", x: str = "epoch", label: str = "") -> hv.Overlay:
    """One metric of one run against ``x``: a line with a marker per epoch.

    Parameters
    ----------
    evals : DataFrame
        EvalRecord rows (``load_run(dir)["eval"]`` or a live buffer).
    y : str
        A column of :data:`METRICS`.
    x : str
        A column of :data:`X_AXES`.
    label : str
        Legend label (a run's name when curves are overlaid).
    """
    xd, yd = _dims(x, y)
    data = evals if len(evals) else empty_evals()
    curve = hv.Curve(data, xd, yd, label=label).opts(tools=["hover"], framewise=True)
    dots = hv.Scatter(data, xd, yd, label=label).opts(size=5, tools=["hover"], framewise=True)
    return (curve * dots).opts(width=WIDTH, height=HEIGHT, title=f"{METRICS.get(y, y)} vs {X_AXES.get(x, x)}",
                               hooks=[named(f"adass-{y}")], **axis_opts(x, y))  # fmt: skip


def loss_curves(evals: pd.DataFrame, x: str = "epoch") -> hv.Overlay:
    """Train and test loss of one run against ``x``: lines with a marker per epoch (one epoch is a dot)."""
    xd, _ = _dims(x, "train_loss")
    data = evals if len(evals) else empty_evals()
    layers = []
    for column, label, color in (("train_loss", "train", "#4c72b0"), ("test_loss", "test", "#dd8452")):
        layers.append(
            hv.Curve(data, xd, column, label=label).opts(tools=["hover"], framewise=True, color=color)
        )
        layers.append(hv.Scatter(data, xd, column, label=label).opts(size=5, framewise=True, color=color))
    return hv.Overlay(layers).opts(width=WIDTH, height=HEIGHT, ylabel="cross-entropy", legend_position="top_right",
                                   title=f"loss vs {X_AXES.get(x, x)}", hooks=[named("adass-loss")],
                                   **axis_opts(x))  # fmt: skip


def kept_fraction(evals: pd.DataFrame) -> hv.Overlay:
    """The share of the training set each epoch kept (1.0 for full epochs)."""
    data = evals if len(evals) else empty_evals()
    xd, yd = _dims("epoch", "kept_frac")
    curve = hv.Curve(data, xd, yd).opts(tools=["hover"], framewise=True)
    dots = hv.Scatter(data, xd, yd).opts(size=5, framewise=True)
    return (curve * dots).opts(width=WIDTH, height=HEIGHT, ylim=(0, 1.02), title="kept fraction per epoch",
                               hooks=[named("adass-kept")])  # fmt: skip
