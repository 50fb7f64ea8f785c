"""SSP's bound read back from a run's records: how far ahead of the slowest each push's worker was."""

from __future__ import annotations

import math
from fractions import Fraction

import pandas as pd


def ahead_at_each_push(
    traffic: pd.DataFrame, steps: pd.DataFrame, servers: list[int], batch_size: int
) -> list[Fraction]:
    """How far the pushing worker's clock was ahead of the slowest's when each push reached a server:
    from the servers' push records, in the order each server received them, epoch by epoch. A
    worker's clock is its progress through its own share in plan steps (``ps_async.py``): pushes
    times the epoch's plan steps (its samples over the global batch) over the worker's own steps."""
    gaps = []
    workers = range(int(traffic.src[traffic.phase == "push"].max()) + 1)
    for server in servers:
        pushes = traffic[(traffic.phase == "push") & (traffic.dst == server)]
        for epoch, arrived in pushes.groupby("epoch", sort=True):
            plan = math.ceil(steps.samples[steps.epoch == epoch].sum() / batch_size)
            own = arrived.src.value_counts()  # each worker's steps of the epoch
            done = dict.fromkeys(workers, 0)
            for src in arrived.src:  # records keep the order of arrival
                clocks = {w: Fraction(done[w] * plan, int(own[w])) for w in workers}
                gaps.append(clocks[src] - min(clocks.values()))
                done[src] += 1
    return gaps
