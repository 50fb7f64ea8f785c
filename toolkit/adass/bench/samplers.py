"""``adass bench samplers``: every sampler on mnist5k and a harder synthetic set, 3 seeds, one run.

Besides the fixed baselines, ``random`` is also run at the backprop budget ADASS used (per seed), so
accuracy can be compared at equal cost. Timings use one intra-op thread, interleaved seed by seed,
and are reported as ratios to ``full`` from the same run.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from ..compare import run_one, summarise, warm_up
from ..config import RunConfig
from ..data import load_dataset
from ..tables import markdown_table
from . import write_report

__all__ = ["SETTINGS", "run", "targets"]

ADASS = "adass:eps=0.3"
BASELINES = ["full", "random:ratio=0.6", "infobatch", "selective_backprop", ADASS]

# name -> run options; the synthetic set has 30% boundary samples and 8 classes (harder)
SETTINGS: dict[str, dict] = {
    "mnist5k": {"data": "mnist5k", "model": "mlp:hidden=128", "lr": 0.05, "epochs": 30},
    "synthetic-hard": {
        "data": "synthetic:n=6000,d=30,classes=8,noise=0.0,hard=0.3",
        "model": "mlp:hidden=128", "lr": 0.01, "epochs": 30,
    },
}
QUICK: dict[str, dict] = {
    "synthetic-tiny": {"data": "synthetic:n=300,d=8,classes=3,test=100", "model": "mlp:hidden=16", "epochs": 4},
}


def _matched_random(adass_row: dict) -> str:
    ratio = adass_row["backprops"] / adass_row["full_backprops"]
    return f"random:ratio={min(1.0, max(0.001, round(ratio, 3)))}"


def run_setting(name: str, options: dict, seeds: int, out_dir: Path | None) -> pd.DataFrame:
    """All samplers for ``seeds`` seeds on one setting; one row per run."""
    base = RunConfig.from_flat(**options, seed=0)
    rows = []
    for seed in range(seeds):
        dataset = load_dataset(base.data.data, seed=seed)
        if seed == 0:
            warm_up(base, dataset)
        seed_rows = [run_one(base.replace(sampler=s, seed=seed), dataset) for s in BASELINES]
        full = seed_rows[0]
        adass_row = {**seed_rows[-1], "full_backprops": full["backprops"]}
        matched = base.replace(sampler=_matched_random(adass_row), seed=seed)
        seed_rows.append(run_one(matched, dataset, label="random (matched to adass)"))
        rows += seed_rows
    runs = pd.DataFrame(rows)
    runs.insert(0, "dataset", name)
    return runs


def targets(table: pd.DataFrame) -> pd.DataFrame:
    """The issue's goals, checked on one setting's summary table (measured, not asserted)."""
    by = table.set_index("sampler")
    full, ours, matched = by.loc["full"], by.loc[ADASS], by.loc["random (matched to adass)"]
    checks = [
        ("accuracy within 0.3 points of full", ours.test_acc >= full.test_acc - 0.003,
         f"{100 * (ours.test_acc - full.test_acc):+.2f} points"),
        ("at least 35% fewer backprops", ours.backprop_frac <= 0.65, f"{ours.backprop_frac:.3f} of full"),
        ("at least 25% less wall time", ours.wall_ratio <= 0.75, f"{ours.wall_ratio:.3f} of full"),
        ("accuracy >= random at the same backprops", ours.test_acc >= matched.test_acc,
         f"{100 * (ours.test_acc - matched.test_acc):+.2f} points"),
    ]  # fmt: skip
    return pd.DataFrame([{"goal": g, "met": "yes" if ok else "no", "measured": m} for g, ok, m in checks])


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Run the suite, print the tables, write ``samplers.md`` and ``samplers.csv``."""
    settings, seeds = (QUICK, 1) if quick else (SETTINGS, 3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = pd.concat([run_setting(n, o, seeds, out_dir) for n, o in settings.items()], ignore_index=True)
    finally:
        torch.set_num_threads(threads)
    tables, text = [], ["# adass bench samplers", ""]
    for name, group in runs.groupby("dataset", sort=False):
        table = summarise(group)
        table.insert(0, "dataset", name)
        tables.append(table)
        spec = settings[name]
        text += [f"## {name}: `{spec['data']}`, `{spec['model']}`, {spec['epochs']} epochs, {seeds} seed(s)", "",
                 markdown_table(table), "", markdown_table(targets(table)), ""]  # fmt: skip
    result = pd.concat(tables, ignore_index=True)
    write_report(out_dir, "samplers", text, {"samplers": result, "samplers_runs": runs})
    return result
