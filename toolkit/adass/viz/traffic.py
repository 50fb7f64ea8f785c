"""Traffic views from TrafficRecords: a step x link heatmap and raw vs wire bytes per chunk."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd

from ..metrics import TrafficRecord, columns
from .style import HEIGHT, NO_EXCHANGE, WIDTH, byte_ticks, last_steps_text, named

__all__ = ["chunk_bytes", "empty_traffic", "last_steps", "link_names", "traffic_heatmap"]


def empty_traffic() -> pd.DataFrame:
    """A TrafficRecord frame with no rows and typed columns."""
    return pd.DataFrame(
        {c: pd.Series(dtype="object" if c in ("run", "phase") else "int64") for c in columns(TrafficRecord)}
    )


def link_names(traffic: pd.DataFrame) -> pd.Series:
    """``"src→dst"`` per row (ranks)."""
    return traffic["src"].astype(int).astype(str) + "→" + traffic["dst"].astype(int).astype(str)


def last_steps(traffic: pd.DataFrame, steps: int) -> pd.DataFrame:
    """Rows of the last ``steps`` distinct steps present."""
    if not len(traffic):
        return traffic
    kept = np.sort(traffic["step"].unique())[-steps:]
    return traffic[traffic["step"] >= kept[0]]


def _title(title: str, traffic: pd.DataFrame, world: int | None) -> str:
    """``title``, unless the run trains in one process (``world`` 0) and so has no traffic to show."""
    return NO_EXCHANGE if world == 0 and not len(traffic) else title


def traffic_heatmap(traffic: pd.DataFrame, max_steps: int = 200, world: int | None = None) -> hv.HeatMap:
    """Wire bytes per step and link (summed over phases and chunks) for the last ``max_steps`` steps.

    Parameters
    ----------
    traffic : DataFrame
        TrafficRecord rows; live runs send every 10th step's detail, so steps may be sparse.
    max_steps : int
        How many of the most recent steps to show.
    world : int, optional
        The run's ranks, when known; 0 (it trains in one process) titles the empty view so.
    """
    rows = last_steps(traffic, max_steps)
    if len(rows):
        frame = (
            rows.assign(link=link_names(rows)).groupby(["step", "link"], as_index=False)["wire_bytes"].sum()
        )
    else:  # one blank cell keeps the link axis categorical until traffic arrives
        frame = pd.DataFrame({"step": [0], "link": ["-"], "wire_bytes": [np.nan]})
    steps = int(rows["step"].nunique()) if len(rows) else 0
    return hv.HeatMap(frame, ["step", "link"], hv.Dimension("wire_bytes", label="wire bytes")).opts(
        width=WIDTH, height=HEIGHT, cmap="viridis", colorbar=True, tools=["hover"], framewise=True,
        colorbar_opts={"formatter": byte_ticks()}, hooks=[named("adass-traffic")],
        clim=(0.0, max(float(np.nan_to_num(frame["wire_bytes"].max())), 1.0)),  # from 0: even cells read well
        title=_title(f"wire bytes per step and link, {last_steps_text(steps)}", traffic, world),
    )  # fmt: skip


def chunk_bytes(traffic: pd.DataFrame, world: int | None = None) -> hv.Bars:
    """Raw and wire bytes per chunk, averaged over the steps present (what a codec saves, chunk by chunk).

    Grey bars are the raw fp32 size, blue the encoded payload; the legend says which is which. A
    low-rank codec's two rounds show as chunks of their own (``p 0`` ... then ``q 0`` ...), fp32's
    raw bytes under ``p``. A ``world`` of 0 (the run trains in one process) titles the empty view so.
    """
    if len(traffic):
        # a low-rank codec's rounds (``p.reduce_scatter``) have chunks of their own: "p 0", "q 0"
        bytes_of = ["raw_bytes", "wire_bytes"]
        rounds = traffic.assign(round=traffic["phase"].str.rpartition(".")[0])
        per_step = rounds.groupby(["step", "round", "chunk"], as_index=False)[bytes_of].sum()
        means = per_step.groupby(["round", "chunk"], as_index=False)[bytes_of].mean()
        ids = means["chunk"].astype(int).astype(str)
        means = means.assign(chunk=(means["round"] + " ").where(means["round"] != "", "") + ids)
        frame = means.melt(
            id_vars="chunk", value_vars=["raw_bytes", "wire_bytes"], var_name="kind", value_name="bytes"
        )
        frame["kind"] = frame["kind"].str.removesuffix("_bytes")
        ratio = means["wire_bytes"].sum() / max(means["raw_bytes"].sum(), 1)
        title = f"bytes per chunk and step (wire/raw {ratio:.2f})"
    else:  # zero bars keep the chunk axis categorical until traffic arrives
        frame = pd.DataFrame({"chunk": ["0", "0"], "kind": ["raw", "wire"], "bytes": [0.0, 0.0]})
        title = _title("bytes per chunk and step", traffic, world)
    return hv.Bars(frame, ["chunk", "kind"], hv.Dimension("bytes", label="bytes per step")).opts(
        width=WIDTH, height=HEIGHT, tools=["hover"], framewise=True, title=title, multi_level=False,
        cmap={"raw": "#bbbbbb", "wire": "#4c72b0"}, show_legend=True, yformatter=byte_ticks(),
        legend_position="right", hooks=[named("adass-chunks")],  # beside the bars, never over one
    )  # fmt: skip
