"""What the ``adass`` subcommands do once their input is validated: progress bars and summary tables."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from .compare import compare
from .config import RunConfig
from .data import DataError, load_dataset
from .metrics import EvalRecord, ParquetSink
from .registry import SpecError
from .tables import markdown_table
from .trainer import train

__all__ = ["run_bench", "run_compare", "run_train"]


def _bar(desc: str, total: int, quiet: bool) -> tuple[tqdm, Callable[[EvalRecord], None]]:
    bar = tqdm(total=total, desc=desc, unit="epoch", disable=quiet, file=sys.stderr, dynamic_ncols=True)

    def update(record: EvalRecord) -> None:
        bar.set_postfix(kept=f"{record.kept_frac:.2f}", loss=f"{record.train_loss:.3f}", acc=f"{record.test_acc:.3f}")
        bar.update(1)

    return bar, update


def run_train(config: RunConfig, out: Path, quiet: bool = False) -> int:
    """``adass train``: one run, records under ``out``, a summary table on stdout."""
    try:
        dataset = load_dataset(config.data.data, seed=config.optim.seed)
    except DataError as err:
        raise SpecError(f"--data: {err}") from None
    bar, update = _bar(config.sampler.sampler, config.optim.epochs, quiet)
    sink = ParquetSink(out, config.to_dict())
    with bar:
        result = train(config, sink=sink, progress=update, dataset=dataset)
    evals = result.sink.frame(EvalRecord)
    full_cost = dataset.n_train * config.optim.epochs
    summary = pd.DataFrame([{
        "sampler": config.sampler.sampler,
        "epochs": config.optim.epochs,
        "test_acc": result.final.test_acc,
        "test_loss": result.final.test_loss,
        "backprop_frac": result.counters.backprops / full_cost,
        "forward_frac": result.counters.forwards / full_cost,
        "mean_kept": float(evals["kept_frac"].mean()),
        "train_s": result.counters.train_s,
    }])  # fmt: skip
    print(markdown_table(summary))
    print(f"records: {out}/ (eval.parquet, selection.parquet, steps.parquet, config.json)")
    return 0


def run_compare(config: RunConfig, samplers: Sequence[str], seeds: int, out: Path, quiet: bool = False) -> int:
    """``adass compare``: every sampler for every seed; ``out/compare.csv`` and a table on stdout."""
    bars: list[tqdm] = []

    def progress_for(spec: str, seed: int) -> Callable[[EvalRecord], None]:
        bar, update = _bar(f"{spec} seed {seed}", config.optim.epochs, quiet)
        bars.append(bar)
        return update

    try:
        table = compare(config, samplers, seeds, out, progress_factory=progress_for)
    except DataError as err:
        raise SpecError(f"--data: {err}") from None
    finally:
        for bar in bars:
            bar.close()
    print(markdown_table(table))
    print(f"table: {out / 'compare.csv'}; runs: {out / 'runs'}/")
    return 0


def run_bench(suite: str, out: Path, quick: bool = False) -> int:
    """``adass bench SUITE``: the suite prints its tables and writes ``out/<suite>.md`` and ``.csv``."""
    from .bench import load_suite

    out.mkdir(parents=True, exist_ok=True)
    load_suite(suite).run(out, quick=quick)
    return 0
