"""A run on lab hosts that share no folder: data served over HTTP from a host of its own, checkpoints
written by the client, and a worker killed mid-run survived.

The test's folder is empty for every lab worker (``start_cluster(hide=[folder])``), so neither the
data file nor the client's ``--out`` (both in it) is on the workers' hosts. The replicas read their
shards from the web server (``--data-to-workers read``: reading is the only way they get data), and ``--checkpoint-writer auto`` finds that they cannot see ``--out``, so the
client writes every replica's file. The run ends with the loopback run's parameters; one that loses a
worker (a lab worker has no nanny: it is gone for good) goes on from its last checkpoint on the three
left and keeps its accuracy.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from lab_cases import lab, web_server

from adass.netlab import signal_process, start_cluster, start_worker
from adass.runtime.cluster import read_checkpoint

pytestmark = pytest.mark.netlab

HOSTS = 5  # the scheduler, the client and worker 0 on host 0; workers 1..3 on hosts 1..3; the data on host 4
DATA_HOST = 4
RUN = ["--model", "mlp:hidden=16", "--batch-size", "32", "--epochs", "5", "--lr", "0.1", "--schedule", "constant",
       "--seed", "5", "--workers", "4", "--exchange", "ring", "--quiet", "--timeout-s", "120"]  # fmt: skip


def _write_npy(folder: Path) -> None:
    """Three separable classes: 800 training rows, 1000 test rows (0.1 points a test sample)."""
    rng = np.random.default_rng(7)
    centres = rng.normal(scale=3.0, size=(3, 8))
    for split, n in (("train", 800), ("test", 1000)):
        y = np.arange(n) % 3
        np.save(folder / f"x_{split}.npy", (centres[y] + rng.normal(size=(n, 8))).astype(np.float32))
        np.save(folder / f"y_{split}.npy", y.astype(np.int64))


def _weights(run: Path, rank: int) -> dict[str, torch.Tensor]:
    return torch.load(read_checkpoint(run).folder / f"rank{rank}.pt", weights_only=True)["model"]


def _pointer_epoch(run: Path) -> int:
    try:
        return json.loads((run / "checkpoints" / "latest.json").read_text())["epoch"]
    except (OSError, ValueError, KeyError):
        return -1


@pytest.fixture(scope="module")
def lab_run():
    """The lab (the test's folder hidden from its workers, a web server on the data host) and its
    uninterrupted run."""
    root = Path(tempfile.mkdtemp(prefix="adass-lab-"))
    try:
        data = root / "data"
        data.mkdir()
        _write_npy(data)
        with lab(root / "state", hosts=HOSTS, rate="1gbit") as state:
            address = start_cluster(state, workers=4, timeout_s=180, hide=[root])
            with web_server(state, DATA_HOST, data, root / "web.log") as url:
                client = ["ip", "netns", "exec", state.hosts[0].netns, sys.executable, "-m", "adass.cli", "train",
                          *RUN, "--data", f"npy:{url}", "--data-to-workers", "read", "--scheduler", address]  # fmt: skip
                done = subprocess.run([*client, "--out", str(root / "lab")], capture_output=True, text=True,
                                      timeout=600)  # fmt: skip
                assert done.returncode == 0, done.stderr[-2000:]
                yield state, root, client
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_workers_read_their_shards_over_http_and_the_client_writes_checkpoints_as_loopback_ends(lab_run):
    state, root, _ = lab_run
    workers = [p for p in state.processes if p.role == "worker"]
    for entry in workers:  # the lab's workers really do not see the test's folder
        assert not Path(f"/proc/{entry.pid}/root{root / 'data' / 'x_train.npy'}").exists(), entry.host
        assert not Path(f"/proc/{entry.pid}/root{root / 'lab'}").exists(), entry.host
    asked = [line.split() for line in (root / "web.log").read_text().splitlines() if "x_train.npy" in line]
    for entry in workers:  # each worker read its rows itself, by range requests
        here = state.hosts[entry.host].address
        assert any(words[0] == here and words[-1] == "206" for words in asked), (here, asked)

    loopback = [sys.executable, "-m", "adass.cli", "train", *RUN, "--data", f"npy:{root / 'data'}",
                "--out", str(root / "loopback")]  # fmt: skip
    done = subprocess.run(loopback, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lab_eval, loop_eval = (pd.read_parquet(root / d / "eval.parquet") for d in ("lab", "loopback"))
    assert lab_eval["test_acc"].tolist() == loop_eval["test_acc"].tolist()
    assert (
        read_checkpoint(root / "lab").epoch == 4
    )  # every epoch's checkpoint, in a folder only the client sees
    for rank in range(4):
        a, b = _weights(root / "lab", rank), _weights(root / "loopback", rank)
        for key in a:
            assert torch.equal(a[key], b[key]), (rank, key)


def _kill_a_worker_mid_run(lab_run, name: str, host: int, options: list[str], after_s: float = 0.0,
                           then=None) -> list[dict]:  # fmt: skip
    """Run the lab's client with ``options``, kill the worker on ``host`` ``after_s`` after the first
    checkpoint (by its recorded PID), call ``then()``; return the run's faults.json once it ended."""
    state, root, client = lab_run
    run = root / name
    log = open(root / f"{name}.log", "w")
    proc = subprocess.Popen(
        [*client, "--out", str(run), *options], stdout=log, stderr=log, start_new_session=True
    )
    victim = next(p for p in state.processes if p.role == "worker" and p.host == host)
    try:
        deadline = time.monotonic() + 300
        while _pointer_epoch(run) < 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(after_s)
        assert proc.poll() is None, "the run ended before the kill point"
        assert signal_process(state, victim, signal.SIGKILL)
        if then is not None:
            then()
        assert proc.wait(timeout=300) == 0, (root / f"{name}.log").read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    return json.loads((run / "faults.json").read_text())


def test_a_worker_killed_mid_epoch_and_replaced_costs_the_steps_since_the_last_commit(lab_run):
    """Rank 3's worker is killed inside epoch 1 and a replacement starts on the same host: the run goes
    on from the survivors' last commit (every 5 steps of 25), on 4 replicas, and ends as the lab's
    uninterrupted run did."""
    state, root, _ = lab_run
    options = ["--restarts", "1", "--commit-steps", "5", "--straggler", "0:0.08"]
    (fault,) = _kill_a_worker_mid_run(  # about half of epoch 1's 25 steps of 80 ms or more, with room for its plan
        lab_run, "replaced", 3, options, after_s=1.0,
        then=lambda: start_worker(state, 3, "w3-again", timeout_s=60, hide=[root]),
    )  # fmt: skip
    assert fault["recovered_from"] == "commit" and fault["workers_after"] == 4, fault
    assert 0 <= fault["steps_redone"] <= 5 and fault["resumed_from_epoch"] == 0
    evals = pd.read_parquet(root / "replaced" / "eval.parquet")
    assert list(evals["epoch"]) == [0, 1, 2, 3, 4]
    straight = pd.read_parquet(root / "lab" / "eval.parquet")["test_acc"].iloc[-1]
    assert abs(evals["test_acc"].iloc[-1] - straight) <= 0.01


def test_a_worker_killed_mid_run_is_survived_on_the_workers_left(lab_run):
    _, root, _ = lab_run
    run = root / "killed"
    faults = _kill_a_worker_mid_run(lab_run, "killed", 2, ["--restarts", "1", "--detect-s", "1"])
    assert len(faults) == 1
    assert (
        faults[0]["workers"] == 4 and faults[0]["workers_after"] == 3 and faults[0]["resumed_from_epoch"] >= 0
    )
    evals = pd.read_parquet(run / "eval.parquet")
    assert list(evals["epoch"]) == [0, 1, 2, 3, 4]
    assert read_checkpoint(run).replicas == 3
    straight = pd.read_parquet(root / "lab" / "eval.parquet")["test_acc"].iloc[-1]
    assert abs(evals["test_acc"].iloc[-1] - straight) <= 0.005
