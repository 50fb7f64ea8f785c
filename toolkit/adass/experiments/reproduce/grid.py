"""An accuracy grid on virtual replicas: codec arms on the ring beside fp32, every arm with every seed.

Every arm runs the same data, model, epochs and learning-rate schedule as the fp32 reference; only the
exchange and codec differ. Seeds run one after another, every arm within a seed, so a slow spell of
the machine falls on all arms alike (with ``--jobs 1``; more jobs run several of them at once).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from ...config import RunConfig
from ...data import Dataset, load_dataset
from .arms import FP32
from .parallel import Done, Task
from .replicas import run_virtual
from .store import RunStore
from .verdict import deficit_pts, mean_se

__all__ = ["REFERENCE", "SECTION", "Arm", "grid_run", "grid_tasks", "summarise_grid"]


@dataclass(frozen=True)
class Arm:
    """One arm: a label, its exchange and codec specs, and the grid coordinates it stands for."""

    label: str
    exchange: str
    codec: str
    coords: tuple[tuple[str, object], ...] = ()


REFERENCE = Arm("fp32", *FP32)


#: the store's section of grid runs: claims 2 and 3 share it, so their fp32 runs are run once
SECTION = "grid"


@functools.lru_cache(maxsize=2)
def _dataset(spec: str, seed: int) -> Dataset:
    """One load per data set and seed in each process (every arm of a seed trains on the same one)."""
    return load_dataset(spec, seed=seed)


def grid_run(config: dict, replicas: int, links: dict[str, str], store: RunStore, key: str) -> Done:
    """One arm of one seed on virtual replicas (a :class:`Task` function); its row goes to ``store``."""
    row = store.load(SECTION, key)
    if row is not None:
        return Done(row, f"acc {row['test_acc']:.3f}", runs=1, reused=1)
    run_config = RunConfig.from_dict(config)
    row = run_virtual(run_config, _dataset(run_config.data.data, run_config.optim.seed), links)
    store.save(SECTION, key, row)
    return Done(row, f"acc {row['test_acc']:.3f}", row["wall_s"])


def grid_tasks(base: RunConfig, arms: Sequence[Arm], seeds: int, replicas: int, links: Mapping[str, str],
               store: RunStore, prefix: str = "") -> tuple[list[Task], list[dict]]:  # fmt: skip
    """Every arm (and the fp32 reference first) for seeds 0 .. seeds-1, seed by seed: the tasks and
    the columns each run's row gets besides its measurements."""
    tasks, columns = [], []
    for seed in range(seeds):
        for arm in (REFERENCE, *arms):
            config = base.replace(
                workers=0, replicas=replicas, exchange=arm.exchange, codec=arm.codec, seed=seed
            ).to_dict()
            key = store.key(SECTION, config, label=arm.label, replicas=replicas, links=dict(links))
            tasks.append(
                Task(
                    f"{prefix}{arm.label} seed {seed}", grid_run, (config, replicas, dict(links), store, key)
                )
            )
            columns.append({"arm": arm.label, "exchange": arm.exchange, "codec": arm.codec, **dict(arm.coords),
                            "seed": seed})  # fmt: skip
    return tasks, columns


def summarise_grid(runs: pd.DataFrame, links: Mapping[str, str]) -> pd.DataFrame:
    """One row per arm: mean accuracy and its standard error, the deficit from fp32 (paired by
    seed, points, with standard error), wire bytes as a share of fp32's and modelled step times."""
    ref = runs[runs["arm"] == REFERENCE.label].set_index("seed")
    coords = [c for c in runs.columns if c not in {"arm", "exchange", "codec", "seed", "test_acc", "backprops",
                                                    "wire_bytes_epoch", "wall_s"}
              and not c.startswith(("step_ms_", "comm_ms_", "comm_share_"))]  # fmt: skip
    rows = []
    for label, group in runs.groupby("arm", sort=False):
        acc, acc_se = mean_se(group["test_acc"])
        deficit, deficit_se = deficit_pts(ref["test_acc"], group.set_index("seed")["test_acc"])
        wire = float(group["wire_bytes_epoch"].mean())
        row = {"arm": label, "exchange": group["exchange"].iloc[0], "codec": group["codec"].iloc[0],
               **{c: group[c].iloc[0] for c in coords}, "seeds": len(group), "test_acc": acc,
               "acc_se_pts": 100 * acc_se, "deficit_pts": deficit, "deficit_se_pts": deficit_se,
               "wire_MB_epoch": wire / 1e6, "wire_frac": wire / float(ref["wire_bytes_epoch"].mean())}  # fmt: skip
        for name in links:
            row[f"step_ms_{name}"] = float(group[f"step_ms_{name}"].mean())
            row[f"comm_ms_{name}"] = float(group[f"comm_ms_{name}"].mean())
        rows.append(row)
    table = pd.DataFrame(rows)
    for c in coords:  # the reference has no coordinates: whole numbers stay whole beside its blanks
        values = table[c].dropna()
        if (
            pd.api.types.is_numeric_dtype(values)
            and not pd.api.types.is_bool_dtype(values)
            and (values % 1 == 0).all()
        ):
            table[c] = table[c].astype("Int64")
    return table
