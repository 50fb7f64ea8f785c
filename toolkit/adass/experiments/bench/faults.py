"""``adass bench faults``: kill a worker, the client and the scheduler at points of a run; how fast the
fault is seen, how many steps and seconds it costs and whether the run still ends where the
uninterrupted one with the same seed does.

Every run is ``adass train`` on 4 workers. A killed worker is replaced by its nanny and the run goes
on by itself: from the survivors' last in-memory commit inside the epoch (``--commit-steps``, its
default), and beside it with commits off (``--commit-steps 0``: the epoch again from its checkpoint).
A worker that starts mid-run on an external cluster is taken in at the next commit point
(``--max-workers``); a killed PS server shard (``ps:update=server``) goes on from its last commit,
which a replica kept a copy of. A killed client is resumed with ``--resume``; a killed external scheduler ends the run with one line
(detection only: a new scheduler means a new cluster). ``faults.csv`` has one row per fault and seed.
"""

from __future__ import annotations

import contextlib
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

from ...config import RunConfig, flag_for
from ...failures import one_line
from ...metrics import StepRecord
from ...runtime.cluster.worker_processes import dask_processes
from ...tables import markdown_table
from . import write_report

__all__ = ["run"]

SUITE = "faults"
_POLL_S = 0.005


WORKERS = 4
_HUNG_DETECT_S = 10.0


def run_options(quick: bool, seed: int) -> dict[str, Any]:
    """The suite's run (the network lab's too, :mod:`.faults_lab`), as ``train`` options."""
    n, epochs = (1200, 4) if quick else (4000, 6)
    return {"data": f"synthetic:n={n},d=10,classes=4,test=1000", "model": "mlp:hidden=32", "batch_size": 32,
            "lr": 0.1, "schedule": "constant", "workers": WORKERS, "epochs": epochs, "seed": seed}  # fmt: skip


def train_flags(options: dict[str, Any]) -> list[str]:
    """``options`` as the flags of a quiet ``adass train`` command."""
    return [text for k, v in options.items() for text in (flag_for(k), str(v))] + ["--quiet"]


def _train(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "adass.cli", "train", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip


def published(run: Path) -> tuple[int, float]:
    """The last published epoch (-1: none) and when it was published."""
    path = run / "checkpoints" / "latest.json"
    try:
        return int(json.loads(path.read_text())["epoch"]), path.stat().st_mtime
    except (OSError, ValueError, KeyError):
        return -1, float("nan")


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen, timeout_s: float = 600) -> bool:
    deadline = time.time() + timeout_s
    while not condition():
        if proc.poll() is not None or time.time() > deadline:
            return False
        time.sleep(_POLL_S)
    return True


def last_accuracy(run: Path) -> float:
    """The test accuracy of the run's last evaluated epoch (NaN where there is none)."""
    try:
        return float(pd.read_parquet(run / "eval.parquet")["test_acc"].iloc[-1])
    except (OSError, IndexError, ValueError):
        return float("nan")


def fault_row(fault: str, seed: int, point: str, **values: Any) -> dict[str, Any]:
    """One row of ``faults.csv`` (of ``faults_lab.csv`` too): ``values`` over NaN and an empty outcome."""
    nan = float("nan")
    base = {"fault": fault, "seed": seed, "point": point, "steps_redone": nan, "seconds_lost": nan,
            "final_acc": nan, "uninterrupted_acc": nan, "detection_s": nan, "outcome": ""}  # fmt: skip
    return {**base, **values}


def _distributed(handle: Any, out: Path, options: dict[str, Any], progress: Callable[[Any], None]) -> Any:
    """One run on the cluster ``handle``: its checkpoints and faults.json under ``out``, its records in
    the result (what the rows read)."""
    from ...runtime.cluster import train_distributed

    return train_distributed(
        RunConfig.from_flat(**options), progress=progress, checkpoint_dir=out, handle=handle
    )


def _uninterrupted(handle: Any, out: Path, options: dict[str, Any]) -> tuple[Any, float, list[float]]:
    """The run without a fault: its result, its wall seconds and when each epoch ended."""
    ended: list[float] = []
    start = time.time()
    result = _distributed(handle, out, options, lambda record: ended.append(time.time()))
    return result, time.time() - start, ended


def _kill_worker(handle: Any, out: Path, options: dict[str, Any], delay_s: float, straight: tuple,
                 sig: int = signal.SIGKILL, rank: int = 1, name: str = "") -> dict:  # fmt: skip
    """Kill rank ``rank``'s worker ``delay_s`` after epoch 0's checkpoint (half of epoch 1's time in
    the uninterrupted run: inside epoch 1, or a later one where this run goes faster); with ``sig``
    SIGSTOP it hangs instead (and is killed once the run is over). ``name``: the row's fault."""
    baseline, baseline_s, _ = straight
    pids = handle.client.run(os.getpid)
    victim = pids[handle.workers()[rank]]
    killed: dict[str, float] = {}

    def progress(record: Any) -> None:
        if record.epoch == 0 and not killed:
            killed["at"] = time.time() + delay_s
            threading.Timer(delay_s, os.kill, (victim, sig)).start()

    start = time.time()
    try:
        result = _distributed(handle, out, options, progress)
    finally:
        if sig != signal.SIGKILL:  # the stopped worker process, ours, by its PID
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
    wall_s = time.time() - start
    fault = result.faults[0] if result.faults else {}
    commits = options["commit_steps"]
    point = f"mid-epoch, --commit-steps {commits}"
    name = name or ("worker_killed" if sig == signal.SIGKILL else "worker_hung")
    return fault_row(name, options["seed"], point, steps_redone=fault.get("steps_redone", float("nan")),
                seconds_lost=wall_s - baseline_s, final_acc=result.final.test_acc,
                uninterrupted_acc=baseline.final.test_acc,
                detection_s=fault.get("at_unix_s", float("nan")) - killed.get("at", float("nan")),
                outcome=f"rank {rank} {name.split('_')[1]} {delay_s:.2f} s after checkpoint 0; went on from its {fault.get('recovered_from', '?')} "
                f"at step {fault.get('resumed_at_step', '?')} (lost at {fault.get('lost_at_step', '?')})")  # fmt: skip


def _kill_server(out: Path, options: dict[str, Any], commits: int, delay_s: float) -> list[dict[str, Any]]:
    """A PS whose server shard owns the parameters and the optimizer state (``update=server``; 3
    replicas and the server on the 4 workers): its uninterrupted run, and the server's worker killed
    mid-epoch 1 (it goes on from the shard's commit, which a replica kept a copy of)."""
    from ...runtime.cluster import connect

    seed = options["seed"]
    ps = {
        **options,
        "workers": WORKERS - 1,
        "exchange": "ps:servers=1,update=server",
        "commit_steps": commits,
    }
    with connect(n_workers=WORKERS) as handle:
        _distributed(handle, out / f"warm-up-ps-seed{seed}", {**ps, "epochs": 2}, lambda record: None)
        straight = _uninterrupted(handle, out / f"uninterrupted-ps-seed{seed}", ps)
        return [fault_row("none", seed, "uninterrupted, ps:update=server", steps_redone=0, seconds_lost=0.0,
                     final_acc=straight[0].final.test_acc, uninterrupted_acc=straight[0].final.test_acc,
                     outcome=f"{straight[1]:.1f} s on the open cluster"),
                _kill_worker(handle, out / f"server-killed-seed{seed}", ps, delay_s, straight,
                             rank=WORKERS - 1, name="server_killed")]  # fmt: skip


def _hang_worker(
    out_dir: Path, options: dict[str, Any], commits: int, delay_s: float, straight: tuple
) -> dict:
    """Stop rank 1's worker (SIGSTOP) mid-run on a cluster that counts a worker lost after 10 s
    without a heartbeat."""
    from ...runtime.cluster import connect

    seed = options["seed"]
    with connect(n_workers=WORKERS, detect_s=_HUNG_DETECT_S) as handle:
        handle.client.wait_for_workers(WORKERS, timeout=120)
        _distributed(handle, out_dir / f"warm-up-hung-seed{seed}", {**options, "epochs": 2}, lambda r: None)
        hung = {**options, "commit_steps": commits, "detect_s": _HUNG_DETECT_S, "timeout_s": 60.0}
        return _kill_worker(
            handle, out_dir / f"worker-hung-seed{seed}", hung, delay_s, straight, signal.SIGSTOP
        )


def _guarded(fault: str, seed: int, measure: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``measure(*args)``, one fault's row; a fault the run did not survive is a row that says why,
    not the suite's end."""
    try:
        return measure(*args)
    except Exception as err:  # noqa: BLE001 - any failure of the measured run is its outcome
        return fault_row(fault, seed, "", outcome=f"failed: {one_line(err)}")


def _worker_joins(out: Path, options: dict[str, Any], straight: tuple) -> dict[str, Any]:
    """A run on 3 of 4 workers of an external cluster; a 4th worker starts when epoch 0 ends and is
    taken in at the next commit point once it is up (``--max-workers 4``). Rank 0 sleeps 50 ms a
    step (``--straggler``), so that the run outlasts the worker's start."""
    from ...runtime.cluster import connect

    folder = Path(tempfile.mkdtemp(prefix="adass-faults-", dir=out))
    began: dict[str, float] = {}
    with dask_processes(folder, workers=WORKERS - 1) as lab:
        changes = {**options, "workers": WORKERS - 1, "max_workers": WORKERS, "scheduler": lab.address,
                   "straggler": "0:0.05"}  # fmt: skip
        with connect(lab.address, n_workers=WORKERS - 1) as handle:

            def start() -> None:
                lab.add_worker()
                with contextlib.suppress(Exception):  # the run may end first: the row says so
                    handle.client.wait_for_workers(WORKERS, timeout=120)
                    began["ready"] = time.time()

            def progress(record: Any) -> None:
                if record.epoch == 0 and not began:
                    began["at"] = time.time()
                    threading.Thread(target=start, daemon=True).start()

            result = _distributed(handle, folder / "run", changes, progress)
    point = f"started after epoch 0, {WORKERS - 1} -> {WORKERS} workers"
    joined = next((f for f in result.faults if f.get("joined")), None)
    if joined is None:
        return fault_row("worker_joins", options["seed"], point, final_acc=result.final.test_acc,
                    uninterrupted_acc=straight[0].final.test_acc,
                    outcome="not taken in: the run ended before the worker was up")  # fmt: skip
    steps = result.sink.frame(StepRecord)
    new_rank = steps[steps["rank"] == WORKERS - 1]
    where = (f"at step {joined['joined_at_step']} (a commit point)" if "joined_at_step" in joined
             else f"as epoch {joined['resumed_from_epoch'] + 1} began")  # fmt: skip
    return fault_row("worker_joins", options["seed"], point, steps_redone=joined.get("steps_redone", 0),
                final_acc=result.final.test_acc, uninterrupted_acc=straight[0].final.test_acc,
                detection_s=joined["at_unix_s"] - began.get("ready", float("nan")),
                outcome=f"taken in {where}; rank {WORKERS - 1}'s first step: {int(new_rank['step'].min())} "
                f"(epoch {int(new_rank['epoch'].min())}); the worker took "
                f"{began.get('ready', float('nan')) - began['at']:.1f} s to start")  # fmt: skip


def _kill_client(out: Path, args: list[str], point: str, when: Callable[[Path], bool], seed: int,
                 straight: tuple) -> dict[str, Any]:  # fmt: skip
    """Kill the client at ``point`` and resume it: the two commands' wall time against the run's."""
    run_dir = out / f"client-{point.replace(' ', '-')}-seed{seed}"
    start = time.time()
    proc = _train([*args, "--out", str(run_dir)])
    reached = wait_for(lambda: when(run_dir), proc)
    killed_at = time.time()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    baseline = straight[0].final.test_acc
    if not reached:
        return fault_row("client_killed", seed, point, outcome="the run ended before the kill point")
    checkpoint_epoch, published_at = published(run_dir)
    epochs = args[args.index("--epochs") + 1]
    resume = _train(["--resume", str(run_dir), "--epochs", epochs, "--quiet"])
    _, err = resume.communicate()
    outcome = f"resumed from epoch {checkpoint_epoch}" if resume.returncode == 0 else err.strip()[-200:]
    outcome += f"; {killed_at - published_at:.2f} s of work since that checkpoint"
    return fault_row("client_killed", seed, point, seconds_lost=time.time() - start - straight[1],
                final_acc=last_accuracy(run_dir), uninterrupted_acc=baseline, outcome=outcome)  # fmt: skip


def _kill_scheduler(out: Path, args: list[str], epoch: int, seed: int) -> dict[str, Any]:
    """An external scheduler killed after epoch ``epoch``: how long until the run ends, and how."""
    folder = Path(tempfile.mkdtemp(prefix="adass-faults-", dir=out))
    with dask_processes(folder, workers=WORKERS) as lab:
        run_dir = folder / "run"
        proc = _train([*args, "--scheduler", lab.address, "--out", str(run_dir)])
        if not wait_for(lambda: published(run_dir)[0] >= epoch, proc):
            return fault_row(
                "scheduler_killed",
                seed,
                f"after epoch {epoch}",
                outcome="the run ended before the kill point",
            )
        killed_at = time.time()
        os.killpg(lab.scheduler.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=900)
        lines = err.strip().splitlines()
        return fault_row("scheduler_killed", seed, f"after epoch {epoch}", detection_s=time.time() - killed_at,
                    outcome=f"exit {proc.returncode}: {lines[-1][:160] if lines else ''}")  # fmt: skip


def run(out_dir: Path, quick: bool = False, seeds: int | None = None) -> pd.DataFrame:
    """Run the suite, print its tables, write ``faults.md`` and ``faults.csv`` (``--netlab`` runs
    :mod:`.faults_lab` instead).

    Parameters
    ----------
    out_dir : Path
        Folder for the report and the runs' folders (created if missing).
    quick : bool
        A small run (4 epochs of 1,200 samples, one seed: a few minutes), for smoke tests.
    seeds : int, optional
        Seeds of every fault (default 3; 1 with ``quick``).
    """
    from ...runtime.cluster import connect

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = seeds or (1 if quick else 3)
    commits = 0
    rows = []
    for seed in range(seeds):
        options = run_options(quick, seed)
        commits = RunConfig.from_flat(**options).cluster.commit_steps
        with connect(n_workers=WORKERS) as handle:  # its own cluster: a killed worker's nanny replaces it
            # a first run warms the workers (imports, first allocations), so the timed runs compare
            _distributed(
                handle, out_dir / f"warm-up-seed{seed}", {**options, "epochs": 2}, lambda record: None
            )
            straight = _uninterrupted(handle, out_dir / f"uninterrupted-seed{seed}", options)
            result, straight_s, ended = straight
            delay = 0.5 * (ended[1] - ended[0])  # half of epoch 1
            killed = [
                _guarded("worker_killed", seed, _kill_worker, handle, out_dir / f"worker-k{k}-seed{seed}",
                         {**options, "commit_steps": k}, delay, straight)
                for k in (commits, 0)
            ]  # fmt: skip
        # a hung worker is lost once it misses --detect-s of heartbeats: a cluster that waits 10 s
        killed.append(_guarded("worker_hung", seed, _hang_worker, out_dir, options, commits, delay, straight))
        try:
            servers = _kill_server(out_dir, options, commits, delay)
        except Exception as err:  # noqa: BLE001 - the measured run's failure is its outcome
            servers = [fault_row("server_killed", seed, "", outcome=f"failed: {one_line(err)}")]
        args = train_flags(options)
        # the client's faults are commands of their own (each starts its cluster): so is their baseline
        start = time.time()
        command = _train([*args, "--out", str(out_dir / f"uninterrupted-command-seed{seed}")])
        command.communicate()
        command_s = time.time() - start
        rows.append(fault_row("none", seed, "uninterrupted", steps_redone=0, seconds_lost=0.0,
                         final_acc=result.final.test_acc, uninterrupted_acc=result.final.test_acc,
                         outcome=f"{straight_s:.1f} s on the open cluster; {command_s:.1f} s as a command"))  # fmt: skip
        rows += killed + servers
        rows.append(_guarded("worker_joins", seed, _worker_joins, out_dir, options, (result, straight_s)))
        client_points = {"during epoch 3": lambda run: published(run)[0] >= 2}
        if seed == 0:
            client_points = {"in checkpoint window 1": lambda run: (run / "checkpoints" / "epoch-000001").exists(),
                             "after checkpoint 1": lambda run: published(run)[0] >= 1, **client_points}  # fmt: skip
        baseline = (result, command_s)
        rows += [_guarded("client_killed", seed, _kill_client, out_dir, args, point, when, seed, baseline)
                 for point, when in client_points.items()]  # fmt: skip
        if seed == 0:
            rows.append(_guarded("scheduler_killed", seed, _kill_scheduler, out_dir, args, 1, seed))
    table = pd.DataFrame(rows)
    table["acc_vs_uninterrupted"] = table["final_acc"] - table["uninterrupted_acc"]
    summary = _summary(table)
    lines = ["# Faults: steps redone, seconds lost, final accuracy", "",
             f"{WORKERS} workers of an embedded LocalCluster, {options['epochs']} epochs of "
             f"`{options['data']}` (`{options['model']}`, batch {options['batch_size']}), {seeds} seed(s); "
             f"--commit-steps {commits} is the default.",
             "steps_redone: steps done again after the fault (from the faults.json of the run); seconds_lost: "
             "the faulted run's wall time (a killed client: both commands') less the uninterrupted run's "
             "with the same seed; detection_s: from the kill to the run's own report of it.", "",
             "Per fault, over the seeds (mean, and the largest steps redone):", "", markdown_table(summary), "",
             markdown_table(table)]  # fmt: skip
    write_report(out_dir, SUITE, lines, {SUITE: table})
    return table


def _summary(table: pd.DataFrame) -> pd.DataFrame:
    grouped = table.groupby(["fault", "point"], sort=False)
    return grouped.agg(seeds=("seed", "count"), steps_redone=("steps_redone", "mean"),
                       max_steps_redone=("steps_redone", "max"), seconds_lost=("seconds_lost", "mean"),
                       acc_vs_uninterrupted=("acc_vs_uninterrupted", "mean")).reset_index()  # fmt: skip
