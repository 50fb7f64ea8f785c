"""How stale every replica's gradients were: per step, the parameter version a gradient was applied
to minus the version it was computed on (a ``staleness`` column of step records; 0 for a synchronous
exchange, and for records that have no such column)."""

from __future__ import annotations

import holoviews as hv
import pandas as pd

from .style import HEIGHT, WIDTH, named

__all__ = ["staleness_counts", "staleness_histogram"]

#: what the view says when every step is fresh, as a synchronous exchange's always are
SYNC_CAPTION = "staleness 0 on every step (synchronous)"


_NO_STEPS = pd.DataFrame({"rank": [0], "staleness": [0], "steps": [0]})


def staleness_counts(steps: pd.DataFrame) -> pd.DataFrame:
    """Steps per rank and staleness: ``rank, staleness, steps`` (every rank's values in order).

    Rows without a ``staleness`` column (runs recorded before it existed) count as staleness 0.
    """
    if not len(steps):
        return pd.DataFrame({k: pd.Series(dtype="int64") for k in ("rank", "staleness", "steps")})
    stale = steps["staleness"] if "staleness" in steps else pd.Series(0, index=steps.index)
    frame = pd.DataFrame(
        {"rank": steps["rank"].astype("int64"), "staleness": stale.fillna(0).astype("int64")}
    )
    counts = frame.groupby(["rank", "staleness"]).size().rename("steps").reset_index()
    return counts.astype("int64")


def staleness_histogram(steps: pd.DataFrame) -> hv.Bars:
    """Bars per staleness value, stacked by rank (a legend names them): how many steps were that stale.

    Parameters
    ----------
    steps : DataFrame
        StepRecord rows (live rows may carry more columns; a missing ``staleness`` reads as 0).

    Returns
    -------
    Bars
        Titled with the mean and largest staleness over the rows, or, where every step had
        staleness 0 (a synchronous run), with a caption saying so.
    """
    counts = staleness_counts(steps)
    # the x axis in staleness order; before any step one empty bar, since stacked bars need a row and
    # a live plot keeps the legend (or its lack) of its first drawing
    ordered = counts.sort_values(["staleness", "rank"], kind="stable") if len(counts) else _NO_STEPS
    table = ordered.assign(
        rank=ordered["rank"].map(lambda r: f"rank {r}"), staleness=ordered["staleness"].astype(str)
    )
    if not len(counts):
        title = "staleness: no steps yet"
    elif counts["staleness"].max() == 0:
        title = SYNC_CAPTION
    else:
        total = counts["steps"].sum()
        mean = float((counts["staleness"] * counts["steps"]).sum()) / total
        title = (
            f"staleness: mean {mean:.2f}, max {int(counts['staleness'].max())} steps over {int(total)} steps"
        )
    return hv.Bars(table, ["staleness", "rank"], "steps").opts(
        width=WIDTH, height=HEIGHT, xlabel="staleness (versions behind)", ylabel="steps", stacked=True,
        legend_position="top_right", tools=["hover"], title=title, hooks=[named("adass-staleness")],
    )  # fmt: skip
