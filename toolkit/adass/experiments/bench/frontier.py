"""``adass bench frontier``: accuracy against cost for every sampler over its main knob, several seeds,
on several kinds of data: which method's trade-off curve lies above the others', and by how much.

One operating point per sampler cannot say which method is better (a sampler that keeps more
samples is more accurate and costs more), so every method is run over its main knob:

- ``adass`` over ``eps`` (the share of the total bound in the budget) at its other defaults: half
  of the budget's samples trained on anyway at weight 2 (``resample=0.5``), a full last epoch only
  where the learning rate has not decayed by then (``final=auto``; none on the cosine settings here),
- ``adass_drop``: ADASS dropping its whole budget, every epoch after two of warm-up selecting
  (``resample=0,min_keep=0.1,warmup=2,final=0``), over ``eps``: its cheapest mode, which a short
  run on noisy labels can pay for (see ``docs/concepts/adass.md``),
- ``infobatch`` over ``ratio`` (the share of below-mean-loss samples pruned),
- ``random`` over ``ratio`` (the share kept each epoch),
- ``selective_backprop`` over ``beta`` (selectivity),
- ``full`` over the number of epochs (a quarter of the setting's epochs up to all of them).

ADASS's frontier over all of its knobs, ``adass_best``, is no run of its own: at every cost it is
whichever of ADASS's curves has the higher mean accuracy over the seeds there (each seed then read
on that curve), and it is compared with every other method as each curve is.

Each point is a whole run in this process with one intra-op thread; the cost is its backprops and
its training seconds, both as a share of ``full`` at the setting's epochs with the same seed.

A method's frontier on one seed is the line through its knob points ordered by cost (each point
placed at its knob's mean cost over the seeds). Two methods are compared at equal cost: on
:data:`GRID` cost levels inside both frontiers' ranges, the accuracy of one less the other's,
averaged over the levels, per seed; the table gives the mean over seeds and its standard error
(``acc_gap_backprops`` against backprops, ``acc_gap_time`` against training time). The same for the
cost at equal accuracy: on accuracy levels both frontiers reach, how much less (negative) or more
cost one needs, from each frontier's best-so-far envelope (``cost_gap_backprops``).

Settings: ``mnist5k`` (digits as 784-value vectors, 5k samples), ``synthetic-hard`` (clustered
vectors with a hard minority), ``vectors-56k`` (56,000 clustered vectors with label noise) and
``images-32`` (32x32 colour images written by the bench, a LeNet: the compute-bound workload, where a
backprop costs far more than the bookkeeping). A plot per setting (``frontier_<setting>.png``) draws
the frontiers with bands of one standard error.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ...config import RunConfig
from ...data import Dataset, load_dataset
from ...sampling import SAMPLERS
from ...tables import markdown_table
from ..compare import run_one, warm_up
from . import write_report

__all__ = [
    "GRID",
    "METHODS",
    "SETTINGS",
    "compare_frontiers",
    "frontier_points",
    "images_npy",
    "run",
    "seeded_datasets",
    "setting_data",
]

#: method -> (knob, values, spec of one value); ``full`` sweeps epochs as shares of the setting's
METHODS: dict[str, tuple[str, tuple[float, ...]]] = {
    "full": ("epochs", (1.0, 0.75, 0.5, 0.25)),  # first: every other run is measured against all epochs
    "adass": ("eps", (0.2, 0.4, 0.6, 0.8, 0.9, 0.95)),
    "adass_drop": ("eps", (0.1, 0.2, 0.4, 0.6, 0.8)),
    "infobatch": ("ratio", (0.3, 0.5, 0.7, 0.9)),
    "random": ("ratio", (0.5, 0.7, 0.85)),
    "selective_backprop": ("beta", (0.5, 1.0, 2.0, 3.0)),
}
#: methods whose sampler spec is not ``{method}:{knob}={value}``
SPECS = {"adass_drop": "adass:eps={value:g},resample=0,min_keep=0.1,warmup=2,final=0"}
#: ADASS's frontier over all of its knobs: at every cost, whichever of its curves has the higher mean
#: accuracy over the seeds there (each seed then read on that curve)
ENVELOPES = {"adass_best": ("adass", "adass_drop")}
#: the methods each compared with every other (each a table of its own)
OURS = ("adass", "adass_drop", "adass_best")
#: where ADASS's defaults sit on its knob (the sampler's registered default, one of ``adass``'s values)
DEFAULT_EPS = SAMPLERS.resolve("adass")[1]["eps"]
#: cost levels per comparison
GRID = 25
SEEDS = 5

SETTINGS: dict[str, dict] = {
    "mnist5k": {"data": "mnist5k", "model": "mlp:hidden=128", "lr": 0.05, "epochs": 10},
    "synthetic-hard": {
        "data": "synthetic:n=6000,d=10,classes=8,modes=4,cluster_std=0.4,noise=0.0,hard=0.3",
        "model": "mlp:hidden=128", "lr": 0.01, "epochs": 30,
    },
    "vectors-56k": {
        "data": "synthetic:n=56000,d=20,classes=10,modes=3,cluster_std=0.6,noise=0.02,hard=0.2,test=4000",
        "model": "mlp:hidden=128", "lr": 0.05, "epochs": 8,
    },
    "images-32": {"data": "images", "model": "lenet", "lr": 0.02, "epochs": 8, "batch_size": 64},
}  # fmt: skip
QUICK: dict[str, dict] = {
    "synthetic-tiny": {
        "data": "synthetic:n=400,d=8,classes=3,test=100",
        "model": "mlp:hidden=16",
        "epochs": 4,
    },
}
#: the image set the bench writes: (train, test, classes)
IMAGES = (4000, 1000, 10)


def images_npy(folder: Path, n_train: int, n_test: int, classes: int, seed: int = 0) -> Path:
    """Write 32x32 colour images of ``classes`` classes as ``npy`` files into ``folder``.

    Every image mixes the same six smooth colour patterns; a class fixes the mean of the mixing
    weights and each sample draws its own around it (so classes overlap and some samples are
    ambiguous), then is shifted by up to 8 pixels and given pixel noise.
    """
    rng = np.random.default_rng(seed)
    coarse = torch.from_numpy(rng.normal(size=(6, 3, 8, 8)).astype(np.float32))
    parts = torch.nn.functional.interpolate(coarse, size=(40, 40), mode="bicubic").numpy()  # (6, 3, 40, 40)
    means = rng.normal(size=(classes, 6)).astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        y = rng.integers(0, classes, n)
        weights = means[y] + rng.normal(scale=0.6, size=(n, 6)).astype(np.float32)
        dx, dy = rng.integers(0, 9, n), rng.integers(0, 9, n)
        x = np.empty((n, 3, 32, 32), dtype=np.float32)
        for i in range(n):
            x[i] = np.tensordot(weights[i], parts[:, :, dy[i] : dy[i] + 32, dx[i] : dx[i] + 32], axes=1)
        x += rng.normal(scale=0.5, size=x.shape).astype(np.float32)
        pixels = np.clip(x * 30 + 128, 0, 255).astype(np.uint8)
        np.save(folder / f"x_{split}.npy", pixels)
        np.save(folder / f"y_{split}.npy", y.astype(np.int64))
    return folder


def _standard_error(values: np.ndarray | pd.Series) -> float:
    """Standard error of the mean of ``values`` (NaN for fewer than two)."""
    values = np.asarray(values, dtype=float)
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else float("nan")


def _spec(method: str, value: float) -> str:
    if method in SPECS:
        return SPECS[method].format(value=value)
    knob = METHODS[method][0]
    return "full" if method == "full" else f"{method}:{knob}={value:g}"


def setting_data(settings: dict[str, dict], folder: Path) -> Iterator[tuple[str, dict, str]]:
    """``(name, options, data spec)`` of every setting; the image set is written under ``folder``."""
    for name, options in settings.items():
        data = options["data"]
        if data == "images":
            data = f"npy:{images_npy(folder / 'images', *IMAGES)}"
        yield name, options, data


def seeded_datasets(base: RunConfig, data: str, seeds: int) -> Iterator[tuple[int, Dataset]]:
    """``(seed, data set)`` for each of ``seeds`` seeds; before the first is handed out, an untimed
    run on it (no timed run pays for torch's first calls)."""
    for seed in range(seeds):
        dataset = load_dataset(data, seed=seed)
        if seed == 0:
            warm_up(base, dataset)
        yield seed, dataset


def run_setting(name: str, options: dict, seeds: int, data: str, progress: bool = True) -> pd.DataFrame:
    """Every method over its knob, ``seeds`` seeds, on one setting; one row per run."""
    epochs = options["epochs"]
    base = RunConfig.from_flat(**{**options, "data": data}, seed=0, threads=1)
    rows = []
    for seed, dataset in seeded_datasets(base, data, seeds):
        reference = None
        for method, (knob, values) in METHODS.items():
            for value in values:
                run_epochs = max(1, round(value * epochs)) if method == "full" else epochs
                config = base.replace(sampler=_spec(method, value), epochs=run_epochs, seed=seed)
                began = time.perf_counter()
                row = run_one(config, dataset, label=f"{method}:{knob}={value:g}")
                if reference is None:
                    reference = row
                rows.append({
                    "setting": name, "method": method, "knob": knob, "value": value, "seed": seed,
                    "test_acc": row["test_acc"], "backprops": row["backprops"], "train_s": row["wall_s"],
                    "backprop_frac": row["backprops"] / reference["backprops"],
                    "time_frac": row["wall_s"] / reference["wall_s"],
                })  # fmt: skip
                if progress:
                    print(f"{name} seed {seed} {method} {knob}={value:g}: acc {row['test_acc']:.4f}, "
                          f"backprops {rows[-1]['backprop_frac']:.3f}, time {rows[-1]['time_frac']:.3f} "
                          f"({time.perf_counter() - began:.1f} s)", flush=True)  # fmt: skip
    return pd.DataFrame(rows)


def frontier_points(runs: pd.DataFrame) -> pd.DataFrame:
    """Per method and knob value: mean cost (backprops, time) and mean accuracy with its standard error."""
    grouped = runs.groupby(["method", "value"], sort=False)
    points = grouped.agg(
        backprop_frac=("backprop_frac", "mean"), time_frac=("time_frac", "mean"), test_acc=("test_acc", "mean"),
        acc_se=("test_acc", _standard_error),
        seeds=("seed", "nunique"),
    ).reset_index()  # fmt: skip
    return points


def _curve(runs: pd.DataFrame, method: str, cost: str) -> tuple[np.ndarray, np.ndarray]:
    """A method's knob points on every seed: mean costs ``(k,)`` in increasing order and accuracies
    ``(seeds, k)``; an envelope's are all its curves' points together."""
    members = ENVELOPES.get(method, (method,))
    mine = runs[runs["method"].isin(members)]
    costs = mine.groupby(["method", "value"])[cost].mean().sort_values()
    acc = mine.pivot_table(index="seed", columns=["method", "value"], values="test_acc")[costs.index]
    return costs.to_numpy(), acc.to_numpy()


def _curves(runs: pd.DataFrame, method: str, cost: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """The curve of each of a method's members (itself, or an envelope's curves), by :func:`_curve`."""
    return [_curve(runs, m, cost) for m in ENVELOPES.get(method, (method,))]


def _span(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """The costs a frontier of ``curves`` covers (an envelope: from its cheapest curve's start to its
    dearest one's end)."""
    return min(x[0] for x, _ in curves), max(x[-1] for x, _ in curves)


def _at(method: str, curves: list[tuple[np.ndarray, np.ndarray]], grid: np.ndarray) -> np.ndarray:
    """Every seed's accuracy on the frontier of ``method``'s ``curves`` at the costs ``grid``:
    ``(seeds, len(grid))``, NaN where the frontier does not reach. An envelope takes, at each cost,
    the curve of its members with the highest mean over the seeds there."""
    values = []
    for x, y in curves:
        on = np.array([np.interp(grid, x, y[s]) for s in range(len(y))])
        on[:, (grid < x[0]) | (grid > x[-1])] = np.nan
        values.append(on)
    if len(values) == 1:
        return values[0]
    if len({v.shape[0] for v in values}) > 1:
        raise ValueError(f"{method}: its curves ran on different numbers of seeds")
    stacked = np.stack(values)  # (members, seeds, grid)
    means = np.nan_to_num(stacked.mean(axis=1), nan=-np.inf)  # NaN: the curve does not reach there
    best = means.argmax(axis=0)
    return stacked[best, :, np.arange(len(grid))].T


def _gap_at_equal_cost(runs: pd.DataFrame, a: str, b: str, cost: str) -> tuple[float, float, int]:
    """Mean over seeds (and its standard error) of ``a``'s accuracy less ``b``'s, averaged over cost
    levels where both frontiers run; the number of seeds (0 where their cost ranges do not overlap)."""
    curves_a, curves_b = _curves(runs, a, cost), _curves(runs, b, cost)
    (a_low, a_high), (b_low, b_high) = _span(curves_a), _span(curves_b)
    low, high = max(a_low, b_low), min(a_high, b_high)
    if not high > low:
        return float("nan"), float("nan"), 0
    grid = np.linspace(low, high, GRID)
    ya, yb = _at(a, curves_a, grid), _at(b, curves_b, grid)
    both = ~np.isnan(ya).any(axis=0) & ~np.isnan(yb).any(axis=0)  # an envelope's curves may leave a gap
    if len(ya) != len(yb) or not both.any():
        return float("nan"), float("nan"), 0
    gaps = (ya[:, both] - yb[:, both]).mean(axis=1)
    return float(gaps.mean()), _standard_error(gaps), len(gaps)


def _cost_at_equal_accuracy(runs: pd.DataFrame, a: str, b: str, cost: str) -> tuple[float, float]:
    """Mean over seeds (and standard error) of the cost ``a`` needs less the cost ``b`` needs, averaged
    over accuracy levels both reach; each frontier read as its best-so-far envelope (the least cost
    that reaches an accuracy)."""
    xa, ya = _curve(runs, a, cost)
    xb, yb = _curve(runs, b, cost)
    gaps = []
    for s in range(min(len(ya), len(yb))):
        ea, eb = np.maximum.accumulate(ya[s]), np.maximum.accumulate(yb[s])
        low, high = max(ea[0], eb[0]), min(ea[-1], eb[-1])
        if not high > low:
            continue
        levels = np.linspace(low, high, GRID)
        need_a = np.array([xa[np.argmax(ea >= level)] for level in levels])
        need_b = np.array([xb[np.argmax(eb >= level)] for level in levels])
        gaps.append(float(np.mean(need_a - need_b)))
    if not gaps:
        return float("nan"), float("nan")
    return float(np.mean(gaps)), _standard_error(gaps)


def compare_frontiers(runs: pd.DataFrame, ours: str = "adass") -> pd.DataFrame:
    """``ours`` against every other method on one setting: the gaps at equal cost and equal accuracy."""
    rows = []
    for other in (m for m in METHODS if m != ours and m not in ENVELOPES.get(ours, ())):
        acc_b, se_b, seeds = _gap_at_equal_cost(runs, ours, other, "backprop_frac")
        acc_t, se_t, _ = _gap_at_equal_cost(runs, ours, other, "time_frac")
        cost_b, cost_se = _cost_at_equal_accuracy(runs, ours, other, "backprop_frac")
        verdict = "no overlap"
        if seeds:
            if math.isnan(se_b) or abs(acc_b) <= se_b:
                verdict = "level (within 1 se)"
            else:
                verdict = f"{ours if acc_b > 0 else other} above by {abs(acc_b) / se_b:.1f} se"
        rows.append({"ours": ours, "against": other, "acc_gap_backprops": acc_b, "se": se_b, "acc_gap_time": acc_t, "se_time": se_t,
                     "cost_gap_backprops": cost_b, "se_cost": cost_se, "verdict": verdict})  # fmt: skip
    return pd.DataFrame(rows)


def default_check(runs: pd.DataFrame) -> dict:
    """ADASS at its default ``eps`` against full at all epochs: backprop share and accuracy gap (points)."""
    acc = runs.pivot_table(index="seed", columns=["method", "value"], values="test_acc")
    cost = runs[(runs["method"] == "adass") & (runs["value"] == DEFAULT_EPS)]["backprop_frac"].mean()
    d = (acc[("adass", DEFAULT_EPS)] - acc[("full", 1.0)]).dropna()
    return {
        "backprop_frac": float(cost),
        "acc_gap_points": 100 * float(d.mean()),
        "se_points": 100 * _standard_error(d),
    }


def plot(points: pd.DataFrame, name: str, path: Path) -> None:
    """The frontiers of one setting against backprops and against time, bands of one standard error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, cost, label in zip(
        axes, ("backprop_frac", "time_frac"), ("backprops", "training time"), strict=True
    ):
        for method in METHODS:
            p = points[points["method"] == method].sort_values(cost)
            line = ax.plot(
                p[cost], p["test_acc"], marker="o", label=method, lw=2 if method == "adass" else 1.2
            )[0]
            se = p["acc_se"].fillna(0.0)
            ax.fill_between(
                p[cost], p["test_acc"] - se, p["test_acc"] + se, color=line.get_color(), alpha=0.18
            )
        ax.set_xlabel(f"{label}, share of full training")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{name}: accuracy against cost (mean over seeds, band: one standard error)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(out_dir: Path, quick: bool = False, seeds: int | None = None, settings: str = "") -> pd.DataFrame:
    """Run the suite, print its tables and write ``frontier.md``, ``frontier.csv`` (the comparisons),
    ``frontier_points.csv``, ``frontier_runs.csv`` and a plot per setting; return the comparisons.
    ``seeds`` (default :data:`SEEDS`; 2 with ``quick``) and ``settings`` (names of :data:`SETTINGS`,
    comma-separated; default all) narrow the run."""
    chosen = QUICK if quick else SETTINGS
    if settings:
        chosen = {name: SETTINGS[name] for name in settings.split(",")}
    seeds = seeds or (2 if quick else SEEDS)
    threads, out_dir = torch.get_num_threads(), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    all_runs, comparisons, all_points = [], [], []
    text = ["# adass bench frontier", "",
            f"Every method over its knob, {seeds} seed(s), one intra-op thread; costs are shares of full "
            f"training at the setting's epochs on the same seed; gaps are ADASS less the other method, "
            f"mean over seeds with its standard error; host with {os.cpu_count()} CPUs.", ""]  # fmt: skip
    try:
        with tempfile.TemporaryDirectory(prefix="adass-frontier-") as tmp:
            for name, options, data in setting_data(chosen, Path(tmp)):
                runs = run_setting(name, options, seeds, data)
                points = frontier_points(runs)
                table = pd.concat([compare_frontiers(runs, ours) for ours in OURS], ignore_index=True)
                points.insert(0, "setting", name)
                table.insert(0, "setting", name)
                plot(points, name, out_dir / f"frontier_{name}.png")
                check = default_check(runs)
                all_runs.append(runs)
                all_points.append(points)
                comparisons.append(table)
                text += [f"## {name}: `{options['data']}`, `{options['model']}`, {options['epochs']} epochs", "",
                         markdown_table(points.drop(columns="setting")), "", markdown_table(table.drop(columns="setting")),
                         "", f"ADASS at its defaults (eps={DEFAULT_EPS}): {check['backprop_frac']:.3f} of full's "
                         f"backprops, {check['acc_gap_points']:+.2f} points against full (se {check['se_points']:.2f}).",
                         f"![{name}](frontier_{name}.png)", ""]  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    text.append(f"{time.perf_counter() - start:.0f} s in all.")
    result = pd.concat(comparisons, ignore_index=True)
    write_report(out_dir, "frontier", text, {"frontier": result, "frontier_points": pd.concat(all_points),
                                             "frontier_runs": pd.concat(all_runs)})  # fmt: skip
    return result
