"""Run several samplers over several seeds on the same data and summarise them side by side.

Runs are interleaved (seed by seed, every sampler) so slow phases of a noisy machine hit all
samplers alike; costs are reported as ratios to ``full`` from the same invocation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from .config import RunConfig, SamplerSection, check_option, options
from .data import Dataset, load_dataset
from .metrics import EvalRecord, MemorySink, ParquetSink, atomic_write_text
from .tables import markdown_table
from .trainer import train

__all__ = ["COMPARE_COLUMNS", "compare", "run_one", "summarise", "warm_up"]

COMPARE_COLUMNS = ["sampler", "test_acc", "test_acc_std", "backprop_frac", "forward_frac", "wall_ratio"]


def _run_dir_name(sampler: str, seed: int) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "=._-" else "_" for ch in sampler)
    return f"{safe}-seed{seed}"


def run_one(
    config: RunConfig,
    dataset: Dataset,
    out_dir: str | Path | None = None,
    label: str | None = None,
    progress: Callable[[EvalRecord], None] | None = None,
) -> dict:
    """Train one configuration; return its row (sampler label, seed, accuracy, costs)."""
    spec, seed = config.sampler.sampler, config.optim.seed
    label = label or spec
    sink = MemorySink() if out_dir is None else ParquetSink(
        Path(out_dir) / "runs" / _run_dir_name(label, seed), config.to_dict()
    )  # fmt: skip
    result = train(config, sink=sink, dataset=dataset, run_id=f"{label}|seed{seed}", progress=progress,
                   selection_records=out_dir is not None)  # fmt: skip
    return {
        "sampler": label, "spec": spec, "seed": seed, "test_acc": result.final.test_acc,
        "backprops": result.counters.backprops, "forwards": result.counters.forwards,
        "wall_s": result.counters.train_s,
    }  # fmt: skip


def warm_up(config: RunConfig, dataset: Dataset) -> None:
    """An untimed epoch: the first run of a process pays torch's lazy initialisation."""
    train(config.replace(epochs=1, sampler="full"), dataset=dataset, selection_records=False)


def compare(
    base: RunConfig,
    samplers: Sequence[str],
    seeds: int,
    out_dir: str | Path | None = None,
    progress_factory: Callable[[str, int], Callable[[EvalRecord], None] | None] | None = None,
) -> pd.DataFrame:
    """Train every sampler for seeds ``base.optim.seed + 0 .. seeds-1``; return one row per sampler.

    ``full`` is added as the reference when it is missing. Per-run records go to
    ``out_dir/runs/<sampler>-seed<k>/`` when ``out_dir`` is given, with ``compare.csv``/``.md``.
    """
    section = options(SamplerSection)["sampler"]
    specs = [check_option("sampler", section, s) for s in samplers]
    if "full" not in specs:
        specs = ["full", *specs]
    rows = []
    for k in range(seeds):
        seed = base.optim.seed + k
        dataset = load_dataset(base.data.data, seed=seed)
        if k == 0:
            warm_up(base, dataset)
        for spec in specs:
            progress = progress_factory(spec, seed) if progress_factory else None
            rows.append(run_one(base.replace(sampler=spec, seed=seed), dataset, out_dir, progress=progress))
    runs = pd.DataFrame(rows)
    table = summarise(runs)
    if out_dir is not None:
        out = Path(out_dir)
        atomic_write_text(out / "compare_runs.csv", runs.to_csv(index=False))
        atomic_write_text(out / "compare.csv", table.to_csv(index=False))
        atomic_write_text(out / "compare.md", markdown_table(table) + "\n")
    return table


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per sampler from per-run rows: accuracy mean/std and cost ratios to ``full`` (same seed)."""
    ref = runs[runs["sampler"] == "full"].set_index("seed")
    runs = runs.assign(
        backprop_frac=runs["backprops"] / runs["seed"].map(ref["backprops"]),
        forward_frac=runs["forwards"] / runs["seed"].map(ref["forwards"]),
        wall_ratio=runs["wall_s"] / runs["seed"].map(ref["wall_s"]),
    )
    order = list(dict.fromkeys(runs["sampler"]))
    grouped = runs.groupby("sampler", sort=False)
    table = pd.DataFrame({
        "sampler": order,
        "test_acc": [grouped.get_group(s)["test_acc"].mean() for s in order],
        "test_acc_std": [grouped.get_group(s)["test_acc"].std(ddof=1) if len(grouped.get_group(s)) > 1 else 0.0 for s in order],
        "backprop_frac": [grouped.get_group(s)["backprop_frac"].mean() for s in order],
        "forward_frac": [grouped.get_group(s)["forward_frac"].mean() for s in order],
        "wall_ratio": [grouped.get_group(s)["wall_s"].sum() / grouped.get_group("full")["wall_s"].sum() for s in order],
    })  # fmt: skip
    return table[COMPARE_COLUMNS]
