"""Checkpoints that cannot mislead: a client killed at any point (inside the checkpoint window too)
resumes to exactly the uninterrupted run; a resume that cannot continue the run says so in one line."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from adass.cli import main
from adass.runtime.cluster import read_checkpoint

RUN = ["--data", "synthetic:n=160,d=5,classes=3,test=40", "--model", "mlp:hidden=8", "--batch-size", "16",
       "--schedule", "constant", "--workers", "2", "--epochs", "4", "--quiet"]  # fmt: skip


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("straight") / "run"
    assert main(["train", *RUN, "--out", str(out)]) == 0
    return out


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(read_checkpoint(run).folder / "rank0.pt", weights_only=True)["model"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_epochs_at_or_below_those_done_is_one_line_and_rewrites_nothing(straight, capsys):
    before = (straight / "config.json").read_bytes()
    for epochs in ("4", "2"):
        assert main(["train", "--resume", str(straight), "--epochs", epochs, "--quiet"]) == 2
        assert "--epochs" in _one_line(capsys)
    assert (straight / "config.json").read_bytes() == before


def test_a_corrupt_checkpoint_is_one_line_before_any_cluster_starts(straight, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(straight, broken)
    rank0 = read_checkpoint(broken).folder / "rank0.pt"
    rank0.write_bytes(rank0.read_bytes()[:100])
    before = (broken / "config.json").read_bytes()
    assert main(["train", "--resume", str(broken), "--epochs", "6", "--quiet"]) == 2
    err = _one_line(capsys)
    assert "corrupt" in err and "rank0.pt" in err and "Dask dashboard" not in err
    assert (broken / "config.json").read_bytes() == before
    (broken / "checkpoints" / "latest.json").write_text("{not json")
    assert main(["train", "--resume", str(broken), "--epochs", "6", "--quiet"]) == 2
    assert "corrupt" in _one_line(capsys)


def _pointer_epoch(run: Path) -> int:
    try:
        return json.loads((run / "checkpoints" / "latest.json").read_text())["epoch"]
    except (OSError, ValueError):
        return -1


#: when to kill the client: inside epoch 1's checkpoint window (its folder exists, the pointer has not
#: moved), just after epoch 1's checkpoint, and inside epoch 3
KILL_POINTS = {
    "checkpoint_window": lambda run: (run / "checkpoints" / "epoch-000001").exists(),
    "after_checkpoint": lambda run: _pointer_epoch(run) >= 1,
    "mid_epoch": lambda run: _pointer_epoch(run) >= 2,
}


@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_a_client_killed_at_any_point_resumes_to_the_uninterrupted_run(straight, tmp_path, point):
    run = tmp_path / "run"
    log = open(tmp_path / "client.log", "w")
    client = subprocess.Popen([sys.executable, "-m", "adass.cli", "train", *RUN, "--out", str(run)],
                              stdout=log, stderr=log, start_new_session=True)  # fmt: skip
    try:
        deadline = time.time() + 300
        while not KILL_POINTS[point](run) and client.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        assert client.poll() is None, "the run ended before the kill point"
    finally:
        os.killpg(client.pid, signal.SIGKILL)
        client.wait()
    assert main(["train", "--resume", str(run), "--epochs", "4", "--quiet"]) == 0
    evals = pd.read_parquet(run / "eval.parquet")
    assert list(evals["epoch"]) == [0, 1, 2, 3]
    steps = pd.read_parquet(run / "steps.parquet")
    assert not steps.duplicated(["epoch", "step", "rank"]).any()
    expected = pd.read_parquet(straight / "eval.parquet")
    assert list(evals["test_acc"]) == list(expected["test_acc"])
    a, b = _weights(straight), _weights(run)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-7)


def test_resume_on_another_number_of_workers_goes_on_from_the_same_epoch(tmp_path):
    run = tmp_path / "run"
    assert main(["train", *RUN[:-3], "--epochs", "2", "--quiet", "--out", str(run)]) == 0
    before = _weights(run)
    assert main(["train", "--resume", str(run), "--epochs", "4", "--workers", "3", "--quiet"]) == 0
    checkpoint = read_checkpoint(run)
    assert checkpoint.epoch == 3 and checkpoint.replicas == 3
    assert sorted(p.name for p in checkpoint.folder.glob("rank*.pt")) == ["rank0.pt", "rank1.pt", "rank2.pt"]
    assert list(pd.read_parquet(run / "eval.parquet")["epoch"]) == [0, 1, 2, 3]
    after = _weights(run)
    assert any(not torch.equal(after[k], before[k]) for k in before)  # two more epochs were trained
    assert json.loads((run / "config.json").read_text())["cluster"]["workers"] == 3  # how the run goes on


def test_a_run_folder_of_the_layout_before_epoch_folders_still_resumes(straight, tmp_path):
    run = tmp_path / "older"
    shutil.copytree(straight, run)
    root, checkpoint = run / "checkpoints", read_checkpoint(run)
    for rank_file in checkpoint.folder.glob("rank*.pt"):
        shutil.move(rank_file, root / rank_file.name)
    state = json.loads((checkpoint.folder / "state.json").read_text())
    (root / "state.json").write_text(json.dumps({"epoch": state["epoch"], "totals": state["totals"]}))
    shutil.rmtree(checkpoint.folder)
    (root / "latest.json").unlink()
    assert main(["train", "--resume", str(run), "--epochs", "5", "--quiet"]) == 0
    assert read_checkpoint(run).epoch == 4
    assert (
        not list(root.glob("rank*.pt")) and not (root / "state.json").exists()
    )  # replaced by epoch 4's folder
    assert list(pd.read_parquet(run / "eval.parquet")["epoch"]) == [0, 1, 2, 3, 4]
