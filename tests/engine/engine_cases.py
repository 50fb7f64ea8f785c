"""Helpers for the engine tests: per-rank work that runs in spawned gloo processes or on threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

from adass.engine import Agreement, TorchAgreement


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


def on_threads(world: int, work: Callable[[int], Any]) -> list[Any]:
    """``work(rank)`` on one thread per rank; results in rank order (a failure is re-raised)."""
    results: list[Any] = [None] * world
    errors: list[BaseException] = []

    def guarded(rank: int) -> None:
        try:
            results[rank] = work(rank)
        except BaseException as err:  # noqa: BLE001 - re-raised below
            errors.append(err)

    threads = [threading.Thread(target=guarded, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
