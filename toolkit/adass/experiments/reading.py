"""Two lines under a comparison table: what the exchange and the codec save, and what selection saves.

A table of a dozen arms answers three questions at once, and a reader should not have to find the
right pairs of rows by hand. Each line compares rows that differ in one thing only: the ring
against the Parameter Server and a codec against the reference codec (both with full data), then
each selecting sampler against full data and against its schedule-matched random control (both on
the fastest exchange and codec). A question the table cannot answer (one exchange only, say) is
left out of its line.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["reading"]

_SCHEDULE_MATCHED = "random (schedule-matched)"
_BUDGET_MATCHED = "full (budget-matched)"


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _row(table: pd.DataFrame, **where: str) -> pd.Series | None:
    rows = table
    for column, value in where.items():
        rows = rows[rows[column] == value]
    return None if rows.empty else rows.iloc[0]


def _exchange_name(spec: str) -> str:
    return spec.split(":")[0]


def _communication(table: pd.DataFrame) -> list[str]:
    """Ring against PS and every codec against the first one, all with full data."""
    full = table[table["sampler"] == "full"]
    reference = full.iloc[0]
    parts = []
    kinds = {_exchange_name(e): e for e in full["exchange"]}
    if {"ps", "ring"} <= kinds.keys():
        ps = _row(full, exchange=kinds["ps"], codec=reference["codec"])
        ring = _row(full, exchange=kinds["ring"], codec=reference["codec"])
        if ps is not None and ring is not None:
            parts.append(f"the ring instead of the PS takes {ring['epoch_s']:.2f} s an epoch against "
                         f"{ps['epoch_s']:.2f} s ({ps['epoch_s'] / ring['epoch_s']:.1f}x faster)")  # fmt: skip
    fastest_exchange = full.sort_values("epoch_s").iloc[0]["exchange"]
    base = _row(full, exchange=fastest_exchange, codec=reference["codec"])
    for codec in dict.fromkeys(full["codec"]):
        other = _row(full, exchange=fastest_exchange, codec=codec)
        if base is None or other is None or codec == reference["codec"]:
            continue
        parts.append(f"{codec} instead of {reference['codec']} sends {_mb(other['wire_bytes'])} against "
                     f"{_mb(base['wire_bytes'])} ({base['wire_bytes'] / max(other['wire_bytes'], 1):.1f}x less) "
                     f"in {other['epoch_s']:.2f} s an epoch ({base['epoch_s'] / other['epoch_s']:.1f}x faster)")  # fmt: skip
    return [("Communication: " + "; ".join(parts) + ".")] if parts else []


def _selection(table: pd.DataFrame) -> list[str]:
    """Each selecting sampler against full data: its share of the backprops, its time on the slowest
    and on the fastest exchange and codec (selection saves most where each step waits on the link),
    and its accuracy against full data and both controls on the fastest."""
    distributed = "exchange" in table and table["exchange"].astype(bool).any()
    full = table[table["sampler"] == "full"]
    settings = [{}]
    if distributed:
        ordered = full.sort_values("epoch_s")
        settings = [
            {"exchange": r["exchange"], "codec": r["codec"]} for _, r in ordered.iloc[[-1, 0]].iterrows()
        ]
        settings = [s for k, s in enumerate(settings) if s not in settings[:k]]
    best = settings[-1]
    parts = []
    for sampler in dict.fromkeys(table["sampler"]):
        if sampler == "full" or sampler.startswith(("random (", "full (")):
            continue
        times = []
        for where in settings:
            arm, reference = _row(table, sampler=sampler, **where), _row(table, sampler="full", **where)
            if arm is not None and reference is not None:
                # wall_ratio is against the table's first row: divide by full's on the same setting
                on = f" on {where['exchange']} with {where['codec']}" if where else ""
                unit = "" if times else " of full's time"
                times.append(f"{arm['wall_ratio'] / reference['wall_ratio']:.2f}{unit}{on}")
        arm, reference = _row(table, sampler=sampler, **best), _row(table, sampler="full", **best)
        if arm is None or reference is None:
            continue
        accuracy = [f"{reference['test_acc']:.3f} for full data"]
        for label, text in ((_SCHEDULE_MATCHED, "random samples at the same counts"),
                            (_BUDGET_MATCHED, "full data on the same budget")):  # fmt: skip
            control = _row(table, sampler=label, **best)
            if control is not None:
                accuracy.append(f"{control['test_acc']:.3f} for {text}")
        there = "there: " if len(settings) > 1 else ""
        parts.append(f"{sampler} backpropagates {arm['backprop_frac']:.2f} of full's samples and takes "
                     f"{' and '.join(times)} ({there}test accuracy {arm['test_acc']:.3f} against "
                     f"{', '.join(accuracy)})")  # fmt: skip
    return [("Selection: " + "; ".join(parts) + ".")] if parts else []


def reading(table: pd.DataFrame) -> list[str]:
    """At most two lines that read ``table`` (:func:`adass.experiments.compare.compare`'s result).

    Parameters
    ----------
    table : pandas.DataFrame
        One row per arm, with ``sampler``, ``test_acc``, ``backprop_frac`` and ``wall_ratio``, and for a
        distributed comparison ``exchange``, ``codec``, ``wire_bytes`` and ``epoch_s``.

    Returns
    -------
    list of str
        The communication line (distributed tables only) and the selection line, each where the table
        holds the rows it compares.
    """
    if table.empty or "full" not in set(table["sampler"]):
        return []
    lines = _communication(table) if "exchange" in table and table["exchange"].astype(bool).any() else []
    return lines + _selection(table)
