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
    """Each selecting sampler against full data and its schedule-matched control, same exchange and codec."""
    distributed = "exchange" in table and table["exchange"].astype(bool).any()
    full = table[table["sampler"] == "full"]
    where: dict[str, str] = {}
    if distributed:
        best = full.sort_values("epoch_s").iloc[0]
        where = {"exchange": best["exchange"], "codec": best["codec"]}
    reference = _row(table, sampler="full", **where)
    control = _row(table, sampler=_SCHEDULE_MATCHED, **where)
    parts = []
    for sampler in dict.fromkeys(table["sampler"]):
        arm = _row(table, sampler=sampler, **where)
        if (
            arm is None
            or reference is None
            or sampler == "full"
            or sampler.startswith(("random (", "full ("))
        ):
            continue
        # wall_ratio is against the table's first row; against full on the same exchange and codec
        # the ratio isolates what selection saves
        time_frac = arm["wall_ratio"] / reference["wall_ratio"]
        text = (f"{sampler} backpropagates {arm['backprop_frac']:.2f} of full's samples in "
                f"{time_frac:.2f} of its time, at test accuracy {arm['test_acc']:.3f} against "
                f"full's {reference['test_acc']:.3f}")  # fmt: skip
        if control is not None:
            text += f" and {control['test_acc']:.3f} for random samples at the same counts"
        parts.append(text)
    if not parts:
        return []
    on = f" (on {where['exchange']} with {where['codec']})" if where else ""
    return [f"Selection{on}: " + "; ".join(parts) + "."]


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
