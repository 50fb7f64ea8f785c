"""A per-worker timeline of the last steps: compute, encode, comm and decode, end to end."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd

from .style import HEIGHT, PHASE_COLORS, WIDTH, named

__all__ = ["step_phases", "worker_timeline"]


def step_phases(steps: pd.DataFrame, last_steps: int = 30) -> pd.DataFrame:
    """One rectangle per rank, step and phase: ``rank, step, phase, start_s, end_s``.

    Each rank's last ``last_steps`` steps are laid end to end from 0 in step order, every step's phases
    in the order it runs them (the columns ``compute_s`` .. ``decode_s`` of StepRecord).
    """
    parts = []
    for rank, rows in steps.groupby("rank", sort=True):
        rows = rows.sort_values("step").tail(last_steps)
        durations = np.stack([rows.get(f"{p}_s", pd.Series(0.0, index=rows.index)).to_numpy(float)
                              for p in PHASE_COLORS], axis=1).clip(min=0)  # (steps, phases)  # fmt: skip
        ends = np.cumsum(durations.ravel()).reshape(durations.shape)
        starts = ends - durations
        parts.append(pd.DataFrame({
            "rank": int(rank), "step": np.repeat(rows["step"].to_numpy(), len(PHASE_COLORS)),
            "phase": np.tile(list(PHASE_COLORS), len(rows)), "start_s": starts.ravel(), "end_s": ends.ravel(),
        }))  # fmt: skip
    if not parts:
        return pd.DataFrame({"rank": pd.Series(dtype="int64"), "step": pd.Series(dtype="int64"),
                             "phase": pd.Series(dtype="object"), "start_s": pd.Series(dtype="float64"),
                             "end_s": pd.Series(dtype="float64")})  # fmt: skip
    out = pd.concat(parts, ignore_index=True)
    return out[out["end_s"] > out["start_s"]]


def worker_timeline(steps: pd.DataFrame, last_steps: int = 30) -> hv.Overlay:
    """Stacked bars per rank: where each worker's time went over its last ``last_steps`` steps.

    Parameters
    ----------
    steps : DataFrame
        StepRecord rows (live rows may carry ``wire_bytes`` and ``raw_bytes`` too).
    last_steps : int
        How many recent steps per rank to draw.
    """
    phases = step_phases(steps, last_steps)
    ranks = sorted(phases["rank"].unique().tolist()) or [0]
    layers = []
    for phase, color in PHASE_COLORS.items():
        rows = phases[phases["phase"] == phase]
        rects = (rows["start_s"].to_numpy(), rows["rank"].to_numpy(float) - 0.38,
                 rows["end_s"].to_numpy(), rows["rank"].to_numpy(float) + 0.38, rows["step"].to_numpy())  # fmt: skip
        layers.append(hv.Rectangles(rects, kdims=["x0", "y0", "x1", "y1"], vdims=["step"], label=phase)
                      .opts(color=color, line_alpha=0.0, tools=["hover"], framewise=True))  # fmt: skip
    return hv.Overlay(layers).opts(
        width=WIDTH + 200, height=HEIGHT, xlabel="seconds (last steps, end to end)", ylabel="rank",
        yticks=[(r, f"rank {r}") for r in ranks], legend_position="right", hooks=[named("adass-timeline")],
        title=f"per-worker timeline (last {last_steps} steps)",
    )  # fmt: skip
