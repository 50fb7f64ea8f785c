"""Simulated step time from traffic records: stages run one after another, and within a stage each
rank's egress and ingress serialise what passes through them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import asdict

import pandas as pd

from ...metrics import TrafficRecord, columns
from .model import Link

__all__ = ["stage_seconds", "traffic_frame"]


def traffic_frame(records: Iterable[TrafficRecord] | pd.DataFrame) -> pd.DataFrame:
    """Records as a DataFrame with the TrafficRecord columns (a DataFrame passes through)."""
    if isinstance(records, pd.DataFrame):
        return records
    rows = [asdict(r) for r in records]
    return pd.DataFrame(rows, columns=columns(TrafficRecord))


def stage_seconds(
    records: Iterable[TrafficRecord] | pd.DataFrame,
    link: Link,
    stage_of: Callable[[str, int], Hashable],
) -> dict[Hashable, float]:
    """Modelled seconds of each stage of one step, in the order the stages first appear.

    A stage (``stage_of(phase, hop)``, e.g. one ring hop) takes ``latency + B * 8 / bandwidth``,
    where ``B`` is the most bytes any one rank sends or receives in it: transfers on one port
    follow each other back to back, different ports work in parallel, and the stage ends when
    its busiest port is done. Stages do not overlap (each needs the one before). For a ring hop
    with one piece per chunk this is the slowest transfer of the hop; for a parameter server it
    is the servers' ingress (push) and egress (pull) serialisation.

    Parameters
    ----------
    records : list of TrafficRecord or DataFrame
        The transfers of one step.
    link : Link
        The link model every port follows.
    stage_of : callable
        Maps ``(phase, hop)`` to a stage key.
    """
    frame = traffic_frame(records)
    out: dict[Hashable, float] = {}
    if frame.empty:
        return out
    stages = [stage_of(p, int(h)) for p, h in zip(frame["phase"], frame["hop"], strict=True)]
    frame = frame.assign(_stage=stages)
    for stage, part in frame.groupby("_stage", sort=False):
        egress = part.groupby("src")["wire_bytes"].sum().max()
        ingress = part.groupby("dst")["wire_bytes"].sum().max()
        out[stage] = link.seconds(int(max(egress, ingress)))
    return out
