"""One run on virtual replicas (threads of this process) and what the link model says it would take.

Modelled step time: the slowest replica's own work of a step (forward, backward, encode, decode) plus
the exchange's modelled transfer time for that step's traffic under a link
(:meth:`adass.exchange.Topology.step_seconds`), median over the steps of the last epoch. The replicas
share this machine's cores, so their own work is slower than on separate machines: the modelled
communication share is a lower bound.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import pandas as pd

from ...config import RunConfig
from ...data import Dataset
from ...exchange import EXCHANGES, Link, topology_of
from ...metrics import MemorySink, StepRecord, TrafficRecord
from ...runtime import run

__all__ = ["modelled_steps", "run_virtual"]


def modelled_steps(config: RunConfig, steps: pd.DataFrame, traffic: pd.DataFrame, link: str) -> pd.DataFrame:
    """Per step of the last epoch: the slowest replica's own work and the modelled transfer time (s).

    Parameters
    ----------
    config : RunConfig
        The run (its exchange spec picks the time model).
    steps, traffic : DataFrame
        Its StepRecord and TrafficRecord frames.
    link : str
        Link spec (``1gbit,50us``).

    Returns
    -------
    DataFrame
        Indexed by step: ``own_s`` and ``comm_s``.
    """
    topology = topology_of(EXCHANGES.resolve(config.exchange.exchange)[0].name)
    model = Link.parse(link)
    last = int(steps["epoch"].max())
    steps = steps[steps["epoch"] == last]
    own = (steps["compute_s"] + steps["encode_s"] + steps["decode_s"]).groupby(steps["step"]).max()
    traffic = traffic[traffic["epoch"] == last]
    comm = {step: topology.step_seconds(part, model) for step, part in traffic.groupby("step")}
    return pd.DataFrame({"own_s": own, "comm_s": pd.Series(comm, dtype=float).reindex(own.index).fillna(0.0)})


def run_virtual(config: RunConfig, dataset: Dataset, links: Mapping[str, str]) -> dict:
    """Train ``config`` on its ``--replicas`` virtual replicas; its accuracy, costs and modelled times.

    Returns
    -------
    dict
        ``test_acc``, ``backprops``, ``wire_bytes_epoch`` (mean over epochs), ``wall_s``, and per
        link name ``step_ms_<name>`` (median modelled step), ``comm_ms_<name>`` (median modelled
        transfer time) and ``comm_share_<name>`` (modelled
        transfer time over modelled step time, summed over the last epoch's steps).
    """
    sink = MemorySink()
    start = time.perf_counter()
    result = run(config, sink=sink, dataset=dataset, run_id="reproduce")
    wall_s = time.perf_counter() - start
    row = {"test_acc": float(result.final.test_acc), "backprops": int(result.counters.backprops),
           "wire_bytes_epoch": float(result.final.wire_bytes) / config.optim.epochs, "wall_s": wall_s}  # fmt: skip
    steps, traffic = sink.frame(StepRecord), sink.frame(TrafficRecord)
    for name, link in links.items():
        modelled = modelled_steps(config, steps, traffic, link)
        total = modelled["own_s"] + modelled["comm_s"]
        row[f"step_ms_{name}"] = 1e3 * float(total.median())
        row[f"comm_ms_{name}"] = 1e3 * float(modelled["comm_s"].median())
        row[f"comm_share_{name}"] = (
            float(modelled["comm_s"].sum() / total.sum()) if total.sum() > 0 else float("nan")
        )
    return row
