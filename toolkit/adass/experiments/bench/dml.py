"""``adass bench dml``: data-parallel training on one Dask LocalCluster, P in {2, 4}.

Part (a): Parameter Server vs Ring All-Reduce x fp32 / qsgd:bits=8 / randk:ratio=0.01, with and
without a throttled 1 Gbit link, beside PyTorch DDP (gloo, unthrottled) on the same model, shards,
local batch and steps; all with ``sampler=full``, so every arm does the same work and only the
exchange differs. Part (b): ADASS on the ring against single-process ADASS with the same settings,
seed by seed, averaged over several seeds. Part (c): PS shards colocated with the replicas against
dedicated server workers (:mod:`adass.experiments.bench.dml_colocated`, on a cluster of its own). Part (d): a
slowed replica, the ring and the synchronous PS against SSP and async (:mod:`adass.experiments.bench.dml_straggler`).

Step time is the slowest rank's ``compute_s + encode_s + comm_s + decode_s`` (forward, backward,
codec math and waiting on transfers; the optimizer step is left out), median over the run's steps; DDP's is forward + backward, inside which
it all-reduces. Epoch time is the client's wall time per epoch (DDP: the slowest rank's epoch loop).
The communication share is ``comm_s`` (waiting on transfers) over that step time, summed over all
StepRecords. Beside them, how each arm's data reached its replicas: ``load_s``, the slowest replica's
seconds from being told its rows to holding them (reading its shard from ``--data`` or receiving it
from the client, see :mod:`adass.runtime.cluster.feed`), and ``data_MB_replica``, the most any
replica holds (its shard and the test split; DDP's rows leave both empty). Timings are compared as ratios within one invocation: DDP and ring fp32 run in
alternating pairs, and the ring's ratio is the median over pairs.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from ...config import RunConfig
from ...data import load_dataset
from ...metrics import MemorySink, StepRecord
from ...runtime import train
from ...runtime.cluster import ClusterHandle, connect, train_distributed
from ...runtime.cluster.gpus import device_on_workers
from ...tables import markdown_table
from . import dml_colocated, dml_straggler, write_report
from .ddp import train_ddp
from .dml_plans import FULL, QUICK, Plan

__all__ = [
    "ADASS_COLUMNS", "CODECS", "COLUMNS", "DDP", "EXCHANGES", "FULL", "LINKS", "PS", "QSGD_RING", "QUICK",
    "RING", "RUN_COLUMNS", "SINGLE", "Plan", "exchange_spec", "measure_arm", "run", "targets",
]  # fmt: skip

RING, PS = "ring", "ps:servers=1"
EXCHANGES = [RING, PS]  # the ring first: it runs right after DDP
CODECS = ["fp32", "qsgd:bits=8", "randk:ratio=0.01"]
# shared_scale: one quantization per rank, integer codes add exactly along the ring (no error
# compounding hop by hop, as requantize has); the price is a small max-exchange of bucket scales
QSGD_RING = "ring:strategy=shared_scale"
LINKS = {"none": "", "1gbit": "1gbit,50us"}
DDP = "torch ddp (gloo)"
SINGLE = "single process"
COLUMNS = ["workers", "exchange", "codec", "link", "epoch_s", "epoch_vs_ps", "step_ms", "step_vs_ddp",
           "comm_share", "wire_MB_epoch", "test_acc", "load_s", "data_MB_replica"]  # fmt: skip
ADASS_COLUMNS = ["sampler", "run", "workers", "seeds", "test_acc", "acc_sd_pts", "acc_vs_single_pts",
                 "diff_se_pts", "backprop_frac", "epoch_s"]  # fmt: skip
RUN_COLUMNS = ["sampler", "run", "workers", "seed", "test_acc", "backprops", "epoch_s"]


def exchange_spec(exchange: str, codec: str) -> str:
    """The exchange spec an arm runs: the ring sums qsgd codes under a shared scale.

    Parameters
    ----------
    exchange, codec : str
        One of ``EXCHANGES`` and one of ``CODECS``.

    Returns
    -------
    str
        ``QSGD_RING`` for the ring with a qsgd codec, else ``exchange`` unchanged.
    """
    return QSGD_RING if exchange == RING and codec.startswith("qsgd") else exchange


def _step_ms(per_rank_step_s: pd.Series, steps: pd.Series) -> float:
    """Median over steps of the slowest rank's time, in ms."""
    return 1e3 * float(per_rank_step_s.groupby(steps).max().median())


def _row(workers: int, exchange: str, codec: str, link: str, epoch_s: float, step_ms: float,
         comm_share: float, wire_mb: float, test_acc: float, data: list[dict] | None = None) -> dict:  # fmt: skip
    """One table row; ``data`` holds every replica's data report (how long loading took, bytes held)."""
    load_s = max(r["load_s"] for r in data) if data else float("nan")
    data_mb = max(r["data_bytes"] for r in data) / 1e6 if data else float("nan")
    return {"workers": workers, "exchange": exchange, "codec": codec, "link": link, "epoch_s": epoch_s,
            "step_ms": step_ms, "comm_share": comm_share, "wire_MB_epoch": wire_mb, "test_acc": test_acc,
            "load_s": load_s, "data_MB_replica": data_mb}  # fmt: skip


def measure_arm(base: RunConfig, handle: ClusterHandle, workers: int, exchange: str, codec: str,
                link: str) -> dict:  # fmt: skip
    """Train one distributed arm on ``handle``'s cluster; return its table row.

    Parameters
    ----------
    base : RunConfig
        Data, model, sampler, seed and optimiser of the arm.
    handle : ClusterHandle
        The cluster, with at least ``workers`` plus the exchange's servers.
    workers : int
        Replicas P.
    exchange, codec : str
        Specs (see :func:`exchange_spec` for the exchange that runs).
    link : str
        A key of ``LINKS``.

    Returns
    -------
    dict
        The ``COLUMNS`` of the arm (those it has), ``backprops``, the run's total, and ``steps``, its
        synchronous steps.
    """
    spec = exchange_spec(exchange, codec)
    config = base.replace(workers=workers, exchange=spec, codec=codec, link=LINKS[link])
    result = train_distributed(
        config, handle=handle, sink=MemorySink(), run_id=f"dml-{workers}-{spec}-{codec}-{link}"
    )
    steps = result.sink.frame(StepRecord)
    # the exchange's own time is codec math (encode, decode) plus waiting on transfers (comm)
    step_s = steps["compute_s"] + steps["encode_s"] + steps["comm_s"] + steps["decode_s"]
    busy_s = float(step_s.sum())
    epochs = config.optim.epochs
    row = _row(workers, spec, codec, link, result.totals["train_s"] / epochs,
               _step_ms(step_s, steps["step"]),
               float(steps["comm_s"].sum()) / busy_s if busy_s > 0 else float("nan"),
               result.totals["wire_bytes"] / epochs / 1e6, result.final.test_acc, result.data)  # fmt: skip
    return {**row, "backprops": int(result.totals["backprops"]), "steps": int(steps["step"].nunique())}


def _measure_ddp(base: RunConfig, handle: ClusterHandle, workers: int) -> dict:
    """PyTorch DDP on the same model, shards, local batch and steps; its table row."""
    result = train_ddp(base.replace(workers=workers), handle)
    epoch_s = sum(result.epoch_s) / len(result.epoch_s)
    return _row(workers, DDP, "fp32", "none", epoch_s, _step_ms(result.steps["step_s"], result.steps["step"]),
                float("nan"), float("nan"), result.test_acc)  # fmt: skip


def _middle(rows: list[dict]) -> dict:
    """The run with the median step time (the lower middle one for an even count)."""
    return sorted(rows, key=lambda r: r["step_ms"])[(len(rows) - 1) // 2]


def _exchange_grid(
    base: RunConfig, handle: ClusterHandle, workers: tuple[int, ...], pairs: int
) -> pd.DataFrame:
    """Part (a): per P, ``pairs`` alternating rounds of DDP, ring fp32 and PS fp32 unthrottled,
    then every other exchange x codec x link once.

    The ring's ``step_vs_ddp`` is the median over rounds of its step time over the DDP run of the
    same round, and its ``epoch_vs_ps`` the median of its epoch time over the PS run's, so a slow
    spell of the machine lands on both sides of a ratio; the rows of the three show their median
    runs. Every other arm is compared with the median DDP step, and every other ring arm with the
    PS arm of the same codec and link.
    """
    rows = []
    paired = [(RING, "fp32", "none"), (PS, "fp32", "none")]
    for p in workers:
        ddp, ring, ps = [], [], []
        for _ in range(pairs):
            ddp.append(_measure_ddp(base, handle, p))
            ring.append(measure_arm(base, handle, p, *paired[0]))
            ps.append(measure_arm(base, handle, p, *paired[1]))
        step_ratio = statistics.median(r["step_ms"] / d["step_ms"] for d, r in zip(ddp, ring, strict=True))
        epoch_ratio = statistics.median(r["epoch_s"] / q["epoch_s"] for r, q in zip(ring, ps, strict=True))
        rows += [{**_middle(ddp), "step_vs_ddp": 1.0},
                 {**_middle(ring), "step_vs_ddp": step_ratio, "epoch_vs_ps": epoch_ratio}, _middle(ps)]  # fmt: skip
        arms = [
            (e, c, link) for link in LINKS for e in EXCHANGES for c in CODECS if (e, c, link) not in paired
        ]
        rows += [measure_arm(base, handle, p, e, c, link) for e, c, link in arms]
    table = pd.DataFrame(rows)
    ddp_ms = table[table["exchange"] == DDP].set_index("workers")["step_ms"]
    table["step_vs_ddp"] = table["step_vs_ddp"].fillna(table["step_ms"] / table["workers"].map(ddp_ms))
    setting = ["workers", "codec", "link"]
    ps_epoch = table[table["exchange"] == PS].set_index(setting)["epoch_s"]
    plain = table["epoch_s"] / ps_epoch.reindex(pd.MultiIndex.from_frame(table[setting])).to_numpy()
    on_ring = table["exchange"].isin([RING, QSGD_RING])
    table["epoch_vs_ps"] = table["epoch_vs_ps"].fillna(plain.where(on_ring))
    return table[COLUMNS]


def _single(config: RunConfig) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as on a worker
    try:
        result = train(
            config, dataset=load_dataset(config.data.data, seed=config.optim.seed), selection_records=False
        )
    finally:
        torch.set_num_threads(threads)
    return {"test_acc": result.final.test_acc, "backprops": result.counters.backprops,
            "epoch_s": result.counters.train_s / config.optim.epochs}  # fmt: skip


def _adass_runs(base: RunConfig, handle: ClusterHandle, plan: Plan) -> pd.DataFrame:
    """Part (b), one row per run: single-process full and ADASS, then ADASS on the ring (fp32) for
    every P, each with every seed of the plan."""
    base = base.replace(epochs=plan.adass_epochs)
    rows = []
    for seed in plan.adass_seeds:
        for sampler in ("full", plan.adass):
            rows.append({"sampler": sampler, "run": SINGLE, "workers": 0, "seed": seed,
                         **_single(base.replace(sampler=sampler, seed=seed))})  # fmt: skip
        for p in plan.workers:
            config = base.replace(sampler=plan.adass, workers=p, exchange=RING, seed=seed)
            result = train_distributed(
                config, handle=handle, sink=MemorySink(), run_id=f"dml-adass-{p}-{seed}"
            )
            rows.append({"sampler": plan.adass, "run": f"ring fp32, P={p}", "workers": p, "seed": seed,
                         "test_acc": result.final.test_acc, "backprops": result.totals["backprops"],
                         "epoch_s": result.totals["train_s"] / plan.adass_epochs})  # fmt: skip
    return pd.DataFrame(rows)[RUN_COLUMNS]


def _adass_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Part (b) per run kind: mean accuracy over seeds and its spread, and the difference from
    single-process training with the same sampler and seed, averaged over seeds with its
    standard error (the spread of the per-seed differences over the root of the seed count)."""
    single = runs[runs["run"] == SINGLE].set_index(["sampler", "seed"])
    full_backprops = single.xs("full", level="sampler")["backprops"]
    runs = runs.assign(
        diff_pts=100 * (runs["test_acc"] - single["test_acc"].reindex(
            pd.MultiIndex.from_frame(runs[["sampler", "seed"]])).to_numpy()),
        backprop_frac=runs["backprops"] / runs["seed"].map(full_backprops),
    )  # fmt: skip
    rows = []
    for (sampler, run, workers), group in runs.groupby(["sampler", "run", "workers"], sort=False):
        n = len(group)
        spread = 100 * float(group["test_acc"].std()) if n > 1 else float("nan")
        diff_se = float(group["diff_pts"].std()) / n**0.5 if n > 1 else float("nan")
        rows.append({"sampler": sampler, "run": run, "workers": workers, "seeds": n,
                     "test_acc": float(group["test_acc"].mean()), "acc_sd_pts": spread,
                     "acc_vs_single_pts": float(group["diff_pts"].mean()), "diff_se_pts": diff_se,
                     "backprop_frac": float(group["backprop_frac"].mean()),
                     "epoch_s": float(group["epoch_s"].mean())})  # fmt: skip
    return pd.DataFrame(rows)[ADASS_COLUMNS]


def targets(grid: pd.DataFrame, adass: pd.DataFrame) -> pd.DataFrame:
    """The suite's goals, read off its two tables (measured here, never asserted).

    Parameters
    ----------
    grid : DataFrame
        Part (a), ``COLUMNS``: the ring fp32 step time against DDP's at every P, and ring against
        PS epoch time (``epoch_vs_ps``) at the largest P, per link.
    adass : DataFrame
        Part (b), ``ADASS_COLUMNS``: distributed ADASS against single-process ADASS, averaged over
        seeds (each seed compared with the same seed in one process).

    Returns
    -------
    DataFrame
        ``goal``, ``met`` (yes/no) and ``measured``, one row per goal.
    """

    def pick(p: int, exchange: str, codec: str = "fp32", link: str = "none") -> pd.Series:
        hit = grid[(grid["workers"] == p) & (grid["exchange"] == exchange) & (grid["codec"] == codec)
                   & (grid["link"] == link)]  # fmt: skip
        return hit.iloc[0]

    checks = []
    for p in sorted(grid["workers"].unique()):
        ratio = pick(p, RING)["step_vs_ddp"]
        checks.append((f"ring fp32 step time <= 1.15x DDP's, P={p}", ratio <= 1.15, f"{ratio:.2f}x"))
    p_max = int(grid["workers"].max())
    for link in LINKS:
        ring, ps = pick(p_max, RING, link=link), pick(p_max, PS, link=link)
        ratio = ring["epoch_vs_ps"]
        how = "median of paired runs" if link == "none" else "one run each"
        checks.append((f"ring epoch time below PS's, P={p_max}, fp32, link {link}", ratio < 1,
                       f"{ratio:.2f}x, {how} ({ring['epoch_s']:.2f} s vs {ps['epoch_s']:.2f} s)"))  # fmt: skip
    for row in adass[adass["workers"] > 0].itertuples(index=False):
        delta = row.acc_vs_single_pts
        checks.append((f"distributed ADASS within 0.3 points of single-process, P={row.workers}",
                       abs(delta) <= 0.3, f"{delta:+.2f} points, mean of {row.seeds} seeds "
                       f"(standard error {row.diff_se_pts:.2f})"))  # fmt: skip
    return pd.DataFrame([{"goal": g, "met": "yes" if ok else "no", "measured": m} for g, ok, m in checks])


def _warm_up(base: RunConfig, handle: ClusterHandle, workers: int) -> None:
    """One untimed epoch on every worker (PS, so the server worker takes part too)."""
    train_distributed(base.replace(epochs=1, workers=workers, exchange=PS), handle=handle,
                      sink=MemorySink(), run_id="dml-warm-up")  # fmt: skip


def _header(plan: Plan, elapsed_s: float, load: tuple[float, float, float], device: str) -> list[str]:
    s = plan.setting
    return [
        "# adass bench dml", "",
        f"`{s['data']}`, `{s['model']}`, global batch {s['batch_size']} (each replica's samples split evenly over the steps), "
        f"lr {s['lr']}, {s['epochs']} epochs, sampler `full`, seed 0; one LocalCluster (one thread per "
        f"worker); replicas on `{device}`; host with {os.cpu_count()} CPUs, load average "
        f"{load[0]:.1f} at the start; {elapsed_s:.0f} s in all.", "",
        f"qsgd on the ring runs `{QSGD_RING}`. DDP, ring fp32 and PS fp32 (no link) ran {plan.ddp_pairs} "
        "alternating rounds per P: their rows are the median runs, and ring fp32's step_vs_ddp and "
        "epoch_vs_ps are the medians of the per-round ratios (other ring rows: epoch over the PS row of "
        "the same codec and link). Step time: median over steps of the slowest rank's "
        "compute + exchange (optimizer step left out); epoch_s: client wall time per epoch (DDP: the "
        "slowest rank's epoch loop). DDP's wire bytes are not counted (gloo's ring all-reduce moves "
        "2(P-1)/P x 4 bytes per parameter per rank per step) and its compute and communication "
        "overlap, so it has no communication share. Link `1gbit` paces every transfer to "
        f"`{LINKS['1gbit']}`; DDP always runs unthrottled.", "",
    ]  # fmt: skip


def run(
    out_dir: Path,
    quick: bool = False,
    netlab: str = "",
    straggler_only: bool = False,
    lab_workers: int | None = None,
    device: str = "auto",
    powersgd_only: bool = False,
) -> pd.DataFrame:
    """Run the suite, print the tables, write ``dml.md``, ``dml.csv``, ``dml_adass.csv`` (part (b)
    averaged over seeds) and ``dml_adass_runs.csv`` (its runs, one row per seed), with part (c),
    colocated PS shards, in ``dml.md``; then part (d), the straggler case (:mod:`adass.experiments.bench.dml_straggler`, ``dml_straggler.md`` and ``.csv``).

    Parameters
    ----------
    out_dir : Path
        Folder for the tables (created if missing).
    quick : bool
        A smoke run: tiny synthetic data, P = 2, one epoch.
    netlab : str
        Link rates (``1gbit,100mbit``): run the network-lab suite instead
        (:mod:`adass.experiments.bench.netlab_dml`: DDP and its compression hooks against the project's
        exchanges across lab hosts; ``dml.md`` and ``dml.csv`` only).
    lab_workers : int, optional
        Replicas P on the lab (None: the lab suite's own).
    straggler_only : bool
        Run part (d), the straggler case, alone and return its table.
    device : {"auto", "cpu", "cuda"}
        Where every arm's replicas train (``--device``; DDP's ranks too).
    powersgd_only : bool
        With ``netlab``: DDP fp32 and the PowerSGD arms alone, each rank's hook and codec paired.

    Returns
    -------
    DataFrame
        Part (a), one row per P and arm (``COLUMNS``).
    """
    if netlab:
        from .netlab_dml import run as run_lab

        return run_lab(out_dir, netlab, quick=quick, workers=lab_workers, powersgd_only=powersgd_only)
    if straggler_only:
        return dml_straggler.run(out_dir, quick=quick, device=device)
    plan = QUICK if quick else FULL
    start, load = time.perf_counter(), os.getloadavg()
    base = RunConfig.from_flat(**plan.setting, sampler="full", seed=0, device=device)
    servers = max(base.replace(exchange=e).servers for e in EXCHANGES)
    with connect(n_workers=max(plan.workers) + servers, device=device) as handle:
        # every arm on the device the workers resolve (DDP's ranks read it from the configuration)
        base = device_on_workers(base, handle.client, handle.workers())
        if plan.warm_up:
            _warm_up(base, handle, max(plan.workers))
        grid = _exchange_grid(base, handle, plan.workers, plan.ddp_pairs)
        runs = _adass_runs(base, handle, plan)
    adass = _adass_summary(runs)
    colocated_plan = dml_colocated.QUICK_PLAN if quick else dml_colocated.FULL_PLAN
    colocated = dml_colocated.grid(colocated_plan, device=device)
    text = _header(plan, time.perf_counter() - start, load, base.cluster.device)
    text += ["## (a) exchanges x codecs x links, beside DDP", "", markdown_table(grid), "",
             f"## (b) ADASS distributed vs single process: `{plan.adass}`, {plan.adass_epochs} epochs, "
             f"seeds {', '.join(map(str, plan.adass_seeds))}", "",
             "Means over seeds; `acc_sd_pts` is the seed-to-seed spread of accuracy (points), "
             "`acc_vs_single_pts` the mean per-seed difference from single-process training with the "
             "same sampler and seed, `diff_se_pts` its standard error.", "",
             markdown_table(adass), "", "## Targets", "", markdown_table(targets(grid, adass)), ""]  # fmt: skip
    text += dml_colocated.section(colocated_plan, colocated, "## (c) colocated PS vs dedicated servers")
    write_report(out_dir, "dml", text, {"dml": grid, "dml_adass": adass, "dml_adass_runs": runs,
                                        "dml_colocated": colocated})  # fmt: skip
    dml_straggler.run(out_dir, quick=quick, device=device)  # part (d), on a cluster of its own size
    return grid
