"""Claim 1, ADASS-DML: ADASS trains with fewer backprops at full data's accuracy (beside random, InfoBatch
and Selective Backprop), under a Parameter Server and a Ring All-Reduce on real processes, where the
ring is faster and communication still a large part of the step; up to 63 virtual replicas on a
modelled link show how that share grows with P. Beside them, PowerSGD on the same processes against
torch's own hook (:mod:`.dml_powersgd`, with a verdict line of its own).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ...tables import markdown_table
from ..bench.dml import LINKS as REAL_LINKS
from ..compare import SCHEDULE_MATCHED, summarise
from . import dml_powersgd, dml_runs
from .arms import LINKS
from .parallel import Runner
from .plan import Plan
from .plots import bar_plot, line_plot
from .section import Section
from .verdict import Check, deficit_pts, mean_se, plus_minus

__all__ = [
    "ADASS_TOLERANCE_PTS",
    "CLAIM",
    "count",
    "real_checks",
    "run",
    "sampler_checks",
    "simulated_checks",
]

CLAIM = ("ADASS-DML speeds training up without losing accuracy under a Parameter Server and a Ring "
         "All-Reduce (the ring faster, communication still the bottleneck)")  # fmt: skip
#: ADASS's accuracy may fall this many points below full data's (seed means)
ADASS_TOLERANCE_PTS = 0.5


def _sampler_table(runs: pd.DataFrame) -> pd.DataFrame:
    tables = []
    for name, group in runs.groupby("dataset", sort=False):
        table = summarise(group)
        table.insert(0, "dataset", name)
        table.insert(table.columns.get_loc("test_acc_std") + 1, "test_acc_se",
                     table["test_acc_std"] / table["seeds"].map(math.sqrt))  # fmt: skip
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def sampler_checks(runs: pd.DataFrame, table: pd.DataFrame, adass: str = "adass") -> list[Check]:
    """Per dataset: ADASS within ``ADASS_TOLERANCE_PTS`` of full, with fewer backprops."""
    out = []
    for name, group in runs.groupby("dataset", sort=False):
        acc = group.pivot_table(index="seed", columns="sampler", values="test_acc")
        deficit, se = deficit_pts(acc["full"], acc[adass])
        frac = float(table[(table["dataset"] == name) & (table["sampler"] == adass)]["backprop_frac"].iloc[0])
        out += [Check(name, f"ADASS within {ADASS_TOLERANCE_PTS:g} points of full", deficit <= ADASS_TOLERANCE_PTS,
                      f"{plus_minus(deficit, se)} points below full"),
                Check(name, "ADASS with fewer backprops than full", frac < 1.0, f"{frac:.3f} of full's")]  # fmt: skip
    return out


def _real_table(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (p, exchange, sampler, link), group in runs.groupby(
        ["workers", "exchange", "sampler", "link"], sort=False
    ):
        acc, se = mean_se(group["test_acc"])
        rows.append({"workers": p, "exchange": exchange, "sampler": sampler, "link": link, "seeds": len(group),
                     "test_acc": acc, "acc_se_pts": 100 * se, "backprops": float(group["backprops"].mean()),
                     "epoch_s": float(group["epoch_s"].mean()), "step_ms": float(group["step_ms"].mean()),
                     "comm_share": float(group["comm_share"].mean())})  # fmt: skip
    return pd.DataFrame(rows)


def real_checks(runs: pd.DataFrame, table: pd.DataFrame, adass: str) -> list[Check]:
    """Per P and exchange (first link): ADASS within tolerance of full with fewer backprops; per P and
    link: ADASS's ring epoch faster than its PS epoch (seed means)."""
    out = []
    first_link = runs["link"].iloc[0]
    for (p, exchange), group in runs[runs["link"] == first_link].groupby(["workers", "exchange"], sort=False):
        acc = group.pivot_table(index="seed", columns="sampler", values="test_acc")
        deficit, se = deficit_pts(acc["full"], acc[adass])
        bp = group.groupby("sampler")["backprops"].mean()
        out += [Check(f"P={p}, {exchange}", f"ADASS within {ADASS_TOLERANCE_PTS:g} points of full",
                      deficit <= ADASS_TOLERANCE_PTS, f"{plus_minus(deficit, se)} points below full"),
                Check(f"P={p}, {exchange}", "ADASS with fewer backprops than full", bp[adass] < bp["full"],
                      f"{bp[adass] / bp['full']:.3f} of full's")]  # fmt: skip
    ours = table[table["sampler"] == adass].set_index(["workers", "link", "exchange"])
    for p, link in dict.fromkeys(zip(table["workers"], table["link"], strict=True)):
        ring, ps = ours.loc[(p, link, "ring")], ours.loc[(p, link, "PS")]
        out.append(Check(f"P={p}, link {link}", "ADASS epoch faster on the ring than on PS",
                         ring["epoch_s"] < ps["epoch_s"],
                         f"{ring['epoch_s']:.3f} s vs {ps['epoch_s']:.3f} s (comm share {ring['comm_share']:.0%} "
                         f"vs {ps['comm_share']:.0%})"))  # fmt: skip
    return out


def simulated_checks(sim: pd.DataFrame) -> list[Check]:
    """Per P and link: the ring's modelled transfer time per step shorter than PS's.

    Both run the same model on the same shards, so their compute is the same; the transfers are what
    the exchange decides (the replicas' measured compute on shared cores is reported, not compared).
    """
    out = []
    by = sim.set_index(["workers", "exchange"])
    for p in dict.fromkeys(sim["workers"]):
        for name in LINKS:
            ring, ps = by.loc[(p, "ring"), f"comm_ms_{name}"], by.loc[(p, "PS"), f"comm_ms_{name}"]
            out.append(Check(f"P={p} simulated, {name}", "ring transfers per step shorter than PS's (modelled)",
                             ring < ps, f"{ring:.2f} ms vs {ps:.2f} ms"))  # fmt: skip
    return out


def _comm_share_text(sim: pd.DataFrame, real: pd.DataFrame) -> str:
    ring = sim[sim["exchange"] == "ring"].set_index("workers")
    parts = []
    for name in LINKS:
        share = ring[f"comm_share_{name}"]
        low, high = share.idxmin(), share.idxmax()
        parts.append(f"ring communication share, modelled {name}: {share[low]:.0%} (P={low}) to "
                     f"{share[high]:.0%} (P={high})")  # fmt: skip
    measured = real[real["exchange"] == "ring"]["comm_share"]
    parts.append(f"measured on processes: {measured.min():.0%}-{measured.max():.0%}")
    return "; ".join(parts)


def count(plan: Plan) -> dict[str, int]:
    """Runs of each part of claim 1, in the order they run."""
    counts = dml_runs.count(plan)
    return {"samplers": counts["samplers"], "processes": counts["processes"],
            "powersgd": dml_powersgd.count(plan), "simulated": counts["simulated"]}  # fmt: skip


def run(plan: Plan, out: Path, runner: Runner) -> Section:
    """The four parts of claim 1; plots go to ``out/plots``."""
    sampler_runs = dml_runs.samplers(plan, runner)
    sampler_table = _sampler_table(sampler_runs)
    with dml_runs.Cluster(plan) as cluster:
        real_runs = dml_runs.processes(plan, runner, cluster, with_steps=dml_powersgd.references(plan))
        psgd_runs = dml_powersgd.run(plan, runner, cluster)
    real_table = _real_table(real_runs)
    psgd_table = dml_powersgd.table(psgd_runs)
    sim = dml_runs.simulated(plan, runner)
    s = plan.setting
    links = ", ".join(
        f"{k} (`{REAL_LINKS[k]}`)" if REAL_LINKS[k] else f"{k} (loopback as it is)" for k in plan.dml_links
    )
    section = Section("dml", CLAIM, tables={"samplers": sampler_table, "samplers_runs": sampler_runs,
                                            "processes": real_table, "processes_runs": real_runs, "simulated": sim,
                                            "powersgd": psgd_table, "powersgd_runs": psgd_runs})  # fmt: skip
    settings = "; ".join(
        f"{n}: `{o['data']}`, `{o['model']}`, {o['epochs']} epochs" for n, o in plan.sampler_settings.items()
    )
    section.lines = [
        f"### (a) samplers, one process, {plan.seeds} seed(s)", "",
        f"{settings}. `{SCHEDULE_MATCHED}` replays each ADASS run's kept share epoch by epoch; "
        "`full (budget-matched)` trains full data for the epochs ADASS's backprops pay for. Costs are "
        "ratios to `full` of the same seed; `test_acc_se` is the standard error over seeds.", "",
        markdown_table(sampler_table), "",
        f"### (b) real processes: P in {list(plan.workers)}, one Dask LocalCluster (one thread per worker)", "",
        f"`{s['data']}`, `{s['model']}`, {s['epochs']} epochs, global batch {s['batch_size']}, lr {s['lr']}, "
        f"`full` and `{plan.adass}`, fp32; links {links}. "
        "Step time and communication share as `adass bench dml` measures them (slowest rank's compute + "
        "exchange, median over steps; `comm_share`: waiting on transfers over that time).", "",
        markdown_table(real_table), "",
        f"### (c) simulated: P in {list(plan.sim_workers)} virtual replicas, {plan.sim_epochs} epoch(s) of `full`", "",
        "Modelled step time (`step_ms_*`): the slowest replica's compute + codec work plus the link "
        f"model's transfer time of that step's traffic (`comm_ms_*`) ({', '.join(f'{k}: `{v}`' for k, v in LINKS.items())}), median over "
        "the last epoch's steps. The replicas share this machine's cores, so their compute is slower than "
        "on separate machines and the communication share is a lower bound. PS runs one server thread, "
        "which is why P stops at 63 (64 threads in all). Ring and PS are compared on `comm_ms_*`: "
        "both compute the same model on the same shards, so the transfers are what differs.", "",
        markdown_table(sim.drop(columns=["wall_s"])), "",
        *dml_powersgd.lines(plan, psgd_table, dml_powersgd.checks(psgd_runs, plan, ADASS_TOLERANCE_PTS)),
    ]  # fmt: skip
    plots = out / "plots"
    bar_plot(plots / "dml_samplers.png", [f"{d}: {s_}" for d, s_ in zip(sampler_table["dataset"], sampler_table["sampler"], strict=True)],
             list(100 * sampler_table["test_acc"]), list(100 * sampler_table["test_acc_se"]),
             "test accuracy, % (seed mean ± se)", "Samplers against full data")  # fmt: skip
    line_plot(plots / "dml_comm_time.png", sim, "workers", "comm_ms_1gbit", "exchange", "virtual replicas P",
              f"modelled transfer time per step, ms ({LINKS['1gbit']})", "Ring against PS, modelled", logx=True)  # fmt: skip
    shares = sim.melt(id_vars=["workers", "exchange"], value_vars=[f"comm_share_{n}" for n in LINKS],
                      var_name="link", value_name="comm_share")  # fmt: skip
    shares["series"] = shares["exchange"] + ", " + shares["link"].str.removeprefix("comm_share_")
    line_plot(plots / "dml_comm_share.png", shares, "workers", "comm_share", "series", "virtual replicas P",
              "communication share of the modelled step", "Communication share, modelled", logx=True)  # fmt: skip
    section.plots = ["dml_samplers.png", "dml_comm_time.png", "dml_comm_share.png"]
    adass = next(spec for spec in plan.samplers if spec.split(":")[0] == "adass")
    section.checks = (sampler_checks(sampler_runs, sampler_table, adass) + real_checks(real_runs, real_table, plan.adass)
                      + simulated_checks(sim))  # fmt: skip
    section.extra = _comm_share_text(sim, real_runs)
    return section
