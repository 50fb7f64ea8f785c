"""``adass bench samplers``: every sampler on mnist5k and a harder synthetic set, 10 seeds, one run.

Every ADASS arm brings the controls of ``adass compare``: ``random`` replaying its per-epoch kept
counts (schedule-matched) and ``full`` for the epochs its backprops pay for (budget-matched). ADASS
runs at its defaults. Timings use one intra-op thread, runs are interleaved seed by seed, and every
figure is a mean (accuracy, backprops) or median (wall time) over whole runs with the spread shown.

The settings are chosen so that the budget binds: every arm trains for the fewest epochs after
which full training gains nothing more (within 0.2 points of its best over 1-40 epochs). With a
surplus of epochs any subset converges (at 30 epochs on mnist5k the schedule-matched random arm
and the budget-matched full arm both came within 0.2 points of full, and ADASS beat random by
0.18 points with a standard error of 0.19), and the comparison cannot tell good selection from
bad. The synthetic set is built as real data are: classes of several tight clusters (many easy,
redundant samples) and a minority between clusters of different classes. A mixture of one unit
Gaussian per class is learned within a few epochs, its remaining errors left to samples no
classifier can read, so no sample there carries information the others lack. The benchmark
results (docs/results/benchmarks.md) give the learning curves.

A third part checks standardization: an off-centre vector data set (40 features, 10 classes, values
in [0, 1] with mean 0.55 and standard deviation 0.10, written as IDX files) trained with ``--data``
as the only data option, beside a hand-written PyTorch MLP of the same size that standardizes with
the training split's statistics.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

from ...config import RunConfig
from ...data import load_dataset
from ...engine.step import lr_at
from ...runtime import run as run_config
from ...tables import markdown_table
from ..compare import BUDGET_MATCHED, SCHEDULE_MATCHED, compare_runs, summarise
from . import write_report

__all__ = [
    "ADASS",
    "BASELINES",
    "SETTINGS",
    "off_centre_idx",
    "reference_mlp",
    "run",
    "standardization",
    "targets",
]

ADASS = "adass"  # at its defaults
BASELINES = ["full", "random:ratio=0.6", "infobatch", "selective_backprop", ADASS]
SEEDS = 10

# name -> run options, the same for every arm. epochs: the fewest after which full training gains
# nothing more (module docstring); the synthetic set: 8 classes of 4 tight clusters each, 30% of
# the samples between clusters of different classes
SETTINGS: dict[str, dict] = {
    "mnist5k": {"data": "mnist5k", "model": "mlp:hidden=128", "lr": 0.05, "epochs": 10},
    "synthetic-hard": {
        "data": "synthetic:n=6000,d=10,classes=8,modes=4,cluster_std=0.4,noise=0.0,hard=0.3",
        "model": "mlp:hidden=128",
        "lr": 0.01,
        "epochs": 30,
    },
}
QUICK: dict[str, dict] = {
    "synthetic-tiny": {
        "data": "synthetic:n=300,d=8,classes=3,test=100",
        "model": "mlp:hidden=16",
        "epochs": 4,
    },
}
#: the off-centre set: (features, classes, train, test, mean, std) and the run options of both sides
OFF_CENTRE = {"d": 40, "classes": 10, "n": 4000, "test": 1000, "mean": 0.55, "std": 0.10}
OFF_CENTRE_RUN = {"model": "mlp:hidden=128", "epochs": 30, "lr": 0.05}


def run_setting(name: str, options: dict, seeds: int) -> pd.DataFrame:
    """All samplers and ADASS's two controls for ``seeds`` seeds on one setting; one row per run."""
    base = RunConfig.from_flat(**options, seed=0, threads=1)
    runs = compare_runs(base, BASELINES, seeds)
    runs.insert(0, "dataset", name)
    return runs.drop(columns="kept_fracs")


def _paired(runs: pd.DataFrame, a: str, b: str) -> tuple[float, float]:
    """Mean and standard error of the per-seed accuracy difference ``a - b``."""
    acc = runs.pivot_table(index="seed", columns="sampler", values="test_acc")
    d = (acc[a] - acc[b]).dropna()
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else float("nan")
    return float(d.mean()), se


def targets(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The goals for ADASS at its defaults on one setting (measured, not asserted)."""
    by = table.set_index("sampler")
    ours = by.loc[ADASS]
    vs_full, se_full = _paired(runs, ADASS, "full")
    vs_random, se_random = _paired(runs, ADASS, SCHEDULE_MATCHED)
    vs_budget, se_budget = _paired(runs, ADASS, BUDGET_MATCHED)
    checks = [
        ("at least 30% fewer backprops than full", ours.backprop_frac <= 0.70, f"{ours.backprop_frac:.3f} of full"),
        ("accuracy within 0.3 points of full", vs_full >= -0.003,
         f"{100 * vs_full:+.2f} points (se {100 * se_full:.2f})"),
        ("beats schedule-matched random by > 2 se", vs_random > 2 * se_random,
         f"{100 * vs_random:+.2f} points (se {100 * se_random:.2f})"),
        ("against budget-matched full (reported)", True, f"{100 * vs_budget:+.2f} points (se {100 * se_budget:.2f})"),
        ("wall time against full (reported)", True,
         f"median {ours.wall_ratio:.3f} of full (iqr {ours.wall_ratio_iqr:.3f})"),
    ]  # fmt: skip
    return pd.DataFrame([{"goal": g, "met": "yes" if ok else "no", "measured": m} for g, ok, m in checks])


def off_centre_idx(folder: Path, seed: int = 0) -> Path:
    """Write the off-centre vector set (:data:`OFF_CENTRE`) as IDX files into ``folder``.

    A Gaussian mixture (``synthetic``), each feature moved to mean 0.55 and standard deviation 0.10,
    clipped to [0, 1] and stored as bytes (0..255), as a new user's own vector data would arrive.
    """
    c = OFF_CENTRE
    ds = load_dataset(f"synthetic:n={c['n']},d={c['d']},classes={c['classes']},noise=0.0,hard=0.2,"
                      f"test={c['test']},standardize=off", seed=seed)  # fmt: skip
    mu, sd = ds.x_train.mean(0), ds.x_train.std(0).clamp_min(1e-8)

    def to_bytes(x: torch.Tensor) -> np.ndarray:
        moved = ((x - mu) / sd * c["std"] + c["mean"]).clamp(0.0, 1.0)
        return (moved * 255).round().to(torch.uint8).numpy()

    folder.mkdir(parents=True, exist_ok=True)
    names = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}  # fmt: skip
    for split, x, y in (("train", ds.x_train, ds.y_train), ("test", ds.x_test, ds.y_test)):
        for name, array in zip(names[split], (to_bytes(x), y.numpy().astype(np.uint8)), strict=True):
            header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
            (folder / name).write_bytes(header + array.tobytes())
    return folder


def reference_mlp(folder: Path, seed: int, epochs: int) -> float:
    """A hand-written PyTorch MLP of the same size on the IDX files: per-feature standardization with
    the training split's statistics, SGD with momentum 0.9, batch 64 and a cosine schedule."""
    ds = load_dataset(f"idx:{folder},classes={OFF_CENTRE['classes']},standardize=off", seed=seed)
    x, xt = ds.x_train.reshape(len(ds.x_train), -1), ds.x_test.reshape(len(ds.x_test), -1)
    mu, sd = x.mean(0), x.std(0).clamp_min(1e-8)
    x, xt = (x - mu) / sd, (xt - mu) / sd
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(x.shape[1], 128), nn.ReLU(), nn.Linear(128, OFF_CENTRE["classes"]))
    lr = OFF_CENTRE_RUN["lr"]
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    gen = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = lr_at(lr, "cosine", epoch, epochs)
        for idx in torch.randperm(len(x), generator=gen).split(64):
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), ds.y_train[idx]).backward()
            opt.step()
    with torch.no_grad():
        return float((model(xt).argmax(1) == ds.y_test).float().mean())


def standardization(out_dir: Path, seeds: int, epochs: int) -> pd.DataFrame:
    """``full`` with ``--data idx:DIR`` only, beside :func:`reference_mlp`, per seed."""
    folder = off_centre_idx(Path(out_dir) / "off-centre-idx")
    rows = []
    for seed in range(seeds):
        config = RunConfig.from_flat(data=f"idx:{folder},classes={OFF_CENTRE['classes']}",
                                     **{**OFF_CENTRE_RUN, "epochs": epochs}, seed=seed, threads=1)  # fmt: skip
        ours = run_config(config, selection_records=False).final.test_acc
        rows.append(
            {"seed": seed, "adass_full": ours, "pytorch_standardized": reference_mlp(folder, seed, epochs)}
        )
    return pd.DataFrame(rows)


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Run the suite, print the tables, write ``samplers.md`` and ``samplers.csv``."""
    settings, seeds = (QUICK, 1) if quick else (SETTINGS, SEEDS)
    threads = torch.get_num_threads()
    try:
        runs = pd.concat([run_setting(n, o, seeds) for n, o in settings.items()], ignore_index=True)
        std = standardization(Path(out_dir), *((1, 2) if quick else (3, OFF_CENTRE_RUN["epochs"])))
    finally:
        torch.set_num_threads(threads)
    tables, text = [], ["# adass bench samplers", ""]
    for name, group in runs.groupby("dataset", sort=False):
        table = summarise(group)
        table.insert(0, "dataset", name)
        tables.append(table)
        spec = settings[name]
        text += [f"## {name}: `{spec['data']}`, `{spec['model']}`, {spec['epochs']} epochs, {seeds} seed(s)", "",
                 markdown_table(table), "", markdown_table(targets(table, group)), ""]  # fmt: skip
    gap = float((std["pytorch_standardized"] - std["adass_full"]).mean())
    c = OFF_CENTRE
    text += [f"## standardization: {c['d']} features in [0, 1], mean {c['mean']}, std {c['std']}, {c['classes']} "
             f"classes; `--data idx:DIR` only, `{OFF_CENTRE_RUN['model']}`, {OFF_CENTRE_RUN['epochs']} epochs", "",
             markdown_table(std), "",
             markdown_table(pd.DataFrame([{"goal": "full within 2 points of a standardized PyTorch MLP",
                                           "met": "yes" if gap <= 0.02 else "no",
                                           "measured": f"{100 * gap:.2f} points behind"}])), ""]  # fmt: skip
    result = pd.concat(tables, ignore_index=True)
    write_report(
        out_dir,
        "samplers",
        text,
        {"samplers": result, "samplers_runs": runs, "samplers_standardization": std},
    )
    return result
