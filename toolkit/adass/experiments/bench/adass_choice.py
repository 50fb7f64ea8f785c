"""``adass bench adass_choice``: ADASS's default budget against the candidates it was chosen over.

Every candidate spec of :data:`CANDIDATES` (ADASS's defaults first, InfoBatch at its own last) runs
beside full training on every setting of :data:`SETTINGS`, each seed, whole runs in this process
with one intra-op thread: the four settings of ``adass bench frontier`` and seven that look for
trouble (labels flipped, runs so short that their selecting epochs come at the end, 56k samples
trained for 20 epochs, as long runs are, and the digits trained to their plateau and with a linear
model).

A cell of the table is the mean test accuracy less full training's of the same seed, in points,
the standard error of those per-seed differences, and the mean share of full's backprops
(``-0.04 ± 0.12 at 0.558``). The choice of ADASS's defaults (``docs/concepts/adass.md``, "Choosing
ADASS's defaults") rests on this table.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from ...config import OptimSection, RunConfig
from ...metrics import atomic_write_text
from ...tables import markdown_table
from ..compare import run_one
from . import write_report
from .frontier import QUICK, seeded_datasets, setting_data
from .frontier import SETTINGS as FRONTIER

__all__ = ["CANDIDATES", "SETTINGS", "cells", "describe", "run", "summarise"]

#: the specs compared with full training: the defaults, the earlier defaults, cheaper and other draws
CANDIDATES: tuple[str, ...] = (
    "adass",
    "adass:drop=0",
    "adass:drop=0,final=1",
    "adass:drop=0.05",
    "adass:drop=0.1",
    "adass:drop=0,final=0,draw=bound",
    "adass:eps=0.8,resample=0.5,warmup=2,final=1,drop=0",
    "adass:eps=0.4,resample=0,warmup=2,final=0,min_keep=0.1",
    "adass:eps=0.2,resample=0,warmup=2,final=1,min_keep=0.1",
    "infobatch",
)
#: where each was the default, or why it is a candidate (a column of the table)
NOTES = {
    "adass": "the defaults",
    "adass:drop=0": "the defaults before: nothing dropped outright",
    "adass:drop=0,final=1": "two steps back: and a full last epoch always",
    "adass:drop=0.05": "a twentieth of the bound dropped outright",
    "adass:drop=0.1": "a tenth of the bound dropped outright",
    "adass:drop=0,final=0,draw=bound": "drawn by the bound, nothing dropped outright",
    "adass:eps=0.8,resample=0.5,warmup=2,final=1,drop=0": "three steps back",
    "adass:eps=0.4,resample=0,warmup=2,final=0,min_keep=0.1": "the budget dropped whole: the cheapest",
    "adass:eps=0.2,resample=0,warmup=2,final=1,min_keep=0.1": "the first defaults",
    "infobatch": "InfoBatch at its defaults",
}
_VECTORS_56K = (
    "synthetic:n=56000,d=20,classes=10,modes=3,cluster_std={std},noise={noise},hard={hard},test=4000"
)
_SHORT = {"data": "synthetic:n=2400,d=8,classes=3,test=1000", "model": "mlp:hidden=16", "batch_size": 32,
          "lr": 0.1, "schedule": "constant"}  # fmt: skip
#: name -> run options: the frontier's settings, then the seven that look for trouble
SETTINGS: dict[str, dict] = {
    **FRONTIER,
    "noisy-4k": {
        "data": "synthetic:n=4000,d=20,classes=10,modes=3,cluster_std=1.0,noise=0.2,hard=0.3",
        "model": "mlp:hidden=128", "lr": 0.05, "epochs": 30,
    },
    "short-3": {**_SHORT, "epochs": 3},
    "short-6": {**_SHORT, "epochs": 6},
    "vectors-56k-20": {
        "data": _VECTORS_56K.format(std=0.6, noise=0.02, hard=0.2), "model": "mlp:hidden=128", "lr": 0.05,
        "epochs": 20,
    },
    "noisy-56k-20": {
        "data": _VECTORS_56K.format(std=1.0, noise=0.1, hard=0.3), "model": "mlp:hidden=128", "lr": 0.05,
        "epochs": 20,
    },
    "mnist5k-30": {"data": "mnist5k", "model": "mlp:hidden=128", "lr": 0.05, "epochs": 30},
    "mnist5k-logreg": {"data": "mnist5k", "model": "logreg", "lr": 0.05, "epochs": 20},
}  # fmt: skip
SEEDS = 5


def run_setting(name: str, options: dict, data: str, seeds: int, specs: tuple[str, ...]) -> pd.DataFrame:
    """Full training and every spec of ``specs``, ``seeds`` seeds, on one setting; a row per run."""
    base = RunConfig.from_flat(**{**options, "data": data}, seed=0, threads=1)
    rows = []
    for seed, dataset in seeded_datasets(base, data, seeds):
        for spec in ("full", *specs):
            began = time.perf_counter()
            row = run_one(base.replace(sampler=spec, seed=seed), dataset, label=spec)
            rows.append({"setting": name, "spec": spec, "seed": seed, "test_acc": row["test_acc"],
                         "backprops": row["backprops"], "train_s": row["wall_s"]})  # fmt: skip
            print(f"{name} seed {seed} {spec}: acc {row['test_acc']:.4f}, backprops {row['backprops']} "
                  f"({time.perf_counter() - began:.1f} s)", flush=True)  # fmt: skip
    return pd.DataFrame(rows)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per setting and spec: accuracy less full's in points (mean, standard error over seeds), the
    share of full's backprops and of its training time, each against full of the same seed."""
    full = runs[runs["spec"] == "full"].set_index(["setting", "seed"])
    key = pd.MultiIndex.from_frame(runs[["setting", "seed"]])
    runs = runs.assign(
        gap_points=100 * (runs["test_acc"].to_numpy() - full["test_acc"].reindex(key).to_numpy()),
        backprop_frac=runs["backprops"].to_numpy() / full["backprops"].reindex(key).to_numpy(),
        time_frac=runs["train_s"].to_numpy() / full["train_s"].reindex(key).to_numpy(),
    )
    mine = runs[runs["spec"] != "full"]

    def se(values: pd.Series) -> float:
        return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else float("nan")

    return mine.groupby(["setting", "spec"], sort=False).agg(
        seeds=("seed", "size"), gap_points=("gap_points", "mean"), gap_se=("gap_points", se),
        backprop_frac=("backprop_frac", "mean"), time_frac=("time_frac", "mean"),
    ).reset_index()  # fmt: skip


def cells(table: pd.DataFrame) -> pd.DataFrame:
    """The summary as one row per spec and one column per setting: ``gap ± se at backprops`` (no
    standard error over one seed)."""
    text = table.assign(cell=[f"{g:+.2f}{'' if math.isnan(s) else f' ± {s:.2f}'} at {b:.3f}" for g, s, b in
                              zip(table["gap_points"], table["gap_se"], table["backprop_frac"], strict=True)])  # fmt: skip
    wide = text.pivot(index="spec", columns="setting", values="cell")
    wide = wide.reindex(
        index=list(dict.fromkeys(table["spec"])), columns=list(dict.fromkeys(table["setting"]))
    )
    wide.insert(0, "why", [NOTES.get(spec, "") for spec in wide.index])
    return wide.reset_index()


def describe(options: dict) -> str:
    """One setting's run options in words, the optimiser's defaults filled in."""
    o = {name: OptimSection.param[name].default for name in ("lr", "batch_size", "schedule")} | options
    return (f"`{o['data']}`, `{o['model']}`, lr {o['lr']:g}, batch {o['batch_size']}, {o['schedule']} schedule, "
            f"{o['epochs']} epochs")  # fmt: skip


def run(out_dir: Path, quick: bool = False, seeds: int | None = None, settings: str = "") -> pd.DataFrame:
    """Run the suite, print the table and write ``adass_choice.md``, ``adass_choice.csv`` (the
    summary) and ``adass_choice_runs.csv``; return the summary. ``seeds`` (default :data:`SEEDS`; 1
    with ``quick``) and ``settings`` (names of :data:`SETTINGS`, comma-separated) narrow the run."""
    chosen = QUICK if quick else SETTINGS
    if settings:
        chosen = {name: SETTINGS[name] for name in settings.split(",")}
    seeds = seeds or (1 if quick else SEEDS)
    threads, start, out_dir = torch.get_num_threads(), time.perf_counter(), Path(out_dir)
    frames = []
    try:
        with tempfile.TemporaryDirectory(prefix="adass-choice-") as tmp:
            for name, options, data in setting_data(chosen, Path(tmp)):
                frames.append(run_setting(name, options, data, seeds, CANDIDATES))
                # every finished setting kept on disk at once: a later failure loses none of it
                out_dir.mkdir(parents=True, exist_ok=True)
                atomic_write_text(out_dir / "adass_choice_runs.csv", pd.concat(frames).to_csv(index=False))
    finally:
        torch.set_num_threads(threads)
    runs = pd.concat(frames, ignore_index=True)
    table = summarise(runs)
    text = ["# adass bench adass_choice", "",
            f"Each cell: test accuracy less full training's of the same seed in points ± the standard error "
            f"over {seeds} seed(s), at the share of full's backprops; one intra-op thread; host with "
            f"{os.cpu_count()} CPUs.", "", markdown_table(cells(table)), "",
            "Settings:", ""]  # fmt: skip
    text += [f"- `{name}`: {describe(o)}" for name, o in chosen.items()]
    text += ["", f"{time.perf_counter() - start:.0f} s in all."]
    write_report(out_dir, "adass_choice", text, {"adass_choice": table, "adass_choice_runs": runs})
    return table
