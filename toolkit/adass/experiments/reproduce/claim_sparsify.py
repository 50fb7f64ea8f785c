"""Claim 3, RS-ADASS: random-k inside the ring sends a small share of the coordinates at fp32's final
accuracy; every technique (error feedback, momentum correction, ratio warm-up, 8-bit stacking) off and on.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...tables import markdown_table
from .claim_grid import count_grid, measure_grid, plot_suffix, setting_line
from .grid import REFERENCE, Arm
from .parallel import Runner
from .plan import Plan
from .plots import line_plot
from .section import Section
from .verdict import Check, plus_minus

__all__ = ["CLAIM", "count", "WIRE_SLACK", "arms", "checks", "run", "tolerance_pts"]

CLAIM = "RS-ADASS sends only a small part of the dimensions inside the ring without sacrificing accuracy"
#: wire bytes may exceed the kept share of fp32's by this share of fp32's (headers, scales)
WIRE_SLACK = 0.01


def tolerance_pts(ratio: float) -> float | None:
    """The accuracy target against fp32 (points): 0.5 at ratio 0.1 and above, 1 down to 0.01; None
    (reported only) below."""
    if ratio >= 0.1:
        return 0.5
    return 1.0 if ratio >= 0.01 else None


def arms(plan: Plan) -> list[Arm]:
    """ratio x the plan's technique arms."""
    return [Arm(f"{label}, ratio {ratio:g}", exchange, template.format(ratio=ratio),
                (("ratio", ratio), ("technique", label)))
            for ratio in plan.rs_ratios for label, exchange, template in plan.rs_arms]  # fmt: skip


def count(plan: Plan) -> dict[str, int]:
    """Runs of this claim's grid on each data set (its own extra settings included)."""
    return count_grid(plan.sparsify(), arms(plan), family="technique")


def checks(table: pd.DataFrame) -> list[Check]:
    """Per arm with a target: accuracy within it of fp32, and wire bytes at most ratio + 1% of fp32's
    (on the row's data set ``setting``, where the table has one)."""
    out = []
    for row in table[table["arm"] != REFERENCE.label].itertuples(index=False):
        tolerance = tolerance_pts(float(row.ratio))
        if tolerance is None:
            continue
        when, setting = f"ratio {row.ratio:g}, {row.technique}", getattr(row, "setting", "")
        out.append(Check(when, f"accuracy within {tolerance:g} points of fp32", row.deficit_pts <= tolerance,
                         f"{plus_minus(row.deficit_pts, row.deficit_se_pts)} points below fp32", setting))  # fmt: skip
        limit = row.ratio + WIRE_SLACK
        out.append(Check(when, f"wire bytes at most {limit:.3g} of fp32's", row.wire_frac <= limit,
                         f"{row.wire_frac:.4f} of fp32's", setting))  # fmt: skip
    return out


def run(plan: Plan, out: Path, runner: Runner) -> Section:
    """Run the grid on ``plan.grid_workers`` virtual replicas, on the shared settings and the
    plan's ``rs_settings``; plots go to ``out/plots``."""
    plan = plan.sparsify()
    table, runs, left_out = measure_grid(plan, arms(plan), "claim 3", runner, family="technique")
    section = Section("sparsify", CLAIM, tables={"summary": table, "runs": runs}, not_run=left_out)
    section.lines = [
        setting_line(plan) + " Random-k runs unscaled (`scale=false`), "
        "the coordinates shared by all replicas. `wire_frac` is over the whole run (a ratio warm-up "
        "sends more in its first epochs).", "",
        markdown_table(table.drop(columns=["exchange"])), "",
    ]  # fmt: skip
    for setting, part in table.groupby("setting", sort=False):
        sparse, name = (
            part[part["arm"] != REFERENCE.label],
            f"sparsify_accuracy{plot_suffix(plan, str(setting))}.png",
        )
        if sparse.empty:
            continue
        line_plot(out / "plots" / name, sparse, "ratio", "deficit_pts", "technique",
                  "kept share of coordinates (ratio)", "points below fp32 (seed mean ± se)",
                  f"RS-ADASS: accuracy deficit against fp32, {setting}", logx=True, yerr="deficit_se_pts",
                  line=0.5, line_label="0.5 points")  # fmt: skip
        section.plots.append(name)
    section.checks = checks(table)
    return section
