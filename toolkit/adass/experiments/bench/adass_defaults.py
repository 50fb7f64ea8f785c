"""``adass bench adass_defaults``: the measurements behind ADASS's ``quantile`` and ``lipschitz=auto``.

- ``quantile``: for each candidate, how often a sample back from a drop had a loss above the bound
  that dropped it (``exceeded / returned``), with the backprops and accuracy it costs.
- ``lipschitz``: every valid mode per kind of model (a deep MLP, a linear softmax regression) at the
  default budget: accuracy kept against full training, and backprops saved.

Both on mnist5k and on a synthetic set with 30% boundary samples (:data:`SETTINGS`: 30 epochs,
enough for every arm to converge, so the studies compare bounds and costs rather than speed of
learning); whole runs, 3 seeds each, one intra-op thread.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...config import RunConfig
from ...data import load_dataset
from ...runtime import run as run_config
from ...tables import markdown_table
from . import write_report

__all__ = ["LIPSCHITZ", "QUANTILES", "SETTINGS", "run", "run_one"]
#: the budget and full epochs these studies were measured at (the defaults until the budget was raised)
BASE = "adass:eps=0.2,warmup=2,final=1,resample=0,min_keep=0.1,"

#: name -> run options of the two studies (the tables of docs/concepts/adass.md were measured with these)
SETTINGS: dict[str, dict] = {
    "mnist5k": {"data": "mnist5k", "model": "mlp:hidden=128", "lr": 0.05, "epochs": 30},
    "synthetic-hard": {
        "data": "synthetic:n=6000,d=30,classes=8,noise=0.0,hard=0.3",
        "model": "mlp:hidden=128",
        "lr": 0.01,
        "epochs": 30,
    },
}
QUANTILES = (0.5, 0.75, 0.9, 0.95)
#: kind of model -> (model spec, the modes that bound it)
LIPSCHITZ = {"deep": ("mlp:hidden=128", ("empirical", "const")),
             "linear": ("logreg", ("exact", "empirical", "const"))}  # fmt: skip
QUICK = {
    "synthetic-tiny": {
        "data": "synthetic:n=300,d=8,classes=3,test=100",
        "model": "mlp:hidden=16",
        "epochs": 4,
    }
}


def run_one(config: RunConfig, dataset) -> dict:
    """One whole run; its accuracy, backprops and how often the bounds held."""
    result = run_config(config, dataset=dataset, selection_records=False)
    sampler = result.states[0].sampler
    returned, exceeded = getattr(sampler, "returned", 0), getattr(sampler, "exceeded", 0)
    return {"seed": config.optim.seed, "test_acc": result.final.test_acc, "backprops": result.counters.backprops,
            "returned": returned, "exceeded": exceeded}  # fmt: skip


def _runs(name: str, options: dict, seeds: int, arms: list[tuple[str, str, str]]) -> pd.DataFrame:
    """``arms`` of (study, label, sampler spec, model spec) for every seed; full per model first."""
    rows = []
    for seed in range(seeds):
        dataset = load_dataset(options["data"], seed=seed)
        for study, label, spec, model in arms:
            config = RunConfig.from_flat(**{**options, "model": model}, sampler=spec, seed=seed, threads=1)
            rows.append(
                {"dataset": name, "study": study, "arm": label, "model": model, **run_one(config, dataset)}
            )
    return pd.DataFrame(rows)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, study and arm: accuracy and backprops against full (same model, same seed)."""
    full = runs[runs["arm"] == "full"].set_index(["dataset", "model", "seed"])
    key = pd.MultiIndex.from_frame(runs[["dataset", "model", "seed"]])
    runs = runs.assign(acc_vs_full=runs["test_acc"].to_numpy() - full["test_acc"].reindex(key).to_numpy(),
                       backprop_frac=runs["backprops"].to_numpy() / full["backprops"].reindex(key).to_numpy())  # fmt: skip
    table = runs[runs["arm"] != "full"].groupby(["dataset", "study", "model", "arm"], sort=False).agg(
        seeds=("seed", "size"), test_acc=("test_acc", "mean"), acc_vs_full=("acc_vs_full", "mean"),
        acc_vs_full_std=("acc_vs_full", "std"), backprop_frac=("backprop_frac", "mean"),
        returned=("returned", "sum"), exceeded=("exceeded", "sum"),
    ).reset_index()  # fmt: skip
    table["exceeded_frac"] = table["exceeded"] / table["returned"].clip(lower=1)
    return table.drop(columns=["returned", "exceeded"])


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Both studies on every setting; print and write ``adass_defaults.md`` and ``.csv``."""
    settings, seeds = (QUICK, 1) if quick else (SETTINGS, 3)
    frames = []
    for name, options in settings.items():
        deep = options["model"]
        arms = [("quantile", "full", "full", deep)]
        arms += [
            ("quantile", f"quantile={q}", f"{BASE}lipschitz=empirical,quantile={q}", deep) for q in QUANTILES
        ]
        for kind, (model, modes) in LIPSCHITZ.items():
            model = deep if kind == "deep" else model
            if kind == "linear":
                arms.append(("lipschitz", "full", "full", model))
            arms += [(f"lipschitz ({kind})", f"lipschitz={m}", f"{BASE}lipschitz={m}", model) for m in modes]
        frames.append(_runs(name, options, seeds, arms))
    runs = pd.concat(frames, ignore_index=True)
    table = summarise(runs)
    text = ["# adass bench adass_defaults", "", f"{seeds} seed(s) per arm; acc_vs_full and backprop_frac are "
            "per-seed differences and ratios to full training of the same model.", "", markdown_table(table), ""]  # fmt: skip
    write_report(out_dir, "adass_defaults", text, {"adass_defaults": table, "adass_defaults_runs": runs})
    return table
