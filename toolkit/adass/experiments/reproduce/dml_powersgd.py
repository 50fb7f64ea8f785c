"""Claim 1, part (d): PowerSGD on real processes. The ring's PowerSGD codec at the ranks of ``adass bench
dml --netlab`` beside torch's ``powerSGD_hook`` in DDP on the same model, shards and steps, and ADASS
under PowerSGD beside ADASS in fp32. Its goals get a verdict line of their own: they ask whether the
codec does as well as torch's, not whether ADASS-DML holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ...codecs.powersgd import plan_layers
from ...config import RunConfig
from ...data import load_dataset
from ...models import build_model
from ...tables import markdown_table
from ..bench.ddp import POWERSGD_START_STEP, train_ddp
from ..bench.dml import measure_arm
from ..bench.netlab_dml import PSGD_CODEC, RING
from .arms import DML_SAMPLERS
from .dml_runs import Cluster, base_config, process_row
from .parallel import Runner
from .plan import Plan
from .verdict import Check, checks_table, deficit_pts, mean_se, plus_minus, verdict

__all__ = [
    "LINK",
    "POWERSGD",
    "PsgdArm",
    "arms",
    "checks",
    "count",
    "hook_wire_bytes",
    "lines",
    "references",
    "run",
    "table",
]

#: the store's section of this part's own runs (its fp32 rows are part (b)'s)
POWERSGD = "dml_powersgd"
#: DDP cannot be throttled, so every arm of the part runs on loopback as it is
LINK = "none"
#: torch's ``min_compression_rate``: a layer is compressed where its factors are under half its size
HOOK_MIN_RATE = 2.0
#: DDP's hook at a rank, as ``adass.experiments.bench.ddp.parse_hook`` reads it
HOOK = "powersgd:rank={rank}"


@dataclass(frozen=True)
class PsgdArm:
    """One row of the part's table.

    Attributes
    ----------
    sampler : str
        ``full``, or the plan's ADASS spec.
    kind : str
        ``ring`` (the project's ring and codec) or ``DDP`` (torch's DDP and hook).
    rank : int
        PowerSGD's rank; 0: fp32 on the ring (part (b)'s run).
    """

    sampler: str
    kind: str
    rank: int

    @property
    def name(self) -> str:
        return f"{self.kind} PowerSGD rank {self.rank}" if self.rank else f"{self.kind} fp32"

    @property
    def codec(self) -> str:
        """The ring's codec, or DDP's hook."""
        if not self.rank:
            return "fp32"
        return (PSGD_CODEC if self.kind == "ring" else HOOK).format(rank=self.rank)


def arms(plan: Plan) -> list[PsgdArm]:
    """The table's rows: ring fp32, each rank on the ring and as DDP's hook, then ADASS in fp32 and
    under PowerSGD."""
    full = DML_SAMPLERS[0]
    by_rank = [PsgdArm(full, kind, r) for r in plan.psgd_ranks for kind in ("ring", "DDP")]
    return [PsgdArm(full, "ring", 0), *by_rank, PsgdArm(plan.adass, "ring", 0),
            PsgdArm(plan.adass, "ring", plan.psgd_adass_rank)]  # fmt: skip


def references(plan: Plan) -> list[tuple[int, str, str, str]]:
    """The runs of part (b) that are this part's fp32 rows: the ring at the largest P on loopback, for
    ``full`` and for ADASS, as (P, exchange label, sampler, link)."""
    return [(max(plan.workers), "ring", arm.sampler, LINK) for arm in arms(plan) if not arm.rank]


def count(plan: Plan) -> int:
    """Runs of the part that are not part (b)'s."""
    return sum(arm.rank > 0 for arm in arms(plan)) * plan.seeds


def hook_wire_bytes(shapes: Sequence[Sequence[int]], rank: int, workers: int, steps: int) -> float:
    """Bytes per step that ``powerSGD_hook`` all-reduces, summed over ranks, counted as a ring sends them.

    gloo's own bytes are not counted anywhere, so this is a model: every gradient for the hook's
    first ``POWERSGD_START_STEP`` steps, then the factors and whole layers of torch's rule (the one
    :func:`~adass.codecs.powersgd.plan_layers` follows), each value in 4 bytes sent 2(P-1)/P times by
    each of P ranks.

    >>> hook_wire_bytes([(64, 784), (64,)], rank=1, workers=2, steps=2)  # two plain steps
    401920.0
    """
    layers = plan_layers(shapes, rank, HOOK_MIN_RATE)
    plain = min(steps, POWERSGD_START_STEP)
    values = plain * layers.numel + (steps - plain) * (layers.p_numel + layers.q_numel + layers.dense_numel)
    return 2 * (workers - 1) * 4 * values / steps


def _ring(config: RunConfig, cluster: Cluster, arm: PsgdArm) -> dict:
    return _ring_row(measure_arm(config, cluster.handle, config.cluster.workers, RING, arm.codec, LINK),
                     config.optim.epochs)  # fmt: skip


def _ring_row(row: dict, epochs: int) -> dict:
    return {"test_acc": row["test_acc"], "wire_kB_step": 1e3 * row["wire_MB_epoch"] * epochs / row["steps"],
            "step_ms": row["step_ms"], "epoch_s": row["epoch_s"]}  # fmt: skip


def _ddp(config: RunConfig, cluster: Cluster, arm: PsgdArm) -> dict:
    """DDP with the hook; step time as ``adass bench dml`` takes DDP's (forward + backward, inside
    which it all-reduces: the slowest rank, median over steps)."""
    result = train_ddp(config, cluster.handle, hook=arm.codec)
    steps, seed = result.steps, config.optim.seed
    dataset = load_dataset(config.data.data, seed=seed)
    shapes = [
        p.shape for p in build_model(config.model.model, dataset.shape, dataset.classes, seed).parameters()
    ]
    n_steps = int(steps["step"].nunique())
    return {"test_acc": result.test_acc,
            "wire_kB_step": hook_wire_bytes(shapes, arm.rank, config.cluster.workers, n_steps) / 1e3,
            "step_ms": 1e3 * float(steps["step_s"].groupby(steps["step"]).max().median()),
            "epoch_s": sum(result.epoch_s) / len(result.epoch_s)}  # fmt: skip


def run(plan: Plan, runner: Runner, cluster: Cluster) -> pd.DataFrame:
    """Every arm of :func:`arms` at the largest P of the plan, every seed; one row per run."""
    p, store, epochs = max(plan.workers), runner.store, plan.setting["epochs"]
    progress = runner.progress("claim 1, powersgd", count(plan))
    rows = []
    for seed in range(plan.seeds):
        for arm in arms(plan):
            config = base_config(plan).replace(sampler=arm.sampler, seed=seed, workers=p)
            if not arm.rank:  # part (b)'s run, counted and reported there
                ref = (p, "ring", arm.sampler, LINK)
                row = _ring_row(process_row(plan, store, cluster, seed, ref, steps=True)[0], epochs)
            else:
                key = store.key(POWERSGD, config.to_dict(), kind=arm.kind, codec=arm.codec, link=LINK)
                row = store.load(POWERSGD, key)
                reused = row is not None
                if row is None:
                    row = (_ring if arm.kind == "ring" else _ddp)(config, cluster, arm)
                    store.save(POWERSGD, key, row)
                progress(f"P={p} {arm.sampler} {arm.name} seed {seed}",
                         f"acc {row['test_acc']:.3f}, step {row['step_ms']:.1f} ms",
                         None if reused else row["epoch_s"] * epochs, reused=int(reused))  # fmt: skip
            rows.append({"workers": p, "sampler": arm.sampler, "arm": arm.name, "seed": seed, **row})
    return pd.DataFrame(rows)


def table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per sampler and arm: accuracy (seed mean, standard error in points), wire bytes and step time."""
    rows = []
    for (p, sampler, arm), group in runs.groupby(["workers", "sampler", "arm"], sort=False):
        acc, se = mean_se(group["test_acc"])
        rows.append({"workers": p, "sampler": sampler, "arm": arm, "seeds": len(group), "test_acc": acc,
                     "acc_se_pts": 100 * se, "wire_kB_step": float(group["wire_kB_step"].mean()),
                     "step_ms": float(group["step_ms"].mean())})  # fmt: skip
    return pd.DataFrame(rows)


def checks(runs: pd.DataFrame, plan: Plan, tolerance_pts: float) -> list[Check]:
    """Per rank: the ring's accuracy at most one standard error (of the per-seed differences) below the
    hook's, or with one seed not below it; ADASS under PowerSGD at most ``tolerance_pts`` below ADASS in
    fp32 (seed means)."""
    acc = runs.pivot_table(index="seed", columns=["sampler", "arm"], values="test_acc")
    full, out = DML_SAMPLERS[0], []
    for r in plan.psgd_ranks:
        ring, hook = PsgdArm(full, "ring", r).name, PsgdArm(full, "DDP", r).name
        deficit, se = deficit_pts(acc[(full, hook)], acc[(full, ring)])
        out.append(Check(f"rank {r}", "ring PowerSGD within one standard error of torch's hook", deficit <= (se if se == se else 0.0),
                         f"{plus_minus(deficit, se)} points below the hook"))  # fmt: skip
    ours = PsgdArm(plan.adass, "ring", plan.psgd_adass_rank)
    deficit, se = deficit_pts(
        acc[(plan.adass, PsgdArm(plan.adass, "ring", 0).name)], acc[(plan.adass, ours.name)]
    )
    out.append(Check(f"ADASS, rank {ours.rank}", f"ADASS with PowerSGD within {tolerance_pts:g} points of ADASS fp32",
                     deficit <= tolerance_pts, f"{plus_minus(deficit, se)} points below fp32"))  # fmt: skip
    return out


def lines(plan: Plan, summary: pd.DataFrame, goals: list[Check]) -> list[str]:
    """The part's report lines: what ran, the table, its goals and its verdict line."""
    s, p = plan.setting, max(plan.workers)
    return [
        f"### (d) PowerSGD on real processes, P={p}, beside torch's `powerSGD_hook`", "",
        f"`{s['data']}`, `{s['model']}`, {s['epochs']} epochs, global batch {s['batch_size']}, lr {s['lr']}, "
        f"loopback as it is (DDP cannot be throttled). The ring runs `{PSGD_CODEC.format(rank='R')}` (error "
        f"feedback through the memory, {POWERSGD_START_STEP} fp32 steps first); DDP runs torch's "
        f"`powerSGD_hook` at the same rank (error feedback and warm start, compressing from step "
        f"{POWERSGD_START_STEP}) on the same model, shards, local batch and steps, all `full`, each rank in a process "
        "of its own that a task on its Dask worker starts and waits on; then "
        f"`{plan.adass}` in fp32 and under PowerSGD rank {plan.psgd_adass_rank}; the fp32 rows are (b)'s runs. "
        "`acc_se_pts`: standard error over seeds. `wire_kB_step`: bytes all ranks sent per step; DDP's are "
        "modelled, since gloo's are not counted: the values its hook all-reduces each step (every gradient "
        f"for {POWERSGD_START_STEP} steps, then the factors and whole layers of the same rule as the codec) "
        "sent 2(P-1)/P times by each rank, as the ring sends them. `step_ms`: as in (b); DDP's is forward + "
        "backward with its all-reduces inside, slowest rank, median over steps.", "",
        markdown_table(summary), "",
        "Goals of (d) (seed means; `±` is the standard error of the per-seed differences; a ring above the "
        "hook passes, and with one seed the ring passes where it is not below the hook):", "",
        markdown_table(checks_table(goals)), "",
        f"**Verdict, PowerSGD: {verdict(goals)}**", "",
    ]  # fmt: skip
