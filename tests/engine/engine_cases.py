"""Helpers for the engine tests: per-rank work that runs in spawned gloo processes or on threads."""

from __future__ import annotations

from typing import Any

import torch

from adass.engine import Agreement, TorchAgreement
from adass.runtime import on_threads  # noqa: F401  (the tests run ranks on threads as the engine does)


def agreement_calls(agreement: Agreement) -> dict[str, Any]:
    """The same collectives on any agreement: a sum and gathers of different (also empty) lengths."""
    rank = agreement.rank
    return {
        "sum": agreement.sum_int(rank + 1),
        "gather": [t.tolist() for t in agreement.gather(torch.arange(rank, dtype=torch.float32) / 3)],
        "empty": [t.numel() for t in agreement.gather(torch.zeros(0))],
    }


def over_gloo(rank: int, world: int) -> dict[str, Any]:
    """In a spawned process of a gloo group: :func:`agreement_calls` through torch.distributed."""
    return agreement_calls(TorchAgreement())
