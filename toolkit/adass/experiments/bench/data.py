"""``adass bench data``: a data set four times one Dask worker's memory limit, trained on four workers
under that limit, each replica leaving its shard's rows in the ``.npy`` file and reading each batch's
rows as it trains (``--train-rows auto`` chooses that by itself).

The suite writes a float32 ``.npy`` data set into a temporary folder, then:

1. On a cluster of four fresh workers without a limit, a run on a tiny data set of the same width
   measures what a worker holds before any data (``worker_MB``, its whole resident memory) and what
   building a replica costs besides its data (``build_MB``: its first model, torch's first
   operations), so that the data's own share can be told apart.
2. The memory limit is set so that the worker, its build and the test split sit at ``PAUSE_SHARE``
   of it (under the 80% at which Dask pauses a worker), and the training split is written
   ``TIMES`` times that limit (64 MB with ``--quick``, where the rows are left in the file by
   ``--train-rows file`` instead).
3. On four fresh workers under that limit, one epoch (ring, fp32) with ``--data-to-workers read``.
4. The same epoch on four workers without a limit, every replica holding its shard in memory, for
   the time a step takes either way (left out with ``--quick``).

Per replica: ``shard_MB`` (its training rows as float32, what holding them would take),
``held_MB`` (what it holds: the test split and row numbers), ``taken_MB`` (growth of its resident
memory that no file backs while it took its data and built its engine), ``peak_rss_MB`` (the most
its worker process held from the run's start to its end, reading and training, against the limit) and ``load_s``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ...config import RunConfig
from ...metrics import StepRecord
from ...runtime.cluster import connect, train_distributed
from ...tables import markdown_table
from . import write_report

__all__ = ["COLUMNS", "measure", "run", "write_npy"]

WORKERS = 4
WIDTH = 256  # float32 features per row: 1 KiB rows
TEST_ROWS = 8192
BATCH = 4096
COLUMNS = [
    "rank",
    "rows",
    "in_file",
    "shard_MB",
    "held_MB",
    "taken_MB",
    "peak_rss_MB",
    "peak_of_limit",
    "load_s",
]
RUN_COLUMNS = ["train_rows", "memory_limit_MB", "in_file", "steps", "s_per_step", "epoch_s", "max_peak_rss_MB",
               "test_acc"]  # fmt: skip
MB = 1e6
#: the most of its limit a worker may hold once its replica stands: Dask pauses a worker at 80% and
#: restarts it at 95%, and training adds to what the build held (the batches, the exchange's buffers,
#: gloo's: about 0.1 GB a worker measured at 0.6 here, which came within 0.02 of the pause)
PAUSE_SHARE = 0.5
#: the training split's size in memory limits
TIMES = 4.2


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


def _config(folder: Path, train_rows: str) -> RunConfig:
    return RunConfig.from_flat(data=f"npy:{folder}", model="logreg", sampler="full", epochs=1, batch_size=BATCH,
                               lr=0.1, schedule="constant", workers=WORKERS, exchange="ring", codec="fp32",
                               data_to_workers="read", train_rows=train_rows, seed=0, restarts=0)  # fmt: skip


def _reset_peak() -> None:
    """Start this process's resident-memory peak afresh (Linux: a forked worker starts with the peak of
    the process it was forked from)."""
    Path("/proc/self/clear_refs").write_text("5")


def _peak_rss() -> int:
    """The most this process has held in resident memory since :func:`_reset_peak`, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(folder: Path, memory_limit: int = 0, train_rows: str = "auto") -> tuple[list[dict], dict]:
    """One epoch on ``WORKERS`` fresh workers (``memory_limit`` bytes each; 0: none).

    Returns
    -------
    tuple
        The replicas' data reports (see ``Replica.read``, with ``peak_rss_bytes`` of each one's worker
        added) and the run's: the memory limit the workers say they have, steps, seconds, accuracy.
    """
    with connect(n_workers=WORKERS, memory_limit=memory_limit) as handle:
        limits = handle.client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit or 0)
        handle.client.run(_reset_peak)
        result = train_distributed(_config(folder, train_rows), handle=handle)
        peaks = handle.client.run(_peak_rss)
    if result.faults:
        raise RuntimeError(f"a worker was lost: {result.faults[0]['failure']}")
    steps = result.sink.frame(StepRecord)
    steps = int((steps["rank"] == 0).sum()) if len(steps) else 0
    reports = [{**r, "peak_rss_bytes": peaks.get(r["worker"], 0)} for r in result.data]
    train_s = result.final.train_s
    run = {"train_rows": train_rows, "memory_limit_MB": min(limits.values()) / MB,
           "in_file": all(r["in_file"] for r in reports), "steps": steps, "s_per_step": train_s / max(1, steps),
           "epoch_s": train_s, "max_peak_rss_MB": max(r["peak_rss_bytes"] for r in reports) / MB,
           "test_acc": result.final.test_acc}  # fmt: skip
    return reports, run


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Run the suite, print its tables and write ``data.md``, ``data.csv`` and ``data_runs.csv``;
    return the per-replica table."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="adass-bench-data-") as tmp:
        tiny, big = Path(tmp) / "tiny", Path(tmp) / "big"
        write_npy(tiny, 4 * 1024)
        reports, _ = measure(tiny, train_rows="memory")
        build_bytes = max(r["taken_bytes"] for r in reports)  # the tiny data's own share is under 2 MB
        worker_bytes = max(r["rss_bytes"] - r["taken_bytes"] for r in reports)
        test_bytes = TEST_ROWS * (WIDTH * 4 + 8)
        limit = int((worker_bytes + build_bytes + test_bytes) / PAUSE_SHARE)
        limit = -(-limit // 2**24) * 2**24  # whole 16 MiB
        n_train = 64 * 1024 if quick else int(TIMES * limit) // (WIDTH * 4)
        data_bytes = write_npy(big, n_train)
        file_bytes = sum(f.stat().st_size for f in big.iterdir())
        reports, limited = measure(big, limit, "file" if quick else "auto")
        runs = [limited] if quick else [limited, measure(big, 0, "memory")[1]]
    rows = [{"rank": r["rank"], "rows": r["n"], "in_file": r["in_file"], "shard_MB": r["shard_bytes"] / MB,
             "held_MB": r["data_bytes"] / MB, "taken_MB": r["taken_bytes"] / MB,
             "peak_rss_MB": r["peak_rss_bytes"] / MB, "peak_of_limit": r["peak_rss_bytes"] / limit,
             "load_s": r["load_s"]} for r in reports]  # fmt: skip
    table, runs_table = pd.DataFrame(rows)[COLUMNS], pd.DataFrame(runs)[RUN_COLUMNS]
    ratio = ""
    if len(runs) == 2:
        ratio = (f"- A step reading its rows from the file took {runs[0]['s_per_step'] / runs[1]['s_per_step']:.2f}x "
                 "the time of a step on rows held in memory (second row: the same epoch without a limit).")  # fmt: skip
    text = [
        "# adass bench data", "",
        f"A float32 `.npy` data set of {n_train:,} training rows x {WIDTH} features ({data_bytes / MB:.0f} MB; "
        f"{file_bytes / MB:.0f} MB of files with the test split), {WORKERS} workers of an embedded LocalCluster "
        f"with Dask's memory limit of {limit / MB:.0f} MB each, `--data-to-workers read`, one epoch of `logreg` "
        f"(global batch {BATCH}) on the ring; host with {os.cpu_count()} CPUs; "
        f"{time.perf_counter() - start:.0f} s in all.", "",
        f"- A worker holds {worker_bytes / MB:.0f} MB before any data, and building a replica takes "
        f"{build_bytes / MB:.0f} MB more (measured on a tiny data set).",
        f"- The training split is {data_bytes / limit:.2f}x the memory limit; one shard is "
        f"{data_bytes / WORKERS / limit:.2f}x it.",
        f"- Every replica's worker peaked at {max(table['peak_of_limit']):.2f}x the limit or less (Dask pauses a "
        f"worker at 0.80x and restarts it at 0.95x); no worker was lost; test accuracy {limited['test_acc']:.4f}.",
        *([ratio] if ratio else []), "",
        markdown_table(table), "", markdown_table(runs_table), "",
    ]  # fmt: skip
    write_report(out_dir, "data", text, {"data": table, "data_runs": runs_table})
    return table
