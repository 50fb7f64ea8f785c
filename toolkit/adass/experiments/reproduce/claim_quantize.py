"""Claim 2, Q-ADASS: QSGD inside the ring (requantize or shared_scale, error feedback off and on) reaches
fp32's final accuracy, with its wire bytes and modelled step time under 1 and 10 Gbit links.
"""

from __future__ import annotations

from pathlib import Path

from ...tables import markdown_table
from .arms import LINKS
from .claim_grid import count_grid, measure_grid, plot_suffix, setting_line
from .grid import REFERENCE, Arm
from .parallel import Runner
from .plan import Plan
from .plots import bar_plot
from .section import Section
from .verdict import Check, plus_minus

__all__ = ["CLAIM", "count", "arms", "checks", "run", "tolerance_pts"]

CLAIM = "Q-ADASS quantizes inside the ring without affecting final accuracy"


def tolerance_pts(bits: int, ef: bool) -> float | None:
    """The accuracy target against fp32 (points): 0.5 from 4 bits up, 1 for 2 bits with error
    feedback; None (reported only) for fewer bits without it."""
    if bits >= 4:
        return 0.5
    return 1.0 if ef and bits >= 2 else None


def arms(plan: Plan) -> list[Arm]:
    """bits x ring strategy x error feedback off/on, from the plan's lists."""
    return [
        Arm(f"qsgd {bits} bits, {strategy}, {ef}", f"ring:strategy={strategy}", template.format(bits=bits),
            (("bits", bits), ("strategy", strategy), ("ef", ef == "ef")))
        for bits in plan.q_bits for strategy in plan.q_strategies for ef, template in plan.q_codecs.items()
    ]  # fmt: skip


def count(plan: Plan) -> dict[str, int]:
    """Runs of this claim's grid on each data set."""
    return count_grid(plan, arms(plan))


def checks(table) -> list[Check]:
    """One accuracy check per arm that has a target (``summarise_grid`` rows with bits, ef, and the
    data set's ``setting`` where there is one)."""
    out = []
    for row in table[table["arm"] != REFERENCE.label].itertuples(index=False):
        tolerance = tolerance_pts(int(row.bits), bool(row.ef))
        if tolerance is None:
            continue
        out.append(Check(
            f"{int(row.bits)} bits, {row.strategy}, {'ef' if row.ef else 'no ef'}",
            f"accuracy within {tolerance:g} points of fp32", row.deficit_pts <= tolerance,
            f"{plus_minus(row.deficit_pts, row.deficit_se_pts)} points below fp32", getattr(row, "setting", ""),
        ))  # fmt: skip
    return out


def run(plan: Plan, out: Path, runner: Runner) -> Section:
    """Run the grid on ``plan.grid_workers`` virtual replicas; plots go to ``out/plots``."""
    table, runs, left_out = measure_grid(plan, arms(plan), "claim 2", runner)
    shown = table.drop(columns=["exchange", "codec"])
    section = Section("quantize", CLAIM, tables={"summary": table, "runs": runs}, not_run=left_out)
    section.lines = [
        setting_line(plan) + " `deficit_pts`: fp32's seed-mean accuracy "
        "minus the arm's, in points, with the standard error of the per-seed differences; `wire_frac`: "
        f"wire bytes over fp32's; `step_ms_*`: modelled step time under {', '.join(map(repr, LINKS.values()))}.",
        "", markdown_table(shown), "",
    ]  # fmt: skip
    plots = out / "plots"
    for setting, part in table.groupby("setting", sort=False):
        arms_only, suffix = part[part["arm"] != REFERENCE.label], plot_suffix(plan, str(setting))
        bar_plot(plots / f"quantize_accuracy{suffix}.png", list(arms_only["arm"]), list(arms_only["deficit_pts"]),
                 list(arms_only["deficit_se_pts"]), "points below fp32 (seed mean ± se)",
                 f"Q-ADASS: accuracy deficit against fp32, {setting}", line=0.5, line_label="0.5 points")  # fmt: skip
        bar_plot(plots / f"quantize_step_1gbit{suffix}.png", list(part["arm"]), list(part["step_ms_1gbit"]),
                 [float("nan")] * len(part), f"modelled step time, ms ({LINKS['1gbit']})",
                 f"Q-ADASS: modelled step time at 1 Gbit, {setting}")  # fmt: skip
        section.plots += [f"quantize_accuracy{suffix}.png", f"quantize_step_1gbit{suffix}.png"]
    section.checks = checks(table)
    return section
