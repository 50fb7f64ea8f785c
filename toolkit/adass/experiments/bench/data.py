"""``adass bench data``: a data set larger than one Dask worker may hold, trained on four workers under
Dask's per-worker memory limit, each replica reading only its shard of an ``.npy`` file.

The suite writes a float32 ``.npy`` data set (2 GB of training rows; 64 MB with ``--quick``) into a
temporary folder, then:

1. On a cluster of four fresh workers without a limit, a run on a tiny data set of the same width
   measures what a worker holds before any data (``worker_MB``, its whole resident memory) and what
   building a replica costs besides its data (``build_MB``: its first model, torch's first
   operations), so that the data's own share can be told apart.
2. The memory limit is set so that one shard fits (the worker, its build, its shard and the test
   split at ``PAUSE_SHARE`` of the limit, under the 80% at which Dask pauses a worker) while the whole
   data set would not: a replica that read it all would pass the 95% at which the nanny restarts it.
3. On four fresh workers under that limit, one epoch (ring, fp32) with ``--data-to-workers read``.

Per replica: ``shard_MB`` (its training rows, the test split and their indices as held),
``taken_MB`` (growth of its resident memory that no file backs while it took its data and built its
engine), ``data_resident_MB`` (``taken_MB`` less the build cost of step 1) and ``load_s``. The
header gives the data set against the limit, and the run's outcome (any worker lost is a fault).
With four workers each shard is a quarter of the data set, so the data set can be at most four
times what a worker has left for data under its limit; the header says how close this run came.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ...config import RunConfig
from ...runtime.cluster import connect, train_distributed
from ...tables import markdown_table
from . import write_report

__all__ = ["COLUMNS", "measure", "run", "write_npy"]

WORKERS = 4
WIDTH = 256  # float32 features per row: 1 KiB rows
TEST_ROWS = 8192
COLUMNS = ["rank", "rows", "shard_MB", "taken_MB", "data_resident_MB", "rss_MB", "load_s"]
MB = 1e6
#: the most of its limit a worker may hold once its replica stands: Dask pauses a worker at 80% and
#: restarts it at 95%, and reading a shard passes through more than the shard for a moment
PAUSE_SHARE = 0.6


def write_npy(folder: Path, n_train: int, seed: int = 0) -> int:
    """Write ``x_train``/``y_train``/``x_test``/``y_test`` ``.npy`` files of four separable classes,
    ``WIDTH`` float32 features per row, a block of rows at a time (never the whole set in memory).

    Returns
    -------
    int
        Bytes of the training features.
    """
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=0.5, size=(4, WIDTH)).astype(np.float32)
    for split, n in (("train", n_train), ("test", TEST_ROWS)):
        y = (np.arange(n) * 7919) % 4  # classes spread over the file
        np.save(folder / f"y_{split}.npy", y.astype(np.int64))
        x = np.lib.format.open_memmap(
            folder / f"x_{split}.npy", mode="w+", dtype=np.float32, shape=(n, WIDTH)
        )
        for start in range(0, n, 65536):
            part = y[start : start + 65536]
            x[start : start + part.size] = centres[part] + rng.standard_normal(
                (part.size, WIDTH), dtype=np.float32
            )
        x.flush()
        del x
    return n_train * WIDTH * 4


def _config(folder: Path) -> RunConfig:
    return RunConfig.from_flat(data=f"npy:{folder}", model="logreg", sampler="full", epochs=1, batch_size=4096,
                               lr=0.1, schedule="constant", workers=WORKERS, exchange="ring", codec="fp32",
                               data_to_workers="read", seed=0, restarts=0)  # fmt: skip


def measure(folder: Path, memory_limit: int = 0) -> tuple[list[dict], float, int]:
    """One epoch on ``WORKERS`` fresh workers (``memory_limit`` bytes each; 0: none).

    Returns
    -------
    tuple
        The replicas' data reports (see ``Replica.read``), the final test accuracy and the memory
        limit each worker says it has.
    """
    with connect(n_workers=WORKERS, memory_limit=memory_limit) as handle:
        limits = handle.client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit or 0)
        result = train_distributed(_config(folder), handle=handle)
    if result.faults:
        raise RuntimeError(f"a worker was lost: {result.faults[0]['failure']}")
    return result.data, result.final.test_acc, min(limits.values())


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Run the suite, print its table and write ``data.md`` and ``data.csv``; return the table."""
    n_train = 64 * 1024 if quick else 2048 * 1024
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="adass-bench-data-") as tmp:
        tiny, big = Path(tmp) / "tiny", Path(tmp) / "big"
        write_npy(tiny, 4 * 1024)
        data_bytes = write_npy(big, n_train)
        file_bytes = sum(f.stat().st_size for f in big.iterdir())
        reports, _, _ = measure(tiny)
        build_bytes = max(r["taken_bytes"] for r in reports)  # the tiny data's own share is under 2 MB
        worker_bytes = max(r["rss_bytes"] - r["taken_bytes"] for r in reports)
        shard_bytes = -(-data_bytes // WORKERS) + TEST_ROWS * (WIDTH * 4 + 8)
        limit = int((worker_bytes + build_bytes + shard_bytes) / PAUSE_SHARE)
        limit = -(-limit // 2**24) * 2**24  # whole 16 MiB
        reports, accuracy, seen_limit = measure(big, limit)
    rows = [{"rank": r["rank"], "rows": r["n"], "shard_MB": r["data_bytes"] / MB, "taken_MB": r["taken_bytes"] / MB,
             "data_resident_MB": (r["taken_bytes"] - build_bytes) / MB, "rss_MB": r["rss_bytes"] / MB,
             "load_s": r["load_s"]} for r in reports]  # fmt: skip
    table = pd.DataFrame(rows)[COLUMNS]
    headroom = limit - worker_bytes - build_bytes
    whole = worker_bytes + build_bytes + data_bytes
    text = [
        "# adass bench data", "",
        f"A float32 `.npy` data set of {n_train:,} training rows x {WIDTH} features ({data_bytes / MB:.0f} MB; "
        f"{file_bytes / MB:.0f} MB of files with the test split), {WORKERS} workers of an embedded LocalCluster "
        f"with Dask's memory limit of {limit / MB:.0f} MB each (the workers report {seen_limit / MB:.0f} MB), "
        f"`--data-to-workers read`, one epoch of `logreg` on the ring; host with {os.cpu_count()} CPUs; "
        f"{time.perf_counter() - start:.0f} s in all.", "",
        f"- A worker holds {worker_bytes / MB:.0f} MB before any data, and building a replica takes "
        f"{build_bytes / MB:.0f} MB more (measured on a tiny data set): {headroom / MB:.0f} MB of the limit "
        f"are left for data.",
        f"- The data set is {data_bytes / limit:.2f}x the memory limit and {data_bytes / headroom:.2f}x what "
        f"a worker has left for data (four workers can hold at most 4x).",
        f"- A replica holding the whole data set would need about {whole / MB:.0f} MB, "
        f"{whole / limit:.2f}x the limit (the nanny restarts a worker at 0.95x).",
        f"- The run finished with no worker lost; test accuracy {accuracy:.4f}.", "",
        markdown_table(table), "",
    ]  # fmt: skip
    write_report(out_dir, "data", text, {"data": table})
    return table
