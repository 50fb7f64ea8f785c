"""``adass bench dml_colocated`` (and part (c) of ``adass bench dml``): a parameter server whose
shards run inside the replicas' processes (``ps:colocated=true``) against dedicated server workers
with the same shards, at P = 4, for both places of the optimizer step (``update=replica|server``).

Both placements do the same arithmetic (their runs end with the same parameters, bit for bit), so
only where the servers run differs: the dedicated arm takes P + S Dask workers, the colocated one P.
The Dask workers a run used are counted from its traffic records (every rank that sent or received).
The arms alternate in rounds; the epoch-time ratio is the median of the per-round ratios, so a slow
spell of the machine lands on both sides of it.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...config import RunConfig
from ...metrics import MemorySink, StepRecord, TrafficRecord
from ...runtime.cluster import ClusterHandle, connect, train_distributed
from ...tables import markdown_table
from . import write_report
from .dml_plans import FULL, QUICK

__all__ = [
    "COLUMNS",
    "FULL_PLAN",
    "QUICK_PLAN",
    "ColocatedPlan",
    "grid",
    "measure",
    "run",
    "section",
    "targets",
]

COLUMNS = ["workers", "servers", "update", "placement", "dask_workers", "messages_step", "epoch_s",
           "epoch_vs_dedicated", "wire_MB_epoch", "test_acc"]  # fmt: skip
PLACEMENTS = ("dedicated", "colocated")


@dataclass(frozen=True)
class ColocatedPlan:
    """Sizes of the comparison: run options, replicas P, server shards S and alternating rounds."""

    setting: dict
    workers: int
    servers: int
    rounds: int


FULL_PLAN = ColocatedPlan({**FULL.setting, "epochs": 2}, 4, 2, 3)
QUICK_PLAN = ColocatedPlan(dict(QUICK.setting), 2, 2, 1)


def spec(servers: int, update: str, placement: str) -> str:
    """The exchange spec of one arm."""
    return f"ps:servers={servers},update={update}" + (",colocated=true" if placement == "colocated" else "")


def measure(base: RunConfig, handle: ClusterHandle, plan: ColocatedPlan, update: str, placement: str) -> dict:
    """Train one arm on ``handle``'s cluster; its table row (``epoch_vs_dedicated`` left out)."""
    config = base.replace(workers=plan.workers, exchange=spec(plan.servers, update, placement))
    result = train_distributed(config, handle=handle, sink=MemorySink(),
                               run_id=f"dml-colocated-{update}-{placement}")  # fmt: skip
    traffic = result.sink.frame(TrafficRecord)
    exchanged = traffic[traffic["phase"].isin(["push", "pull"])]
    steps = result.sink.frame(StepRecord)["step"].nunique()
    epochs = config.optim.epochs
    return {"workers": plan.workers, "servers": plan.servers, "update": update, "placement": placement,
            "dask_workers": len(set(traffic["src"]) | set(traffic["dst"])),
            "messages_step": len(exchanged) / steps, "epoch_s": result.totals["train_s"] / epochs,
            "wire_MB_epoch": result.totals["wire_bytes"] / epochs / 1e6, "test_acc": result.final.test_acc}  # fmt: skip


def grid(plan: ColocatedPlan, device: str = "auto") -> pd.DataFrame:
    """Every update x placement, ``plan.rounds`` alternating rounds on one cluster of P + S workers
    whose replicas train on ``device``; the rows are each arm's median run, the colocated ratio the
    median of the per-round ratios."""
    base = RunConfig.from_flat(**plan.setting, sampler="full", seed=0, device=device)
    dedicated = base.replace(workers=plan.workers, exchange=spec(plan.servers, "replica", "dedicated"))
    rows = []
    with connect(n_workers=plan.workers + dedicated.servers, device=device) as handle:
        for update in ("replica", "server"):
            runs = {p: [] for p in PLACEMENTS}
            for _ in range(plan.rounds):
                for placement in PLACEMENTS:
                    runs[placement].append(measure(base, handle, plan, update, placement))
            ratio = statistics.median(c["epoch_s"] / d["epoch_s"]
                                      for d, c in zip(runs["dedicated"], runs["colocated"], strict=True))  # fmt: skip
            middle = {
                p: sorted(r, key=lambda row: row["epoch_s"])[(len(r) - 1) // 2] for p, r in runs.items()
            }
            rows += [{**middle["dedicated"], "epoch_vs_dedicated": 1.0},
                     {**middle["colocated"], "epoch_vs_dedicated": ratio}]  # fmt: skip
    return pd.DataFrame(rows)[COLUMNS]


def targets(table: pd.DataFrame) -> pd.DataFrame:
    """The goals, read off the table: no Dask workers besides the replicas, epoch time no worse
    than the dedicated servers', the same accuracy (the runs are bit-identical)."""
    checks = []
    for update, rows in table.groupby("update", sort=False):
        ded, col = (rows[rows["placement"] == p].iloc[0] for p in PLACEMENTS)
        p, s = int(col["workers"]), int(col["servers"])
        checks += [
            (f"colocated PS takes no Dask workers besides the replicas, P={p}, S={s}, update={update}",
             col["dask_workers"] == p and ded["dask_workers"] == p + s,
             f"{int(col['dask_workers'])} workers (dedicated: {int(ded['dask_workers'])})"),
            (f"colocated PS epoch time no worse than dedicated, P={p}, S={s}, update={update}",
             col["epoch_vs_dedicated"] <= 1.0,
             f"{col['epoch_vs_dedicated']:.2f}x ({col['epoch_s']:.2f} s vs {ded['epoch_s']:.2f} s)"),
            (f"colocated PS accuracy equals dedicated, update={update}", col["test_acc"] == ded["test_acc"],
             f"{col['test_acc']:.4f} vs {ded['test_acc']:.4f}"),
        ]  # fmt: skip
    return pd.DataFrame([{"goal": g, "met": "yes" if ok else "no", "measured": m} for g, ok, m in checks])


def section(
    plan: ColocatedPlan, table: pd.DataFrame, title: str = "## colocated PS vs dedicated servers"
) -> list[str]:
    """The report's lines for ``table``: what ran, the table and its goals."""
    s = plan.setting
    return [title, "",
            f"`{s['data']}`, `{s['model']}`, global batch {s['batch_size']}, lr {s['lr']}, {s['epochs']} epochs, "
            f"sampler `full`, seed 0, fp32; P={plan.workers} replicas, S={plan.servers} shards, {plan.rounds} "
            "alternating rounds (rows: median runs; `epoch_vs_dedicated`: median of per-round ratios). "
            "`dask_workers`: ranks in the traffic records; `messages_step`: push and pull messages per step "
            "(a replica's own shard sends none).", "",
            markdown_table(table), "", markdown_table(targets(table)), ""]  # fmt: skip


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Run the comparison on its own LocalCluster, print it and write ``dml_colocated.md`` and ``.csv``."""
    plan = QUICK_PLAN if quick else FULL_PLAN
    start, load = time.perf_counter(), os.getloadavg()
    table = grid(plan)
    text = ["# adass bench dml_colocated", "",
            f"One LocalCluster (one thread per worker); host with {os.cpu_count()} CPUs, load average "
            f"{load[0]:.1f} at the start; {time.perf_counter() - start:.0f} s in all.", "",
            *section(plan, table, "## colocated PS vs dedicated servers")]  # fmt: skip
    write_report(out_dir, "dml_colocated", text, {"dml_colocated": table})
    return table
