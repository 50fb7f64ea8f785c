"""Run several samplers (and, distributed, exchanges x codecs) over seeds and summarise them side by side.

Runs are interleaved (seed by seed, every variant) so slow phases of a noisy machine hit all variants
alike; costs are reported as ratios to the reference (``full`` with the first exchange and codec)
from the same invocation and seed, and ``wall_ratio`` is the median of the per-seed ratios (with
their interquartile range), so one slow run does not move it. Every process pins its torch threads
(``--threads``, default 1), so wall times compare.

Every ADASS arm gets two controls, run on the same seed right after it:

- ``random (schedule-matched)``: ``random:schedule=..`` replaying the ADASS run's measured kept share
  of every epoch (its full warm-up and final epochs included): the same backprops, epoch by epoch,
  with uniformly chosen samples. ADASS pays only if it beats this arm.
- ``full (budget-matched)``: full data for as many epochs as ADASS's backprops pay for (rounded), with
  its learning-rate schedule over those epochs: what the same budget buys without selection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..config import RunConfig, SamplerSection, check_option, options
from ..data import Dataset, load_dataset, standardization_record
from ..metrics import EvalRecord, MemorySink, ParquetSink, atomic_write_text
from ..runtime import run
from ..sampling.random_subset import schedule_text
from ..tables import markdown_table

__all__ = ["BUDGET_MATCHED", "COMPARE_COLUMNS", "DISTRIBUTED_COLUMNS", "SCHEDULE_MATCHED", "Variant", "compare",
           "compare_runs", "controls", "run_one", "summarise", "warm_kernels", "warm_up"]  # fmt: skip

COMPARE_COLUMNS = ["sampler", "seeds", "test_acc", "test_acc_std", "backprop_frac", "forward_frac", "wall_ratio",
                   "wall_ratio_iqr"]  # fmt: skip
DISTRIBUTED_COLUMNS = ["sampler", "exchange", "codec", "seeds", "test_acc", "test_acc_std", "backprop_frac",
                       "forward_frac", "wall_ratio", "wall_ratio_iqr", "wire_bytes", "epoch_s"]  # fmt: skip

#: labels of the controls every ADASS arm gets (with the arm's label appended where there are several)
SCHEDULE_MATCHED = "random (schedule-matched)"
BUDGET_MATCHED = "full (budget-matched)"


@dataclass(frozen=True)
class Variant:
    """One arm of a comparison."""

    sampler: str
    exchange: str = ""
    codec: str = ""

    @property
    def label(self) -> str:
        return " | ".join(p for p in (self.sampler, self.exchange, self.codec) if p)

    def apply(self, config: RunConfig, seed: int) -> RunConfig:
        changes = {"sampler": self.sampler, "seed": seed}
        if self.exchange:
            changes.update(exchange=self.exchange, codec=self.codec)
        return config.replace(**changes)


def _run_dir_name(label: str, seed: int) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "=._-" else "_" for ch in label.replace(" | ", "__"))
    return f"{safe}-seed{seed}"


def run_one(
    config: RunConfig,
    dataset: Dataset,
    out_dir: str | Path | None = None,
    label: str | None = None,
    progress: Callable[[EvalRecord], None] | None = None,
    handle: object | None = None,
) -> dict:
    """Train one configuration (in this process, or on ``handle``'s cluster); return its summary row.

    The row's ``kept_fracs`` lists every epoch's kept share (what a schedule-matched control replays).
    """
    label = label or config.sampler.sampler
    kept_fracs: list[float] = []

    def record(r: EvalRecord) -> None:
        kept_fracs.append(float(r.kept_frac))
        if progress is not None:
            progress(r)

    seed = config.optim.seed
    run_dir = None if out_dir is None else Path(out_dir) / "runs" / _run_dir_name(label, seed)
    saved = {**config.to_dict(), "standardization": standardization_record(dataset)}
    sink = MemorySink() if run_dir is None else ParquetSink(run_dir, saved)
    run_id = f"{label}|seed{seed}"
    if config.cluster.workers:
        run_id = run_id.replace(" ", "")  # it names the run's Dask event topic
    result = run(config, sink=sink, progress=record, run_id=run_id, dataset=dataset,
                 selection_records=out_dir is not None, checkpoint_dir=run_dir, handle=handle)  # fmt: skip
    final, c = result.final, result.counters
    backprops, forwards, wall_s = c.backprops, c.forwards, c.train_s
    return {
        "sampler": label, "spec": config.sampler.sampler, "seed": seed, "test_acc": final.test_acc,
        "backprops": backprops, "forwards": forwards, "wall_s": wall_s, "wire_bytes": final.wire_bytes,
        "epoch_s": wall_s / config.optim.epochs, "epochs": config.optim.epochs, "kept_fracs": kept_fracs,
    }  # fmt: skip


def controls(
    config: RunConfig, adass_row: dict, full_row: dict, label: str = ""
) -> list[tuple[str, RunConfig]]:
    """The schedule-matched random and budget-matched full arms of one ADASS run (same seed).

    Parameters
    ----------
    config : RunConfig
        The ADASS run's configuration.
    adass_row, full_row : dict
        :func:`run_one` rows of the ADASS run and of the reference ``full`` run of the same seed.
    label : str
        Appended to the control labels (where several ADASS arms run).
    """
    suffix = f" {label}" if label else ""
    schedule = schedule_text(adass_row["kept_fracs"])
    share = adass_row["backprops"] / max(1, full_row["backprops"])
    epochs = max(1, round(share * full_row["epochs"]))
    return [(SCHEDULE_MATCHED + suffix, config.replace(sampler=f"random:schedule={schedule}")),
            (BUDGET_MATCHED + suffix, config.replace(sampler="full", epochs=epochs))]  # fmt: skip


_LOCAL_ONLY = {"workers": 0, "link": "", "straggler": "", "scheduler": "", "tls_ca": "", "tls_cert": "",
               "tls_key": "", "dask_dashboard": False}  # fmt: skip
#: the data and model of a kernel warm-up: tiny, since numba compiles for the types, not the sizes
_WARM_DATA, _WARM_MODEL = "synthetic:n=256,d=16,classes=4", "mlp:hidden=32"


def warm_up(config: RunConfig, dataset: Dataset) -> None:
    """An untimed epoch: the first run of a process pays torch's lazy initialisation."""
    run(config.replace(epochs=1, sampler="full", replicas=0, codec="fp32", memory="none", **_LOCAL_ONLY),
        dataset=dataset, selection_records=False)  # fmt: skip


def warm_kernels(configs: Sequence[RunConfig]) -> int:
    """Compile (or load from numba's cache) the codec kernels every config's exchange will call.

    Each distinct exchange, codec and memory runs one untimed epoch on as many virtual replicas of
    this process as the run has, over tiny data: every fused loop the real run takes is compiled here
    and cached on disk, so no timed run pays for it (numba compiles for the types, not the sizes).

    Returns
    -------
    int
        How many warm-up runs it made (0 where nothing is encoded).
    """
    seen = set()
    for config in configs:
        key = (config.exchange.exchange, config.codec.codec, config.codec.memory)
        if key in seen or (key[1] == "fp32" and key[2] == "none"):
            continue
        seen.add(key)
        tiny = config.replace(data=_WARM_DATA, model=_WARM_MODEL, epochs=1, sampler="full",
                              replicas=config.world, batch_size=32, device="cpu", **_LOCAL_ONLY)  # fmt: skip
        run(tiny, selection_records=False)
    return len(seen)


def _warm_cluster(handle: object, configs: Sequence[RunConfig]) -> None:
    """:func:`warm_kernels` here (which writes numba's cache), then on every worker of ``handle``
    (which loads it): each Dask worker is a process of its own, with its own compiled functions."""
    if warm_kernels(configs):
        flats = [c.flat() for c in configs]
        handle.client.run(_warm_from_flat, flats)  # type: ignore[attr-defined]


def _warm_from_flat(flats: list[dict]) -> None:
    warm_kernels([RunConfig.from_flat(**flat) for flat in flats])


def variants(
    base: RunConfig, samplers: Sequence[str], exchanges: Sequence[str], codecs: Sequence[str]
) -> list[Variant]:
    """Every sampler x exchange x codec (validated), the reference first."""
    section = options(SamplerSection)["sampler"]
    specs = [check_option("sampler", section, s) for s in samplers]
    if "full" not in specs:
        specs = ["full", *specs]
    if not base.cluster.workers:
        return [Variant(s) for s in specs]
    exchanges = list(exchanges) or [base.exchange.exchange]
    codecs = list(codecs) or [base.codec.codec]
    out = [Variant(s, e, c) for s in specs for e in exchanges for c in codecs]
    for v in out:
        v.apply(base, 0)  # an impossible exchange/codec pair fails here, before anything runs
    return out


@contextlib.contextmanager
def _cluster(base: RunConfig, arms: Sequence[Variant]) -> Iterator[object | None]:
    """One cluster for every distributed arm: enough workers for the replicas and the most servers."""
    if not base.cluster.workers:
        yield None
        return
    from ..runtime.cluster import connect_for

    extra = max(arm.apply(base, 0).servers for arm in arms)
    handle = connect_for(base, base.cluster.workers + extra)  # its scheduler, --detect-s and --tls-*
    try:
        yield handle
    finally:
        handle.close()


def compare_runs(
    base: RunConfig,
    samplers: Sequence[str],
    seeds: int,
    out_dir: str | Path | None = None,
    progress_factory: Callable[[str, int], Callable[[EvalRecord], None] | None] | None = None,
    exchanges: Sequence[str] = (),
    codecs: Sequence[str] = (),
    on_cluster: Callable[[object], None] | None = None,
    matched: bool = True,
    run_fn: Callable[..., dict] = run_one,
) -> pd.DataFrame:
    """Every run of :func:`compare`, one row each (``sampler`` is the arm's label), in running order.

    With ``matched``, every ADASS arm is followed by its two controls (:func:`controls`), run on the
    same seed and exchange/codec. ``run_fn`` trains one arm, with :func:`run_one`'s arguments and row
    (``adass reproduce`` passes one that reuses finished runs).
    """
    arms = variants(base, samplers, exchanges, codecs)
    adass_arms = [a for a in arms if a.sampler.split(":")[0] == "adass"] if matched else []
    several = len({a.sampler for a in adass_arms}) > 1
    rows = []
    with _cluster(base, arms) as handle:
        if handle is not None and on_cluster is not None:
            on_cluster(handle)
        configs = [arm.apply(base, base.optim.seed) for arm in arms]
        if handle is not None:
            _warm_cluster(handle, configs)
        else:
            warm_kernels(configs)
        for k in range(seeds):
            seed = base.optim.seed + k
            dataset = load_dataset(base.data.data, seed=seed)
            if k == 0:
                warm_up(base, dataset)
            done: dict[Variant, dict] = {}

            def record(
                config: RunConfig, label: str, arm: Variant, seed: int = seed, dataset: Dataset = dataset
            ) -> dict:
                progress = progress_factory(label, seed) if progress_factory else None
                row = run_fn(config, dataset, out_dir, label, progress, handle)
                rows.append({**row, "exchange": arm.exchange, "codec": arm.codec})
                return row

            for arm in arms:
                config = arm.apply(base, seed)
                row = done[arm] = record(config, arm.label, arm)
                if arm not in adass_arms:
                    continue
                reference = next(v for v in arms if v.sampler == "full" and (v.exchange, v.codec) ==
                                 (arm.exchange, arm.codec))  # fmt: skip
                for label, control in controls(config, row, done[reference], arm.sampler if several else ""):
                    record(control, " | ".join(p for p in (label, arm.exchange, arm.codec) if p), arm)
    return pd.DataFrame(rows)


def compare(
    base: RunConfig,
    samplers: Sequence[str],
    seeds: int,
    out_dir: str | Path | None = None,
    progress_factory: Callable[[str, int], Callable[[EvalRecord], None] | None] | None = None,
    exchanges: Sequence[str] = (),
    codecs: Sequence[str] = (),
    on_cluster: Callable[[object], None] | None = None,
) -> pd.DataFrame:
    """Train every variant for seeds ``base.optim.seed + 0 .. seeds-1``; return one row per variant.

    With ``base.cluster.workers`` > 0 each run is distributed on one shared cluster, and
    ``exchanges`` x ``codecs`` multiply the samplers. Every ADASS arm brings its schedule-matched
    ``random`` and budget-matched ``full`` controls (module docstring). Per-run records go to
    ``out_dir/runs/<variant>-seed<k>/``, the tables to ``compare.csv``/``.md``, every run's row to
    ``compare_runs.csv``.
    """
    runs = compare_runs(base, samplers, seeds, out_dir, progress_factory, exchanges, codecs, on_cluster)
    table = summarise(runs, distributed=bool(base.cluster.workers))
    if out_dir is not None:
        out = Path(out_dir)
        atomic_write_text(out / "compare_runs.csv", runs.drop(columns="kept_fracs").to_csv(index=False))
        atomic_write_text(out / "compare.csv", table.to_csv(index=False))
        atomic_write_text(out / "compare.md", markdown_table(table) + "\n")
    return table


def summarise(runs: pd.DataFrame, distributed: bool = False) -> pd.DataFrame:
    """One row per variant: accuracy mean/std and cost ratios to the first ``full`` variant (same seed).

    ``backprop_frac`` and ``forward_frac`` are means of per-seed ratios; ``wall_ratio`` is the median
    of per-seed wall-time ratios and ``wall_ratio_iqr`` their interquartile range.
    """
    reference = runs.loc[runs["spec"] == "full", "sampler"].iloc[0] if "spec" in runs else "full"
    ref = runs[runs["sampler"] == reference].set_index("seed")
    runs = runs.assign(
        backprop_frac=runs["backprops"] / runs["seed"].map(ref["backprops"]),
        forward_frac=runs["forwards"] / runs["seed"].map(ref["forwards"]),
        wall_ratio=runs["wall_s"] / runs["seed"].map(ref["wall_s"]),
    )
    order = list(dict.fromkeys(runs["sampler"]))
    groups = {label: runs[runs["sampler"] == label] for label in order}
    walls = [g["wall_ratio"] for g in groups.values()]
    table = pd.DataFrame({
        "sampler": [g["spec"].iloc[0] if "spec" in g else label for label, g in groups.items()],
        "exchange": [g["exchange"].iloc[0] if "exchange" in g else "" for g in groups.values()],
        "codec": [g["codec"].iloc[0] if "codec" in g else "" for g in groups.values()],
        "seeds": [len(g) for g in groups.values()],
        "test_acc": [g["test_acc"].mean() for g in groups.values()],
        "test_acc_std": [g["test_acc"].std(ddof=1) if len(g) > 1 else float("nan") for g in groups.values()],
        "backprop_frac": [g["backprop_frac"].mean() for g in groups.values()],
        "forward_frac": [g["forward_frac"].mean() for g in groups.values()],
        "wall_ratio": [w.median() for w in walls],
        "wall_ratio_iqr": [w.quantile(0.75) - w.quantile(0.25) for w in walls],
        "wire_bytes": [int(g["wire_bytes"].mean()) if "wire_bytes" in g else 0 for g in groups.values()],
        "epoch_s": [g["epoch_s"].mean() if "epoch_s" in g else 0.0 for g in groups.values()],
    })  # fmt: skip
    if not distributed:
        table["sampler"] = order
    else:  # the controls' specs are long schedules: their labels say what they are
        table["sampler"] = [label.split(" | ")[0] if label.startswith((SCHEDULE_MATCHED, BUDGET_MATCHED)) else spec
                            for label, spec in zip(order, table["sampler"], strict=True)]  # fmt: skip
    return table[DISTRIBUTED_COLUMNS if distributed else COMPARE_COLUMNS]
