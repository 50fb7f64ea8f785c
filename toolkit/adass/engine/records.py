"""An epoch's records from the replicas' reports: steps, traffic and selection frames, and the
evaluation record with the run's running totals. Used by every run of several replicas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..metrics import EvalRecord, Sink, StepRecord, TrafficRecord

__all__ = ["epoch_eval", "new_totals", "write_epoch"]


def new_totals() -> dict[str, float]:
    """A run's running totals before its first epoch (they are kept in checkpoints as they are)."""
    return {"backprops": 0.0, "forwards": 0.0, "wire_bytes": 0.0, "raw_bytes": 0.0, "train_s": 0.0}


def write_epoch(
    sink: Sink, reports: Sequence[Mapping[str, Any]], traffic: Sequence[Mapping[str, Any]]
) -> None:
    """Write the replicas' step rows and every transfer (``traffic``) of an epoch."""
    steps = pd.DataFrame([row for r in reports for row in r["steps"]])
    if len(steps):
        sink.write_frame(StepRecord, steps)
    if traffic:
        sink.write_frame(TrafficRecord, pd.DataFrame(list(traffic)))


def epoch_eval(
    run_id: str, epoch: int, reports: Sequence[Mapping[str, Any]], traffic: Sequence[Mapping[str, Any]],
    epoch_s: float, totals: dict[str, float], test: tuple[float, float], n_train: int,
) -> EvalRecord:  # fmt: skip
    """Add the epoch to ``totals`` (in place) and return its EvalRecord.

    The training loss is the sample-weighted mean over every replica's steps; ``test`` is
    ``(test_loss, test_acc)``.
    """
    totals["backprops"] += sum(r["backprops"] for r in reports)
    totals["forwards"] += sum(r["forwards"] for r in reports)
    totals["wire_bytes"] += sum(t["wire_bytes"] for t in traffic)
    totals["raw_bytes"] += sum(t["raw_bytes"] for t in traffic)
    totals["train_s"] += epoch_s
    samples = sum(r["samples"] for r in reports)
    return EvalRecord(
        run=run_id, epoch=epoch, train_s=totals["train_s"], backprops=int(totals["backprops"]),
        forwards=int(totals["forwards"]), wire_bytes=int(totals["wire_bytes"]),
        train_loss=sum(r["loss_sum"] for r in reports) / max(1, samples), test_loss=test[0], test_acc=test[1],
        kept_frac=samples / max(1, n_train),
    )  # fmt: skip
