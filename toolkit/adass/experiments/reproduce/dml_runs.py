"""The runs of claim 1 (samplers, real processes, simulated replicas), each reused from the run store
where it finished before.

The samplers' runs go in chains, one per data set and seed: ADASS's matched controls replay the ADASS
run of the same seed, so a chain is the unit ``--jobs`` spreads over processes. The real-process runs
measure time on a shared Dask cluster (:class:`Cluster`) and stay one after another in this process.
"""

from __future__ import annotations

import time
from collections.abc import Collection

import pandas as pd

from ...config import RunConfig
from ...data import load_dataset
from ...runtime.cluster import ClusterHandle, connect
from ..bench.dml import measure_arm
from ..compare import compare_runs, run_one
from .arms import DML_EXCHANGES, DML_SAMPLERS, LINKS
from .parallel import Done, Runner, Task
from .plan import Plan
from .replicas import run_virtual
from .store import RunStore

__all__ = [
    "PROCESSES",
    "SAMPLERS",
    "SIMULATED",
    "Cluster",
    "base_config",
    "count",
    "process_row",
    "processes",
    "sampler_chain",
    "samplers",
    "simulated",
]

#: the store's sections of claim 1's runs
SAMPLERS, PROCESSES, SIMULATED = "dml_samplers", "dml_processes", "dml_simulated"


def _per_seed(plan: Plan) -> int:
    """Runs of one samplers chain: full, every sampler, and two controls per ADASS sampler."""
    return len(plan.samplers) + 1 + 2 * sum(s.startswith("adass") for s in plan.samplers)


def _process_arms(plan: Plan) -> list[tuple[int, str, str, str]]:
    return [(p, label, sampler, link) for p in plan.workers for label in DML_EXCHANGES
            for sampler in (DML_SAMPLERS[0], plan.adass) for link in plan.dml_links]  # fmt: skip


def count(plan: Plan) -> dict[str, int]:
    """Runs of each part of claim 1."""
    return {"samplers": _per_seed(plan) * plan.seeds * len(plan.sampler_settings),
            "processes": len(_process_arms(plan)) * plan.seeds,
            "simulated": len(plan.sim_workers) * len(DML_EXCHANGES)}  # fmt: skip


def sampler_chain(name: str, options: dict, samplers: list[str], seed: int, store: RunStore) -> Done:
    """Every sampler and ADASS's controls on one data set and seed (a :class:`Task` function); each
    run's row is looked up in, or written to, ``store``."""
    reused, start = 0, time.perf_counter()

    def cached(config: RunConfig, dataset, out_dir, label: str, progress, handle) -> dict:
        nonlocal reused
        key = store.key(SAMPLERS, config.to_dict(), label=label)
        row = store.load(SAMPLERS, key)
        if row is not None:
            reused += 1
            return row
        row = run_one(config, dataset, out_dir, label, progress, handle)
        store.save(SAMPLERS, key, row)
        return row

    base = RunConfig.from_flat(**options, seed=seed, threads=1)
    runs = compare_runs(base, samplers, 1, run_fn=cached).drop(columns="kept_fracs").assign(dataset=name)
    full = runs[runs["sampler"] == "full"]["test_acc"].iloc[0]
    return Done(runs, f"full acc {full:.3f}", time.perf_counter() - start, len(runs), reused)


def samplers(plan: Plan, runner: Runner) -> pd.DataFrame:
    """Every sampler and ADASS's two matched controls on each setting; one row per run."""
    tasks = [Task(f"{name} seed {seed}", sampler_chain, (name, options, list(plan.samplers), seed, runner.store))
             for name, options in plan.sampler_settings.items() for seed in range(plan.seeds)]  # fmt: skip
    frames = runner.run(tasks, runner.progress("claim 1, samplers", count(plan)["samplers"]))
    # seed by seed within each data set, as one compare over the seeds lists them
    order = {name: i for i, name in enumerate(plan.sampler_settings)}
    runs = pd.concat(frames, ignore_index=True)
    return runs.sort_values(["dataset", "seed"], key=lambda c: c.map(order) if c.name == "dataset" else c,
                            kind="stable", ignore_index=True)  # fmt: skip


def base_config(plan: Plan) -> RunConfig:
    """The run options of the real-process and simulated runs: the plan's setting, ``full``, seed 0."""
    return RunConfig.from_flat(**plan.setting, sampler="full", seed=0, threads=1)


class Cluster:
    """The Dask LocalCluster of claim 1's real-process runs, started by the first run that is not in
    the store (a plan whose runs are all stored starts none) and closed on leaving the ``with``.

    Parameters
    ----------
    plan : Plan
        Its largest P, plus the servers of the widest exchange of ``DML_EXCHANGES``, are the workers.
    """

    def __init__(self, plan: Plan) -> None:
        base = base_config(plan)
        servers = max(base.replace(exchange=e).servers for e in DML_EXCHANGES.values())
        self.n_workers = max(plan.workers) + servers
        self._handle: ClusterHandle | None = None

    @property
    def handle(self) -> ClusterHandle:
        if self._handle is None:
            self._handle = connect(n_workers=self.n_workers)
        return self._handle

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def process_row(plan: Plan, store: RunStore, cluster: Cluster, seed: int, arm: tuple[int, str, str, str],
                steps: bool = False) -> tuple[dict, bool]:  # fmt: skip
    """One fp32 run of part (b), ``arm`` = (P, exchange label, sampler, link), from the store or run now.

    With ``steps`` the row must hold its step count: a stored one written before runs recorded it
    runs again.

    Returns
    -------
    tuple
        The row and whether it was reused.
    """
    p, label, sampler, link = arm
    config = base_config(plan).replace(sampler=sampler, seed=seed)
    key = store.key(PROCESSES, config.to_dict(), workers=p, exchange=DML_EXCHANGES[label], link=link)
    row = store.load(PROCESSES, key)
    if row is not None and (not steps or "steps" in row):
        return row, True
    row = measure_arm(config, cluster.handle, p, DML_EXCHANGES[label], "fp32", link)
    row = {**row, "exchange": label, "sampler": sampler, "seed": seed}
    store.save(PROCESSES, key, row)
    return row, False


def processes(plan: Plan, runner: Runner, cluster: Cluster,
              with_steps: Collection[tuple[int, str, str, str]] = ()) -> pd.DataFrame:  # fmt: skip
    """ADASS and full on PS and ring, P real processes, every link and seed; one row per run. The arms
    of ``with_steps`` must hold their step counts (see :func:`process_row`)."""
    todo = [(seed, arm) for seed in range(plan.seeds) for arm in _process_arms(plan)]
    progress = runner.progress("claim 1, processes", len(todo))
    rows = []
    for seed, (p, label, sampler, link) in todo:
        arm = (p, label, sampler, link)
        row, reused = process_row(plan, runner.store, cluster, seed, arm, steps=arm in with_steps)
        seconds = None if reused else row["epoch_s"] * plan.setting["epochs"]
        progress(f"P={p} {label} {sampler} link {link} seed {seed}",
                 f"acc {row['test_acc']:.3f}, epoch {row['epoch_s']:.2f} s", seconds, reused=int(reused))  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def simulated(plan: Plan, runner: Runner) -> pd.DataFrame:
    """Ring and PS on ``plan.sim_workers`` virtual replicas, modelled times under every link.

    These run here, one after another: their compute times enter the modelled step."""
    base = base_config(plan).replace(epochs=plan.sim_epochs)
    store = runner.store
    dataset = None
    progress = runner.progress("claim 1, simulated", count(plan)["simulated"])
    rows = []
    for p in plan.sim_workers:
        for label, exchange in DML_EXCHANGES.items():
            config = base.replace(workers=0, replicas=p, exchange=exchange)
            key = store.key(SIMULATED, config.to_dict(), replicas=p, links=LINKS)
            row = store.load(SIMULATED, key)
            reused = int(row is not None)
            if row is None:
                dataset = dataset or load_dataset(base.data.data, seed=0)
                row = {"workers": p, "exchange": label, **run_virtual(config, dataset, LINKS)}
                store.save(SIMULATED, key, row)
            progress(f"P={p} {label}", f"transfers {row['comm_ms_1gbit']:.2f} ms per step at 1gbit",
                     row["wall_s"], reused=reused)  # fmt: skip
            rows.append(row)
    return pd.DataFrame(rows)
