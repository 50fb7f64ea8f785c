"""One run, three backends: the command line's ``--replicas`` and ``--workers`` and the Python entry
agree, every backend checkpoints and resumes, and the options that pick a backend are checked."""

import subprocess
import sys

import pandas as pd
import pytest
import torch

from adass.config import RunConfig
from adass.engine import read_checkpoint
from adass.metrics import EvalRecord, SelectionRecord, StepRecord, TrafficRecord, load_run
from adass.registry import SpecError
from adass.runtime import run

FLAT = {"data": "synthetic:n=150,d=5,classes=3,test=40", "model": "mlp:hidden=8", "sampler": "adass:eps=0.3,warmup=1,final=0",
        "epochs": 3, "batch_size": 16, "schedule": "constant", "threads": 1}  # fmt: skip


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "adass.cli", *args], capture_output=True, text=True, timeout=300
    )


def flags(**changes) -> list[str]:
    out = []
    for key, value in {**FLAT, **changes}.items():
        out += [f"--{key.replace('_', '-')}", str(value)]
    return out


def test_the_backend_follows_the_options():
    assert RunConfig.from_flat(**FLAT).backend == "local"
    threads = RunConfig.from_flat(**FLAT, replicas=3, codec="qsgd:bits=8")
    assert (threads.backend, threads.world) == ("threads", 3)
    assert RunConfig.from_flat(**FLAT, workers=2).backend == "dask"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"workers": 2, "replicas": 2}, "--replicas: 2 needs --workers 0"),
        (
            {"replicas": 2, "scheduler": "tcp://127.0.0.1:8786"},
            "--scheduler: 'tcp://127.0.0.1:8786' needs --workers",
        ),
        ({"codec": "qsgd:bits=4"}, "--codec: 'qsgd:bits=4' needs --workers or --replicas"),
        ({"replicas": 1, "exchange": "ps:servers=2,colocated=true"}, "--exchange/--replicas"),
    ],
)
def test_options_a_backend_cannot_take_are_refused_in_one_line(changes, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RunConfig.from_flat(**FLAT, **changes)


def test_train_with_replicas_on_the_command_line_is_the_python_run(tmp_path):
    done = cli(
        "train",
        *flags(),
        "--replicas",
        "3",
        "--codec",
        "qsgd:bits=8",
        "--out",
        str(tmp_path / "a"),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    assert "replicas" in done.stdout.splitlines()[0]  # the summary table's first column
    saved = load_run(tmp_path / "a")
    here = run(RunConfig.from_flat(**FLAT, replicas=3, codec="qsgd:bits=8"))
    assert saved["eval"]["test_acc"].tolist() == here.sink.frame(EvalRecord)["test_acc"].tolist()
    assert saved["eval"]["wire_bytes"].tolist() == here.sink.frame(EvalRecord)["wire_bytes"].tolist()
    assert len(saved["traffic"]) > 0 and set(saved["steps"]["rank"]) == {0, 1, 2}
    assert read_checkpoint(tmp_path / "a", saved_ranks=True).replicas == 3


def test_replicas_and_workers_together_are_refused_before_anything_is_written(tmp_path):
    done = cli("train", *flags(), "--replicas", "2", "--workers", "2", "--out", str(tmp_path / "b"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--replicas: 2 needs --workers 0" in done.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("replicas, sampler", [(0, FLAT["sampler"]), (2, "random:ratio=0.5")])
def test_a_run_in_this_process_resumes_where_it_stopped(tmp_path, replicas, sampler):
    """Every backend checkpoints each epoch; a resume with more epochs ends where a straight run does."""
    flat = {**FLAT, "sampler": sampler}
    straight = run(
        RunConfig.from_flat(**{**flat, "epochs": 4}, replicas=replicas), checkpoint_dir=tmp_path / "straight"
    )
    first = RunConfig.from_flat(**{**flat, "epochs": 2}, replicas=replicas)
    run(first, checkpoint_dir=tmp_path / "resumed")
    assert read_checkpoint(tmp_path / "resumed").epoch == 1
    resumed = run(first.replace(epochs=4), checkpoint_dir=tmp_path / "resumed", resume=True)
    for a, b in zip(straight.extra["parameters"], resumed.extra["parameters"], strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert resumed.final.backprops == straight.final.backprops


def test_a_threads_checkpoint_resumes_on_another_replica_count(tmp_path):
    run(RunConfig.from_flat(**{**FLAT, "epochs": 2}, replicas=3), checkpoint_dir=tmp_path)
    resumed = run(RunConfig.from_flat(**FLAT, replicas=2), checkpoint_dir=tmp_path, resume=True)
    assert resumed.final.epoch == 2 and len(resumed.extra["parameters"]) == 2


def test_records_are_the_same_kinds_on_every_backend_in_this_process():
    """The driver writes selection, steps and evaluation for each backend alike; replicas add traffic."""
    for replicas in (0, 2):
        sink = run(RunConfig.from_flat(**FLAT, replicas=replicas)).sink
        assert len(sink.frame(EvalRecord)) == FLAT["epochs"]
        selection = sink.frame(SelectionRecord)
        assert len(selection) == FLAT["epochs"] * 150  # every sample once per epoch, over all replicas
        steps = sink.frame(StepRecord)
        assert isinstance(steps, pd.DataFrame) and len(steps) > 0
        assert (len(sink.frame(TrafficRecord)) > 0) == bool(replicas)
