"""Benchmark suites behind ``adass bench SUITE``.

Each suite is a module ``adass.bench.<suite>`` with ``run(out_dir: Path, quick: bool = False) ->
pandas.DataFrame`` that prints its table(s) and writes ``out_dir/<suite>.md`` and ``.csv``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["SUITES", "load_suite"]

SUITES: dict[str, str] = {
    "samplers": "every sampler on mnist5k and a hard synthetic set, 3 seeds",
    "exchange": "codecs x PS/ring: wire bytes, error, simulated and real loopback time",
    "dml": "PS vs ring x codecs on a Dask cluster, P=2/4, 1 Gbit link or none, beside PyTorch DDP; ADASS vs single process",
}


def load_suite(name: str) -> ModuleType:
    return importlib.import_module(f"adass.bench.{name}")
