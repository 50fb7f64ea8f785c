"""What claims 2 and 3 share: a grid of codec arms against fp32 on virtual replicas, and how its setting reads."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..config import RunConfig
from .arms import LINKS
from .available import split_available
from .grid import Arm, run_grid, summarise_grid
from .plan import Plan
from .progress import Progress

__all__ = ["measure_grid", "setting_line"]


def measure_grid(plan: Plan, arms: Sequence[Arm], name: str, quiet: bool = False,
                 family: str = "") -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:  # fmt: skip
    """Run the arms this build accepts (and fp32) for ``plan.seeds`` seeds on ``plan.grid_workers``
    virtual replicas; return the summary, the per-run rows and a line for each arm left out."""
    base = RunConfig.from_flat(**plan.setting, sampler="full", seed=0, threads=1)
    chosen, left_out = split_available(base, arms, plan.grid_workers, family=family)
    progress = Progress(name, (len(chosen) + 1) * plan.seeds, quiet)
    runs = run_grid(base, chosen, plan.seeds, plan.grid_workers, LINKS, progress)
    return summarise_grid(runs, LINKS), runs, left_out


def setting_line(plan: Plan) -> str:
    """The grid's data, model, schedule and replicas, as the report states them."""
    s = plan.setting
    return (f"`{s['data']}`, `{s['model']}`, {s['epochs']} epochs, global batch {s['batch_size']}, lr {s['lr']} "
            f"(cosine), sampler `full`, P={plan.grid_workers} virtual replicas on the ring, {plan.seeds} seed(s); "
            "every arm has fp32's epochs and learning-rate schedule.")  # fmt: skip
