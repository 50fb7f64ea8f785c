"""Synthetic records shaped like a run's: selection, traffic (ring and PS), steps and evaluations."""

from __future__ import annotations

import numpy as np
import pandas as pd

from adass.metrics import EvalRecord, SelectionRecord, TrafficRecord, columns


def selection_frame(
    n: int = 300, epochs: int = 4, ranks: int = 2, drop: float = 0.3, seed: int = 0
) -> pd.DataFrame:
    """Every epoch after the first drops the ``drop`` share of smallest bounds (as ADASS does)."""
    rng = np.random.default_rng(seed)
    parts = []
    for epoch in range(epochs):
        bound = rng.lognormal(size=n)
        kept = bound >= np.quantile(bound, drop) if epoch else np.ones(n, bool)
        parts.append(pd.DataFrame({"run": "r", "epoch": epoch, "rank": np.arange(n) % ranks,
                                   "sample_id": np.arange(n), "bound": bound, "kept": kept}))  # fmt: skip
    return pd.concat(parts, ignore_index=True)[columns(SelectionRecord)]


def ring_traffic(
    world: int = 3, steps: range = range(0, 40, 10), epoch: int = 0, ratio: float = 0.25
) -> pd.DataFrame:
    """Reduce-scatter and all-gather: rank r sends chunk (r - hop) % P to r + 1 at every hop."""
    rows = [
        {"run": "r", "epoch": epoch, "step": s, "phase": phase, "hop": hop, "src": src, "dst": (src + 1) % world,
         "chunk": (src - hop) % world, "raw_bytes": 400, "wire_bytes": int(400 * ratio), "seconds": 1e-3,
         "sim_seconds": 0.0}
        for s in steps for phase in ("reduce_scatter", "all_gather") for hop in range(world - 1) for src in range(world)
    ]  # fmt: skip
    return pd.DataFrame(rows)[columns(TrafficRecord)]


def ps_traffic(replicas: int = 3, steps: range = range(0, 40, 10)) -> pd.DataFrame:
    """Each replica pushes 100 wire bytes to server rank ``replicas`` and pulls 400 back."""
    server = replicas
    rows = []
    for s in steps:
        for r in range(replicas):
            rows.append(
                {
                    "run": "r",
                    "epoch": 0,
                    "step": s,
                    "phase": "push",
                    "hop": 0,
                    "src": r,
                    "dst": server,
                    "chunk": 0,
                    "raw_bytes": 400,
                    "wire_bytes": 100,
                    "seconds": 1e-3,
                    "sim_seconds": 0.0,
                }
            )
            rows.append({"run": "r", "epoch": 0, "step": s, "phase": "pull", "hop": 0, "src": server, "dst": r,
                         "chunk": 0, "raw_bytes": 400, "wire_bytes": 400, "seconds": 1e-3, "sim_seconds": 0.0})  # fmt: skip
    return pd.DataFrame(rows)[columns(TrafficRecord)]


def step_rows(ranks: int = 2, steps: int = 12, epoch: int = 0, first: int = 0) -> list[dict]:
    return [
        {"run": "r", "epoch": epoch, "step": s, "rank": r, "samples": 8, "loss": 1.0 / (s + 1), "compute_s": 0.01,
         "encode_s": 0.002, "comm_s": 0.005 * (r + 1), "decode_s": 0.001, "staleness": 0, "wire_bytes": 100,
         "raw_bytes": 400}
        for s in range(first, first + steps) for r in range(ranks)
    ]  # fmt: skip


def eval_records(epochs: int = 4, run: str = "r") -> list[EvalRecord]:
    return [EvalRecord(run, e, 1.5 * (e + 1), 100 * (e + 1), 120 * (e + 1), 1000 * (e + 1), 1.0 / (e + 1),
                       1.1 / (e + 1), 0.5 + 0.1 * e, 0.7) for e in range(epochs)]  # fmt: skip
