"""``adass bench dml --netlab RATES``: DDP and its compression hooks against the project's exchanges,
P = 4 (``--lab-workers``), across the hosts of a network lab whose links the kernel shapes to each
rate in turn.

The suite builds a lab of P + 1 hosts (the PS server takes the last), starts a Dask scheduler on
host 0 and one worker per host, and for each rate reshapes every link and runs the arms of ``ARMS``
for each model from a client inside host 0 (the lab's addresses exist only inside its namespaces).
The project's arms run on the lab's Dask workers; DDP's ranks run as processes of their own on hosts
0..P-1, started the way ``torchrun`` starts them (:mod:`adass.experiments.bench.ddp_lab`).
The lab is taken down at the end, also on failure or interrupt.

Columns, per rate, model and arm:

- ``step_ms``: median over steps of the slowest rank's step time. Project arms: forward + backward +
  codec math + waiting on transfers (``compute_s + encode_s + comm_s + decode_s``); DDP: forward +
  backward, inside which it all-reduces. The optimizer step is left out of both.
- ``step_vs_ddp``: ``step_ms`` over DDP fp32's at the same rate and model.
- ``kernel_MB_step``: bytes the kernel counted leaving every lab host's ``eth0`` while the arm ran
  (Ethernet, IP and TCP headers included, and Dask's own traffic of that run: task messages,
  heartbeats, records), over its steps. DDP's bytes are counted nowhere else.
- ``wire_MB_step``: the project's own account of the gradient bytes every rank sent, per step.
- ``compute_ms``: the project arms' median forward + backward time of the slowest rank (one core per
  worker): the CPU part of a step.
- ``link_ms``: the busiest host's kernel bytes per step at the link's rate: the least time a step
  can spend on the wire.
- ``test_acc``: after the same epochs, from the same seed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ...config import RunConfig
from ...data import load_dataset
from ...metrics import MemorySink, StepRecord
from ...models import build_model
from ...netlab import (
    LabError,
    LabState,
    lab_down,
    lab_up,
    parse_rate,
    read_counters,
    require_tools,
    reshape,
    since,
    start_cluster,
)  # fmt: skip
from ...registry import SpecError
from ...runtime.cluster import ClusterHandle, connect, train_distributed
from ...tables import markdown_table
from . import write_report
from .ddp_lab import train_ddp_in_lab

__all__ = ["ARMS", "DDP_FP32", "LAB_COLUMNS", "LAB_FULL", "LAB_QUICK", "PSGD_RANKS", "Arm", "LabPlan",
           "lab_targets", "measure", "parse_rates", "run"]  # fmt: skip

RING, PS = "ring", "ps:servers=1"
# qsgd on the ring: requantize (the ring's default for qsgd) sends every hop at the codec's 8 bits;
# shared_scale sums integer codes exactly, so its partial sums widen along the reduce-scatter and
# carry about a fifth more bytes (1.82 against 1.51 MB a step per rank for the 1M-parameter MLP at
# P = 4), which a link-bound step pays in full
QSGD_RING, QSGD_SHARED = "ring:strategy=requantize", "ring:strategy=shared_scale"
# RS-ADASS: unscaled random-k under delay-aware momentum correction (docs/concepts/rs-adass.md) at three kept
# shares, then the shared-state choice (``sharedk``: the coordinates the ranks' common history ranks
# highest, plus a seeded random rest) under plain and delay-aware momentum correction; no ratio warm-up,
# since the suite trains one epoch and a one-epoch warm-up would spend all of it at R**0.5. Where the
# share is large enough for the values to dominate a step's bytes they travel as fp16 (``+fp16``), half
# the bytes: in process, P = 4, one epoch, random-k at 0.15 and 0.2 kept float32's accuracy on every
# seed of three (1M-parameter MLP) and at 0.3 within 0.001 (demo MLP); mc sharedk 0.1 gave 0.918
# against float32's 0.908 (seed 0). Random-k at 0.01 and 0.03 stays float32: its values are a small part
# of a step, and on a fast link the stack's per-hop conversions cost more CPU than the bytes they save.
# Random-k at 0.03 and 0.3 also runs in runs of 64 neighbours (``block=64``), beside the single draws:
# far fewer random draws and copies of runs, the CPU a 1M-parameter step spends choosing coordinates
# (on the lab, seed 0, the demo MLP lost more accuracy to runs: 0.745 against 0.825 at 0.03).
#: RS-ADASS, random-k from sparsest to densest, then sharedk. After the bench's one epoch in process
#: (seed 0), on the 1M-parameter MLP: random-k 0.01 0.821, 0.03 0.860 (0.865 over 6 seeds; block=64
#: 0.849, 0.857 over 6), 0.3 0.917 (0.900 over 6 seeds; block=64 0.914, 0.900 over 6); mc sharedk 0.1
#: 0.918 (0.906 over 3 seeds, float32), dmc sharedk 0.2 0.900; on the demo MLP dmc sharedk 0.2 0.912
#: (0.901 over 5 seeds). PowerSGD on the lab: rank 1 0.826 and 0.716, rank 4 0.902 and 0.900
#: (1M-parameter and demo MLP)
RS_CODECS = ("dmc(randk:ratio=0.01,scale=false)", "dmc(randk:ratio=0.03,scale=false)",
             "dmc(randk:ratio=0.03,scale=false,block=64)", "dmc(randk:ratio=0.3,scale=false+fp16)",
             "dmc(randk:ratio=0.3,scale=false,block=64+fp16)", "mc(sharedk:ratio=0.1+fp16)",
             "dmc(sharedk:ratio=0.2+fp16)")  # fmt: skip
#: PowerSGD as the project's codec, beside DDP's hook at the same ranks: error feedback through the
#: memory, and the hook's two uncompressed steps first (``ddp.py`` starts it at step 2)
PSGD_RANKS = (1, 2, 4)
PSGD_CODEC = "ef(powersgd:rank={rank},warmup=2)"
DDP_FP32 = "DDP fp32"
LAB_COLUMNS = ["rate", "model", "params", "arm", "step_ms", "step_vs_ddp", "step_vs_hook", "kernel_MB_step",
               "wire_MB_step", "compute_ms", "link_ms", "test_acc"]  # fmt: skip


@dataclass(frozen=True)
class Arm:
    """One row of the table: DDP with a communication hook, or a project exchange with a codec.

    Attributes
    ----------
    name : str
        The row's label.
    exchange : str
        Exchange spec; empty for DDP.
    codec : str
        Codec spec, or DDP's hook (``fp32``, ``fp16``, ``powersgd:rank=R``).
    """

    name: str
    exchange: str
    codec: str


DDP_ARM, RING_FP32 = Arm(DDP_FP32, "", "fp32"), Arm("ring fp32", RING, "fp32")
#: (DDP's ``powerSGD_hook``, the ring's codec) at each of ``PSGD_RANKS``: a ring arm's step is read
#: against its hook's
PSGD_PAIRS = [(Arm(f"DDP PowerSGD rank {rank}", "", f"powersgd:rank={rank}"),
               Arm(f"ring PowerSGD rank {rank}", RING, PSGD_CODEC.format(rank=rank))) for rank in PSGD_RANKS]  # fmt: skip
#: a ring PowerSGD arm's name -> its hook's
HOOK_OF = {ring.name: hook.name for hook, ring in PSGD_PAIRS}
ARMS = [
    DDP_ARM,
    Arm("DDP fp16 hook", "", "fp16"),
    *[hook for hook, _ in PSGD_PAIRS],
    RING_FP32,
    *[ring for _, ring in PSGD_PAIRS],
    Arm("ring qsgd:bits=8", QSGD_RING, "qsgd:bits=8"),
    Arm("ring qsgd:bits=8 shared_scale", QSGD_SHARED, "qsgd:bits=8"),
    *[Arm(f"RS-ADASS ring {codec}", RING, codec) for codec in RS_CODECS],
    Arm("PS fp32", PS, "fp32"),
    Arm("PS PowerSGD rank 4", PS, PSGD_CODEC.format(rank=4)),
]
#: ``--powersgd-only``: DDP fp32 (every ratio's base) and the PowerSGD arms
POWERSGD_ARMS = [a for a in ARMS if a is DDP_ARM or "PowerSGD" in a.name]


@dataclass(frozen=True)
class LabPlan:
    """Sizes of one lab benchmark.

    Attributes
    ----------
    setting : dict
        Run options shared by every arm (data, batch, lr, epochs, seed).
    models : tuple of str
        Model specs, each run through every arm.
    workers : int
        Replicas P (the lab has P + 1 hosts: the PS server on the last).
    warm_up : bool
        One untimed PS epoch per model first, so no arm pays the workers' first-use costs.
    timeout_s : float
        How long a rank waits for the others (and the client for a run's ranks).
    pairs : int
        Rounds of each pair (DDP fp32 and ring fp32; DDP's PowerSGD hook and the ring's codec at each
        rank) run back to back, the first inside the arms' own pass: their step times are the
        medians over rounds and the ring's ratio the median of the per-round ratios, since one run
        of each is at the mercy of whatever else the cores do.
    powersgd_only : bool
        Run :data:`POWERSGD_ARMS` alone (DDP fp32 unpaired).
    """

    setting: dict
    models: tuple[str, ...]
    workers: int
    warm_up: bool
    timeout_s: float
    pairs: int = 1
    powersgd_only: bool = False

    @property
    def arms(self) -> list[Arm]:
        return POWERSGD_ARMS if self.powersgd_only else ARMS

    @property
    def paired(self) -> list[tuple[str, str]]:
        """(DDP arm, ring arm) names run in rounds: each rank's hook and codec, and fp32 unless
        ``powersgd_only``."""
        pairs = PSGD_PAIRS if self.powersgd_only else [(DDP_ARM, RING_FP32), *PSGD_PAIRS]
        return [(ddp.name, ring.name) for ddp, ring in pairs]


LAB_FULL = LabPlan({"data": "mnist5k", "batch_size": 64, "lr": 0.05, "epochs": 1, "seed": 0},
                   ("mlp:hidden=128", "mlp:hidden=1280"), 4, True, 600.0, pairs=5)  # fmt: skip
LAB_QUICK = LabPlan({"data": "synthetic:n=480,d=8,classes=3,test=120", "batch_size": 32, "lr": 0.1,
                     "epochs": 1, "seed": 0}, ("mlp:hidden=16",), 2, False, 120.0)  # fmt: skip


def parse_rates(text: str) -> list[str]:
    """``1gbit,100mbit`` -> ``["1gbit", "100mbit"]``, each checked as a lab rate.

    Raises
    ------
    SpecError
        An empty list or a rate that is not a bandwidth.
    """
    rates = [r.strip() for r in text.split(",") if r.strip()]
    if not rates:
        raise SpecError(f"--netlab: {text!r} is not allowed; expected rates such as 1gbit,100mbit")
    for rate in rates:
        try:
            parse_rate(rate)
        except LabError:
            raise SpecError(
                f"--netlab: {rate!r} is not allowed; expected a bandwidth such as 1gbit or 100mbit"
            ) from None
    return rates


def _step_ms(per_rank_s: pd.Series, steps: pd.Series) -> float:
    """Median over steps of the slowest rank's time, in ms."""
    return 1e3 * float(per_rank_s.groupby(steps).max().median())


def _run_arm(base: RunConfig, handle: ClusterHandle, state: LabState, workers: int, arm: Arm) -> dict:
    """Train one arm; its timings, steps, wire bytes and accuracy."""
    if not arm.exchange:
        try:
            result = train_ddp_in_lab(base.replace(workers=workers), state, hook=arm.codec)
        except LabError as err:  # once more, from fresh processes; a second failure ends the suite
            print(f"{arm.name}: {err}; running it again", file=sys.stderr, flush=True)
            result = train_ddp_in_lab(base.replace(workers=workers), state, hook=arm.codec)
        steps = result.steps
        return {"step_ms": _step_ms(steps["step_s"], steps["step"]), "steps": int(steps["step"].nunique()),
                "wire_MB_step": float("nan"), "compute_ms": float("nan"), "test_acc": result.test_acc}  # fmt: skip
    config = base.replace(workers=workers, exchange=arm.exchange, codec=arm.codec)
    result = train_distributed(config, handle=handle, sink=MemorySink(), run_id=f"lab-{arm.name}")
    steps = result.sink.frame(StepRecord)
    step_s = steps["compute_s"] + steps["encode_s"] + steps["comm_s"] + steps["decode_s"]
    n_steps = int(steps["step"].nunique())
    return {"step_ms": _step_ms(step_s, steps["step"]), "steps": n_steps,
            "wire_MB_step": result.totals["wire_bytes"] / n_steps / 1e6,
            "compute_ms": _step_ms(steps["compute_s"], steps["step"]), "test_acc": result.final.test_acc}  # fmt: skip


def _params(model: str, data: str, seed: int) -> int:
    dataset = load_dataset(data, seed=seed)
    return sum(p.numel() for p in build_model(model, dataset.shape, dataset.classes, seed=seed).parameters())


def measure(scheduler: str, state: LabState, rate: str, plan: LabPlan) -> pd.DataFrame:
    """Every model x arm on the lab's cluster at its current rate; runs inside a lab host.

    Parameters
    ----------
    scheduler : str
        The lab's scheduler address.
    state : LabState
        The lab (for its hosts' counters).
    rate : str
        The rate its links are shaped to now.
    plan : LabPlan
        Models, setting, P.

    Returns
    -------
    DataFrame
        ``LAB_COLUMNS`` less ``step_vs_ddp``, one row per model and arm.
    """
    rate_bps, rows, timeout_s = parse_rate(rate), [], plan.timeout_s
    with connect(scheduler, n_workers=plan.workers + 1, timeout_s=timeout_s) as handle:
        for model in plan.models:
            base = RunConfig.from_flat(**plan.setting, model=model, sampler="full", timeout_s=timeout_s)
            if plan.warm_up:
                train_distributed(base.replace(workers=plan.workers, exchange=PS), handle=handle,
                                  sink=MemorySink(), run_id="lab-warm-up")  # fmt: skip
            params = _params(model, plan.setting["data"], plan.setting["seed"])
            for arm in plan.arms:
                before = read_counters(state)
                got = _run_arm(base, handle, state, plan.workers, arm)
                sent = [d.tx_bytes for d in since(before, read_counters(state)).values()]
                steps = got.pop("steps")
                rows.append({"rate": rate, "model": model, "params": params, "arm": arm.name, **got,
                             "kernel_MB_step": sum(sent) / steps / 1e6,
                             "link_ms": 1e3 * max(sent) / steps * 8 / rate_bps, "pair_ratio": float("nan")})  # fmt: skip
                print(f"{rate} {model} {arm.name}: {got['step_ms']:.1f} ms a step", flush=True)
            _paired(rows, base, handle, state, plan)
    return pd.DataFrame(rows)


def _paired(rows: list[dict], base: RunConfig, handle: ClusterHandle, state: LabState, plan: LabPlan) -> None:
    """``plan.pairs - 1`` more rounds of each of ``plan.paired`` (its DDP arm, then its ring arm); their
    rows (the last of each arm in ``rows``) get the median step time over all rounds, and the ring's
    row the median of the per-round ratios (``pair_ratio``)."""
    by_name = {arm.name: arm for arm in ARMS}
    for ddp, ring in ((by_name[d], by_name[r]) for d, r in plan.paired):
        ddp_row = next(r for r in reversed(rows) if r["arm"] == ddp.name)
        ring_row = next(r for r in reversed(rows) if r["arm"] == ring.name)
        ddp_ms, ring_ms = [ddp_row["step_ms"]], [ring_row["step_ms"]]
        for _ in range(plan.pairs - 1):
            ddp_ms.append(_run_arm(base, handle, state, plan.workers, ddp)["step_ms"])
            ring_ms.append(_run_arm(base, handle, state, plan.workers, ring)["step_ms"])
        ratios = [r / d for r, d in zip(ring_ms, ddp_ms, strict=True)]
        ddp_row["step_ms"], ring_row["step_ms"] = statistics.median(ddp_ms), statistics.median(ring_ms)
        ring_row["pair_ratio"] = statistics.median(ratios)
        print(f"{ring.name} / {ddp.name} over {plan.pairs} rounds: " + ", ".join(f"{r:.2f}" for r in ratios),
              flush=True)  # fmt: skip


def _with_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """``step_vs_ddp``: each arm's step time over DDP fp32's (for ring fp32, the median of its
    per-round ratios where rounds were paired); ``step_vs_hook``: a ring PowerSGD arm's over DDP's
    hook at its rank (the median of the per-round ratios where paired)."""
    step_ms = table.set_index(["rate", "model", "arm"])["step_ms"]

    def over(arms: pd.Series) -> np.ndarray:
        """Each row's step time over that of the arm ``arms`` names in its rate and model."""
        key = pd.MultiIndex.from_arrays([table["rate"], table["model"], arms])
        return table["step_ms"].to_numpy() / step_ms.reindex(key).to_numpy()

    paired = table["pair_ratio"] if "pair_ratio" in table else pd.Series(np.nan, index=table.index)
    vs_ddp = over(pd.Series(DDP_FP32, index=table.index))
    vs_ddp = np.where((table["arm"] == RING_FP32.name) & paired.notna(), paired, vs_ddp)
    hook = table["arm"].map(HOOK_OF)
    vs_hook = np.where(hook.isna(), np.nan, np.where(paired.notna(), paired, over(hook)))
    return table.assign(step_vs_ddp=vs_ddp, step_vs_hook=vs_hook)[LAB_COLUMNS]


def _rs_against(row: pd.DataFrame, rs_arms: list[str], psgd: str, where: str) -> tuple[str, bool, str]:
    """Whether one of the RS-ADASS arms is faster than ``psgd`` at equal or better accuracy; the fastest
    such arm, or else the most accurate one, is what the check reports."""
    psgd_ms, psgd_acc = row.loc[psgd, "step_ms"], row.loc[psgd, "test_acc"]
    good = [a for a in rs_arms if row.loc[a, "step_ms"] < psgd_ms and row.loc[a, "test_acc"] >= psgd_acc]
    if good:
        shown = min(good, key=lambda a: row.loc[a, "step_ms"])
    else:
        shown = max(rs_arms, key=lambda a: row.loc[a, "test_acc"])
    codec = shown.removeprefix("RS-ADASS ring ")
    return (f"RS-ADASS faster than {psgd} at equal or better accuracy, {where}", bool(good),
            f"{codec}: {row.loc[shown, 'step_ms']:.1f} vs {psgd_ms:.1f} ms, accuracy "
            f"{row.loc[shown, 'test_acc']:.4f} vs {psgd_acc:.4f}")  # fmt: skip


def lab_targets(table: pd.DataFrame) -> pd.DataFrame:
    """The suite's goals, read off its table (measured, never asserted).

    Ring fp32 at most 1.1x DDP fp32 per step (every rate and model); at the slowest rate with the
    largest model, ring qsgd:bits=8 at least 2.5x faster per step than DDP fp32 and faster than DDP's
    fp16 hook (the requantize ring; the shared_scale row is reported beside it); against each PowerSGD
    arm, an RS-ADASS arm faster per step at equal or better test accuracy; the ring's PowerSGD at most
    1.1x DDP's PowerSGD hook per step at each rank (every rate and model).

    Returns
    -------
    DataFrame
        ``goal``, ``met`` (yes/no) and ``measured``.
    """
    rs_arms = [a.name for a in ARMS if a.codec in RS_CODECS]
    full = RING_FP32.name in set(table["arm"])  # --powersgd-only runs the PowerSGD goals alone
    checks = []
    for (rate, model), group in table.groupby(["rate", "model"], sort=False):
        row = group.set_index("arm")
        if full:
            ring = row.loc["ring fp32", "step_vs_ddp"]
            checks.append(
                (f"ring fp32 step <= 1.1x DDP fp32's, {rate}, {model}", ring <= 1.1, f"{ring:.2f}x")
            )
            for psgd in [a.name for a in ARMS if a.codec.startswith("powersgd")]:
                checks.append(_rs_against(row, rs_arms, psgd, f"{rate}, {model}"))
        for rank, (hook_arm, ring_arm) in zip(PSGD_RANKS, PSGD_PAIRS, strict=True):
            ours, ratio = row.loc[ring_arm.name, "step_ms"], row.loc[ring_arm.name, "step_vs_hook"]
            hook = row.loc[hook_arm.name, "step_ms"]
            checks.append((f"ring PowerSGD rank {rank} step <= 1.1x DDP's hook at rank {rank}, {rate}, {model}",
                           ratio <= 1.1, f"{ratio:.2f}x (median {ours:.1f} vs {hook:.1f} ms)"))  # fmt: skip
    if not full:
        return pd.DataFrame([{"goal": g, "met": "yes" if ok else "no", "measured": m} for g, ok, m in checks])
    slow = min(table["rate"].unique(), key=parse_rate)
    big = table.loc[table["params"].idxmax(), "model"]
    row = table[(table["rate"] == slow) & (table["model"] == big)].set_index("arm")
    qsgd, ddp, fp16 = (row.loc[a, "step_ms"] for a in ("ring qsgd:bits=8", DDP_FP32, "DDP fp16 hook"))
    checks.append((f"ring qsgd:bits=8 >= 2.5x faster than DDP fp32, {slow}, {big}", ddp / qsgd >= 2.5,
                   f"{ddp / qsgd:.2f}x ({qsgd:.1f} vs {ddp:.1f} ms)"))  # fmt: skip
    checks.append((f"ring qsgd:bits=8 faster than DDP fp16 hook, {slow}, {big}", qsgd < fp16,
                   f"{qsgd:.1f} vs {fp16:.1f} ms"))  # fmt: skip
    return pd.DataFrame([{"goal": g, "met": "yes" if ok else "no", "measured": m} for g, ok, m in checks])


def _measure_in_lab(
    state: LabState, scheduler: str, rate: str, plan: LabPlan, quick: bool, out: Path
) -> pd.DataFrame:
    """Run ``measure`` in a client process inside host 0 (``python -m adass.experiments.bench.netlab_dml``)."""
    argv = ["ip", "netns", "exec", state.hosts[0].netns, sys.executable, "-m", "adass.experiments.bench.netlab_dml",
            "--scheduler", scheduler, "--state", state.path, "--rate", rate, "--out", str(out),
            "--workers", str(plan.workers)]  # fmt: skip
    argv += ["--quick"] if quick else []
    argv += ["--powersgd-only"] if plan.powersgd_only else []
    done = subprocess.run(argv)
    if done.returncode != 0:
        raise LabError(f"the lab client at {rate} failed with exit status {done.returncode}")
    return pd.read_csv(out)


def _header(plan: LabPlan, rates: list[str], elapsed_s: float, load: tuple[float, float, float]) -> list[str]:
    s = plan.setting
    return [
        "# adass bench dml --netlab", "",
        f"Network lab: {plan.workers + 1} hosts (network namespaces on a bridge), every link shaped by "
        f"`tc tbf` to {', '.join(rates)} each way in turn; Dask scheduler on host 0, one single-thread "
        f"worker per host (the PS server on host {plan.workers}), client on host 0. P = {plan.workers}; "
        f"`{s['data']}`, global batch {s['batch_size']}, lr {s['lr']}, {s['epochs']} epoch(s), sampler "
        f"`full`, seed {s['seed']}. Host with {os.cpu_count()} CPUs, load average {load[0]:.1f} at the "
        f"start; {elapsed_s:.0f} s in all.", "",
        "step_ms: median over steps of the slowest rank (project: compute + codec + waiting on "
        "transfers; DDP: forward + backward with its all-reduce inside; optimizer step left out of both). "
        "kernel_MB_step: bytes the kernel counted leaving all hosts' eth0 during the arm (headers and "
        "Dask's own messages included) per step; wire_MB_step: the project's own count of gradient bytes "
        "sent; compute_ms: forward + backward of the slowest rank; link_ms: the busiest host's kernel "
        "bytes per step at the link rate.", "",
        f"Each pair ({'; '.join(' and '.join(p) for p in plan.paired)}) ran {plan.pairs} round(s) back to back "
        "per rate and model: their step_ms is the median over rounds, and the ring arm's step_vs_ddp (fp32) or "
        "step_vs_hook (PowerSGD) the median of the per-round ratios.", "",
    ]  # fmt: skip


def _lab_frames(plan: LabPlan, rates: list[str], quick: bool) -> list[pd.DataFrame]:
    """Build the lab, measure at each rate, and take the lab down whatever happens."""
    frames = []
    with tempfile.TemporaryDirectory(prefix="adass-bench-lab-") as tmp:
        state = lab_up(plan.workers + 1, rates[0], f"bench{secrets.token_hex(3)}", Path(tmp))
        try:
            scheduler = start_cluster(state, plan.workers + 1, timeout_s=180)
            for rate in rates:
                reshape(state, parse_rate(rate))
                frames.append(_measure_in_lab(state, scheduler, rate, plan, quick, Path(tmp) / f"{rate}.csv"))
        finally:
            lab_down(state)
    return frames


def _plan(quick: bool, workers: int | None, powersgd_only: bool = False) -> LabPlan:
    """The full or quick plan, with ``workers`` replicas where given, the PowerSGD arms alone where asked."""
    plan = replace(LAB_QUICK if quick else LAB_FULL, powersgd_only=powersgd_only)
    return plan if workers is None else replace(plan, workers=workers)


def run(out_dir: Path, rates: str, quick: bool = False, workers: int | None = None,
        powersgd_only: bool = False) -> pd.DataFrame:  # fmt: skip
    """Build a lab, run every arm at every rate, take the lab down; print and write the tables.

    Parameters
    ----------
    out_dir : Path
        Folder for ``dml.md`` and ``dml.csv`` (created if missing).
    rates : str
        Comma-separated link rates, e.g. ``1gbit,100mbit``.
    quick : bool
        A smoke run: tiny synthetic data, one small model, P = 2.
    workers : int, optional
        Replicas P (None: 4, or 2 with ``quick``); the lab has P + 1 hosts.
    powersgd_only : bool
        DDP fp32 and the PowerSGD arms alone (:data:`POWERSGD_ARMS`), each hook and codec paired.

    Returns
    -------
    DataFrame
        One row per rate, model and arm (``LAB_COLUMNS``).

    Raises
    ------
    SpecError
        A bad rate, or the lab cannot be built (not root, no iproute2), in one line.
    """
    names = parse_rates(rates)
    plan = _plan(quick, workers, powersgd_only)
    start, load = time.perf_counter(), os.getloadavg()
    try:
        require_tools()
        frames = _lab_frames(plan, names, quick)
    except LabError as err:
        raise SpecError(f"--netlab: {err}") from None
    table = _with_ratios(pd.concat(frames, ignore_index=True))
    text = _header(plan, names, time.perf_counter() - start, load)
    for rate in names:
        text += [f"## {rate}", "", markdown_table(table[table["rate"] == rate]), ""]
    text += ["## Targets", "", markdown_table(lab_targets(table)), ""]
    write_report(out_dir, "dml", text, {"dml": table})
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """The client inside host 0: ``python -m adass.experiments.bench.netlab_dml --scheduler ... --out FILE.csv``."""
    parser = argparse.ArgumentParser(prog="python -m adass.experiments.bench.netlab_dml")
    parser.add_argument("--scheduler", required=True)
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--rate", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--powersgd-only", action="store_true")
    args = parser.parse_args(argv)
    plan = _plan(args.quick, args.workers, args.powersgd_only)
    table = measure(args.scheduler, LabState.load(args.state), args.rate, plan)
    table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
