"""``adass bench faults --netlab RATE``: a worker killed mid-epoch across the hosts of a network lab and
replaced on its host, per seed: steps redone, seconds lost and final accuracy against the lab's
uninterrupted run with the same seed.

The lab has 4 hosts, one Dask worker on each (the scheduler and the client on host 0), every link
shaped to RATE. A lab worker has no nanny: the suite starts the replacement itself, on the killed
worker's host, as soon as the kill is done. Rank 0 sleeps ``STRAGGLE_S`` a step (``--straggler``) so
that an epoch outlasts the kill and the restart's plan. The lab is taken down at the end, also on
failure or interrupt. Writes ``faults_lab.md`` and ``faults_lab.csv``.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ...config import RunConfig
from ...failures import one_line
from ...netlab import LabState, lab_down, lab_up, signal_process, start_cluster, start_worker
from ...tables import markdown_table
from . import write_report
from .faults import fault_row, last_accuracy, published, run_options, train_flags, wait_for

__all__ = ["run"]

SUITE = "faults_lab"
HOSTS = 4
VICTIM_HOST = 3
STRAGGLE_S = 0.03


def _options(quick: bool, seed: int, commits: int) -> list[str]:
    """The embedded suite's run on the lab's hosts, with a restart allowed and rank 0 slowed."""
    changes = {"workers": HOSTS, "commit_steps": commits, "restarts": 1, "timeout_s": 120,
               "straggler": f"0:{STRAGGLE_S}"}  # fmt: skip
    return train_flags({**run_options(quick, seed), **changes})


def _client(state: LabState, address: str, options: list[str], out: Path) -> list[str]:
    return ["ip", "netns", "exec", state.hosts[0].netns, sys.executable, "-m", "adass.cli", "train", *options,
            "--scheduler", address, "--out", str(out)]  # fmt: skip


def _killed(state: LabState, address: str, options: list[str], run: Path, after_s: float, name: str) -> float:
    """The run with the worker on ``VICTIM_HOST`` killed ``after_s`` after the first checkpoint and a
    replacement ``name`` started there; returns its wall seconds (RuntimeError where it failed)."""
    start = time.time()
    with open(run.parent / f"{run.name}.log", "w") as log:
        proc = subprocess.Popen(_client(state, address, options, run), stdout=log, stderr=log,
                                start_new_session=True)  # fmt: skip
        try:
            reached = wait_for(lambda: published(run)[0] >= 0, proc)
            time.sleep(after_s)
            if not reached or proc.poll() is not None:
                raise RuntimeError("the run ended before the kill point")
            victim = next(
                p for p in reversed(state.processes) if p.role == "worker" and p.host == VICTIM_HOST
            )
            signal_process(state, victim, signal.SIGKILL)
            start_worker(state, VICTIM_HOST, name, timeout_s=60)
            if proc.wait(timeout=900) != 0:
                raise RuntimeError((run.parent / f"{run.name}.log").read_text().strip()[-300:])
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # ours, by its PID
                proc.wait()
    return time.time() - start


def _seed_rows(state: LabState, address: str, out: Path, seed: int, quick: bool, commits: int,
               rate: str) -> list[dict[str, Any]]:  # fmt: skip
    options = _options(quick, seed, commits)
    straight_run = out / f"lab-uninterrupted-seed{seed}"
    start = time.time()
    done = subprocess.run(_client(state, address, options, straight_run), capture_output=True, text=True,
                          timeout=900)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the lab's uninterrupted run failed: {done.stderr.strip()[-300:]}")
    straight_s = time.time() - start
    train_s = pd.read_parquet(straight_run / "eval.parquet")["train_s"].tolist()
    after_s = 0.5 * (train_s[1] - train_s[0])  # half of epoch 1
    run = out / f"lab-worker-killed-seed{seed}"
    point = f"mid-epoch, network lab at {rate}, replaced on its host"
    uninterrupted = last_accuracy(straight_run)
    try:
        wall_s = _killed(state, address, options, run, after_s, f"replacement-{secrets.token_hex(3)}")
    except Exception as err:  # noqa: BLE001 - the faulted run's failure is its row
        return [fault_row("worker_killed", seed, point, uninterrupted_acc=uninterrupted,
                          outcome=f"failed: {one_line(err)}")]  # fmt: skip
    (fault,) = json.loads((run / "faults.json").read_text())
    return [fault_row("worker_killed", seed, point, steps_redone=fault.get("steps_redone", float("nan")),
                      seconds_lost=wall_s - straight_s, final_acc=last_accuracy(run), uninterrupted_acc=uninterrupted,
                      outcome=f"killed {after_s:.2f} s after checkpoint 0; went on from its "
                      f"{fault.get('recovered_from')} at step {fault.get('resumed_at_step')} (lost at "
                      f"{fault.get('lost_at_step')}) on {fault.get('workers_after')} workers")]  # fmt: skip


def run(out_dir: Path, quick: bool = False, seeds: int | None = None, netlab: str = "1gbit") -> pd.DataFrame:
    """Run the lab's rows, print them, write ``faults_lab.md`` and ``faults_lab.csv``.

    Parameters
    ----------
    out_dir : Path
        Folder for the report and the runs' folders.
    quick : bool
        4 epochs of 1,200 samples and one seed.
    seeds : int, optional
        Seeds (default 3; 1 with ``quick``).
    netlab : str
        The lab's link rate (``1gbit``, ``100mbit``, ...).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = seeds or (1 if quick else 3)
    commits = RunConfig.from_flat().cluster.commit_steps
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="adass-bench-faults-lab-") as tmp:
        state = lab_up(HOSTS, netlab, f"faults{secrets.token_hex(3)}", Path(tmp))
        try:
            address = start_cluster(state, workers=HOSTS, timeout_s=180)
            # a first run warms the workers (imports, first allocations), so the timed runs compare
            warm = [*_options(True, 0, commits), "--epochs", "1"]
            subprocess.run(
                _client(state, address, warm, out_dir / "lab-warm-up"), capture_output=True, timeout=900
            )
            for seed in range(seeds):
                rows += _seed_rows(state, address, out_dir, seed, quick, commits, netlab)
        finally:
            lab_down(state)
    table = pd.DataFrame(rows)
    table["acc_vs_uninterrupted"] = table["final_acc"] - table["uninterrupted_acc"]
    lines = ["# Faults across a network lab: a worker killed mid-epoch and replaced", "",
             f"{HOSTS} lab hosts at {netlab}, one Dask worker each; {seeds} seed(s); --commit-steps {commits} "
             f"(the default); rank 0 sleeps {STRAGGLE_S * 1000:.0f} ms a step.", "", markdown_table(table)]  # fmt: skip
    write_report(out_dir, SUITE, lines, {SUITE: table})
    return table
