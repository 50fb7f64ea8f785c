"""``adass bench faults``: kill a worker, the client and the scheduler at points of a run; how fast the
fault is seen, how much work it costs and whether the run still ends where the uninterrupted one does.

Every run is ``adass train`` on 3 workers. A killed worker is replaced by its nanny and the run
restarts from its last checkpoint by itself; a killed client is resumed with ``--resume``; a killed
external scheduler ends the run with one line (detection only: a new scheduler means a new cluster).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ...runtime.cluster.worker_processes import dask_processes
from ...tables import markdown_table
from . import write_report

__all__ = ["run"]

SUITE = "faults"
_POLL_S = 0.005


def _options(quick: bool) -> dict[str, Any]:
    n, epochs = (600, 4) if quick else (3000, 8)
    return {"data": f"synthetic:n={n},d=10,classes=4,test=400", "model": "mlp:hidden=32", "batch_size": 32,
            "lr": 0.1, "schedule": "constant", "workers": 3, "epochs": epochs}  # fmt: skip


def _flags(options: dict[str, Any]) -> list[str]:
    return [text for k, v in options.items() for text in (f"--{k.replace('_', '-')}", str(v))] + ["--quiet"]


def _train(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "adass.cli", "train", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip


def _pointer(run: Path) -> tuple[int, float]:
    """The last published epoch (-1: none) and when it was published."""
    path = run / "checkpoints" / "latest.json"
    try:
        return int(json.loads(path.read_text())["epoch"]), path.stat().st_mtime
    except (OSError, ValueError, KeyError):
        return -1, float("nan")


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen, timeout_s: float = 600) -> bool:
    deadline = time.time() + timeout_s
    while not condition():
        if proc.poll() is not None or time.time() > deadline:
            return False
        time.sleep(_POLL_S)
    return True


def _final_acc(run: Path) -> float:
    try:
        return float(pd.read_parquet(run / "eval.parquet")["test_acc"].iloc[-1])
    except (OSError, IndexError, ValueError):
        return float("nan")


def _row(fault: str, point: str, **values: Any) -> dict[str, Any]:
    base = {"fault": fault, "point": point, "detection_s": float("nan"), "work_lost_s": float("nan"),
            "final_acc": float("nan"), "outcome": ""}  # fmt: skip
    return {**base, **values}


def _kill_worker(out: Path, options: dict[str, Any], epoch: int) -> dict[str, Any]:
    """Kill rank 1's worker while epoch ``epoch + 1`` runs (in this process, to know the pid and time)."""
    from ...config import RunConfig
    from ...data import load_dataset, standardization_record
    from ...metrics import ParquetSink
    from ...runtime.cluster import connect, train_distributed

    config = RunConfig.from_flat(**options)
    run_dir, killed, published = out / f"worker-{epoch}", {}, {}
    with connect(n_workers=3) as handle:
        pids = handle.client.run(os.getpid)
        victim = pids[handle.workers()[1]]

        def progress(record: Any) -> None:
            published.setdefault("at", []).append(time.time())
            if record.epoch == epoch and not killed:
                killed["at"] = time.time() + 0.1
                threading.Timer(0.1, os.kill, (victim, signal.SIGKILL)).start()

        data = load_dataset(config.data.data, seed=config.optim.seed)
        record = {**config.to_dict(), "standardization": standardization_record(data)}
        result = train_distributed(config, sink=ParquetSink(run_dir, record), progress=progress,
                                   checkpoint_dir=run_dir, handle=handle)  # fmt: skip
    fault = result.faults[0] if result.faults else {}
    at = fault.get("at_unix_s", float("nan"))
    before = [t for t in published.get("at", []) if t <= at]  # the last checkpoint before the fault
    return _row("worker", f"during epoch {epoch + 1}", detection_s=at - killed.get("at", float("nan")),
                work_lost_s=at - (before[-1] if before else float("nan")), final_acc=result.final.test_acc,
                outcome=f"restarted from epoch {fault.get('resumed_from_epoch')}")  # fmt: skip


def _kill_client(out: Path, args: list[str], point: str, when: Callable[[Path], bool]) -> dict[str, Any]:
    run_dir = out / f"client-{point.replace(' ', '-')}"
    proc = _train([*args, "--out", str(run_dir)])
    reached = _wait_for(lambda: when(run_dir), proc)
    killed_at = time.time()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if not reached:
        return _row("client", point, outcome="the run ended before the kill point")
    checkpoint_epoch, published_at = _pointer(run_dir)
    epochs = args[args.index("--epochs") + 1]
    resume = _train(["--resume", str(run_dir), "--epochs", epochs, "--quiet"])
    _, err = resume.communicate()
    outcome = f"resumed from epoch {checkpoint_epoch}" if resume.returncode == 0 else err.strip()[-200:]
    return _row(
        "client", point, work_lost_s=killed_at - published_at, final_acc=_final_acc(run_dir), outcome=outcome
    )


def _kill_scheduler(out: Path, args: list[str], epoch: int) -> dict[str, Any]:
    """An external scheduler killed after epoch ``epoch``: how long until the run ends, and how."""
    folder = Path(tempfile.mkdtemp(prefix="adass-faults-", dir=out))
    with dask_processes(folder, workers=3) as lab:
        run_dir = folder / "run"
        proc = _train([*args, "--scheduler", lab.address, "--out", str(run_dir)])
        if not _wait_for(lambda: _pointer(run_dir)[0] >= epoch, proc):
            return _row("scheduler", f"after epoch {epoch}", outcome="the run ended before the kill point")
        killed_at = time.time()
        os.killpg(lab.scheduler.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=900)
        lines = err.strip().splitlines()
        return _row("scheduler", f"after epoch {epoch}", detection_s=time.time() - killed_at,
                    outcome=f"exit {proc.returncode}: {lines[-1][:160] if lines else ''}")  # fmt: skip


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Run the suite, print its table, write ``faults.md`` and ``faults.csv``.

    Parameters
    ----------
    out_dir : Path
        Folder for the report and the runs' folders (created if missing).
    quick : bool
        A small run of 4 epochs (a few minutes), for smoke tests.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    options = _options(quick)
    args = _flags(options)
    straight = out_dir / "uninterrupted"
    start = time.time()
    proc = _train([*args, "--out", str(straight)])
    proc.communicate()
    baseline, straight_s = _final_acc(straight), time.time() - start
    rows = [
        _row(
            "none",
            "uninterrupted",
            final_acc=baseline,
            outcome=f"exit {proc.returncode} in {straight_s:.0f} s",
        )
    ]
    rows += [_kill_worker(out_dir, options, epoch) for epoch in (0, 1)]
    client_points = {
        "in checkpoint window 1": lambda run: (run / "checkpoints" / "epoch-000001").exists(),
        "after checkpoint 1": lambda run: _pointer(run)[0] >= 1,
        "during epoch 3": lambda run: _pointer(run)[0] >= 2,
    }
    rows += [_kill_client(out_dir, args, point, when) for point, when in client_points.items()]
    rows.append(_kill_scheduler(out_dir, args, 1))
    table = pd.DataFrame(rows)
    table["acc_vs_uninterrupted"] = table["final_acc"] - baseline
    lines = ["# Faults: detection, work lost, final accuracy", "",
             f"3 workers, {options['epochs']} epochs; accuracy of the uninterrupted run {baseline:.4f}.",
             "detection_s: from the kill to the run's own report of it; work_lost_s: from the last checkpoint "
             "to the fault.", "", markdown_table(table)]  # fmt: skip
    write_report(out_dir, SUITE, lines, {SUITE: table})
    return table
