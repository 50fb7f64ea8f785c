"""Benchmark suites behind ``adass bench SUITE``.

Each suite is a module ``adass.experiments.bench.<suite>`` with ``run(out_dir: Path, quick: bool = False) ->
pandas.DataFrame`` that prints its table(s) and writes ``out_dir/<suite>.md`` and ``.csv``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pandas as pd

__all__ = ["SUITES", "load_suite", "write_report"]

SUITES: dict[str, str] = {
    "step": "where a step's time goes on a 56k-sample MLP: forward and backward, optimizer, the engine's own work; per sampler",
    "frontier": "accuracy against backprops and time for every sampler over its knob, 5 seeds, 4 kinds of data (one compute-bound), with plots",
    "samplers": "every sampler on mnist5k and a hard synthetic set, 10 seeds, with ADASS's matched controls",
    "adass_defaults": "the measurements behind ADASS's quantile and lipschitz=auto defaults",
    "adass_choice": "ADASS's default budget against the candidates it was chosen over and InfoBatch, 11 settings, 5 seeds",
    "exchange": "codecs x PS/ring: wire bytes, error, simulated and real loopback time",
    "dml": "PS vs ring x codecs on a Dask cluster, P=2/4, 1 Gbit link or none, beside PyTorch DDP; ADASS vs single process",
    "dml_colocated": "PS shards colocated with the replicas vs dedicated server workers, P=4: Dask workers, epoch time",
    "codecs": "QSGD and random-k encode/decode against one read pass, reference and fused kernels, one core",
    "data": "a data set 4x one Dask worker's memory limit on 4 workers under that limit, rows read from the file as they train: each replica's memory vs its shard",
    "faults": "kill a worker, the client and the scheduler mid-run: detection time, work lost, accuracy vs uninterrupted",
    "dashboard": "20 visitors opening the dashboard at once (seconds to a rendered page) and Start to the first accuracy point, in a browser",
    "equivalence": "final parameters and wire bytes of 60+ runs (samplers x exchanges x codecs x memories x backends) against --against REV",
}


def load_suite(name: str) -> ModuleType:
    return importlib.import_module(f"adass.experiments.bench.{name}")


def write_report(out_dir: Path, suite: str, lines: list[str], tables: dict[str, pd.DataFrame]) -> str:
    """Print a suite's report and write ``out_dir/<suite>.md`` plus one CSV per entry of ``tables``.

    ``tables`` maps file stems to frames (the first is ``<suite>``); every file is written atomically.
    """
    from ...metrics import atomic_write_text

    report = "\n".join(lines)
    print(report)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / f"{suite}.md", report)
    for stem, frame in tables.items():
        atomic_write_text(out_dir / f"{stem}.csv", frame.to_csv(index=False))
    return report
