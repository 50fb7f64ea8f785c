"""Saved runs for comparison: find run folders under a directory, load their evaluations, overlay curves."""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Mapping
from functools import reduce
from pathlib import Path

import holoviews as hv
import pandas as pd

from ..metrics import OUTCOME_FILE, load_run
from .curves import METRICS, X_AXES, learning_curve
from .style import HEIGHT, named

__all__ = ["describe_run", "find_runs", "load_descriptions", "load_evals", "overlay_runs", "run_outcomes"]


def find_runs(folder: str | os.PathLike, depth: int = 3) -> dict[str, Path]:
    """Run folders (holding ``config.json`` and ``eval.parquet``) at most ``depth`` levels below ``folder``.

    Returns
    -------
    dict
        Name (the path relative to ``folder``, ``"."`` for ``folder`` itself) -> folder, sorted by name.
    """
    root = Path(folder)
    found: dict[str, Path] = {}
    frontier = [root]
    for _ in range(depth + 1):
        nxt = []
        for path in frontier:
            if (path / "config.json").is_file() and (path / "eval.parquet").is_file():
                found[path.relative_to(root).as_posix()] = path
            nxt += (
                sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
                if path.is_dir()
                else []
            )
        frontier = nxt
    return dict(sorted(found.items()))


def describe_run(config: Mapping[str, Mapping], outcome: Mapping | None = None) -> str:
    """One line naming what sets a run apart: sampler, workers, exchange, codec, epochs, and how it
    ended when it did not finish (``outcome``, as :data:`~adass.metrics.OUTCOME_FILE` holds it)."""
    flat = {k: v for section in config.values() for k, v in section.items()}
    parts = [f"sampler {flat.get('sampler', '?')}", f"epochs {flat.get('epochs', '?')}"]
    if flat.get("workers"):
        parts += [
            f"workers {flat['workers']}",
            f"exchange {flat.get('exchange')}",
            f"codec {flat.get('codec')}",
        ]
    ended = (outcome or {}).get("outcome", "finished")
    if ended != "finished":
        parts.insert(
            0,
            f"{ended.upper()} after {outcome.get('epochs_done', '?')} of {outcome.get('epochs', '?')} epochs",
        )
    return ", ".join(parts)


def load_evals(runs: Mapping[str, Path]) -> dict[str, pd.DataFrame]:
    """EvalRecords of each named run folder."""
    return {name: load_run(path)["eval"] for name, path in runs.items()}


def load_descriptions(runs: Mapping[str, Path]) -> dict[str, str]:
    """:func:`describe_run` of each named run folder."""
    return {name: describe_run(json.loads((path / "config.json").read_text()), _outcome(path))
            for name, path in runs.items()}  # fmt: skip


def run_outcomes(runs: Mapping[str, Path]) -> dict[str, str]:
    """How each named run folder's run ended: ``finished``, ``stopped`` or ``failed``."""
    return {name: _outcome(path).get("outcome", "finished") for name, path in runs.items()}


def _outcome(path: Path) -> dict:
    file = path / OUTCOME_FILE
    return json.loads(file.read_text()) if file.is_file() else {"outcome": "finished"}


def overlay_runs(evals: Mapping[str, pd.DataFrame], y: str = "test_acc", x: str = "epoch") -> hv.Overlay:
    """One curve per run, overlaid, with a legend of run names.

    Parameters
    ----------
    evals : mapping
        Run name -> EvalRecord rows (see :func:`load_evals`).
    y, x : str
        Columns of :data:`~adass.viz.curves.METRICS` and :data:`~adass.viz.curves.X_AXES`.
    """
    layers = [learning_curve(frame, y, x, label=name) for name, frame in evals.items()]
    overlay = reduce(operator.mul, layers) if layers else learning_curve(pd.DataFrame(), y, x)
    count = f"{len(layers)} saved run" + ("" if len(layers) == 1 else "s")
    return overlay.opts(width=900, height=HEIGHT + 120, legend_position="right", hooks=[named("adass-compare")],
                        title=f"{METRICS.get(y, y)} vs {X_AXES.get(x, x)}: {count}")  # fmt: skip
