"""What claims 2 and 3 share: a grid of codec arms against fp32 on virtual replicas, on every grid
setting of the plan, and how a setting reads."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ...config import RunConfig
from .arms import LINKS
from .available import split_available
from .grid import Arm, grid_tasks, summarise_grid
from .parallel import Runner
from .plan import Plan

__all__ = ["count_grid", "measure_grid", "plot_suffix", "setting_line"]


def _bases(plan: Plan) -> dict[str, RunConfig]:
    return {name: RunConfig.from_flat(**options, sampler="full", seed=0, threads=1)
            for name, options in plan.grids.items()}  # fmt: skip


def count_grid(plan: Plan, arms: Sequence[Arm], family: str = "") -> dict[str, int]:
    """Runs of the grid on each setting: the arms this build accepts and fp32, every seed."""
    return {name: (len(split_available(base, arms, plan.grid_workers, family)[0]) + 1) * plan.seeds
            for name, base in _bases(plan).items()}  # fmt: skip


def measure_grid(plan: Plan, arms: Sequence[Arm], name: str, runner: Runner,
                 family: str = "") -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:  # fmt: skip
    """Run the arms this build accepts (and fp32) for ``plan.seeds`` seeds on ``plan.grid_workers``
    virtual replicas, on every grid setting; return the summary and the per-run rows (both with a
    ``setting`` column first) and a line for each arm left out."""
    tasks, columns, left_out = [], [], {}
    several = len(plan.grids) > 1
    for setting, base in _bases(plan).items():
        chosen, missing = split_available(base, arms, plan.grid_workers, family=family)
        left_out.update(dict.fromkeys(missing))
        more, cols = grid_tasks(base, chosen, plan.seeds, plan.grid_workers, LINKS, runner.store,
                                prefix=f"{setting}: " if several else "")  # fmt: skip
        tasks += more
        columns += [{"setting": setting, **c} for c in cols]
    rows = runner.run(tasks, runner.progress(name, len(tasks)))
    runs = pd.DataFrame([{**c, **row} for c, row in zip(columns, rows, strict=True)])
    tables = [
        summarise_grid(group.drop(columns="setting"), LINKS)
        for _, group in runs.groupby("setting", sort=False)
    ]
    for setting, table in zip(plan.grids, tables, strict=True):
        table.insert(0, "setting", setting)
    return pd.concat(tables, ignore_index=True), runs, list(left_out)


def setting_line(plan: Plan) -> str:
    """The grids' data, model, schedule and replicas, as the report states them."""
    settings = "; ".join(
        f"{name}: `{s['data']}`, `{s['model']}`, {s['epochs']} epochs, global batch {s['batch_size']}, lr {s['lr']}"
        for name, s in plan.grids.items()
    )
    return (f"{settings} (cosine), sampler `full`, P={plan.grid_workers} virtual replicas on the ring, "
            f"{plan.seeds} seed(s); every arm has fp32's epochs and learning-rate schedule of its setting.")  # fmt: skip


def plot_suffix(plan: Plan, setting: str) -> str:
    """What a grid plot's file name gets for ``setting``: nothing where the plan has one setting."""
    return f"_{setting}" if len(plan.grids) > 1 else ""
