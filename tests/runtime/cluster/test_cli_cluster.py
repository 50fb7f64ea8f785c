"""The distributed CLI as a user runs it: records, resume, an external scheduler, clean teardown."""

import os
import signal
import time

import pandas as pd
import psutil
import pytest
import torch

from adass.cli import main
from adass.config import RunConfig
from adass.data import DataError
from adass.failures import RunFailure
from adass.runtime.cluster import read_checkpoint, train_distributed
from adass.runtime.cluster.worker_processes import dask_processes

TINY = ["--data", "synthetic:n=160,d=5,classes=3,test=40", "--model", "mlp:hidden=8", "--batch-size", "16",
        "--schedule", "constant", "--quiet"]  # fmt: skip


def test_train_writes_traffic_and_resume_continues_exactly(tmp_path, capsys):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert (
        main(["train", *TINY, "--workers", "2", "--epochs", "3", "--dask-dashboard", "--out", str(straight)])
        == 0
    )
    printed = capsys.readouterr()
    assert "Dask dashboard: http://127.0.0.1:" in printed.err and "wire_MB" in printed.out
    assert main(["train", *TINY, "--workers", "2", "--epochs", "2", "--out", str(resumed)]) == 0
    assert main(["train", "--resume", str(resumed), "--epochs", "3", "--quiet"]) == 0
    evals = pd.read_parquet(resumed / "eval.parquet")
    assert list(evals["epoch"]) == [0, 1, 2]
    assert read_checkpoint(resumed).epoch == 2
    a = torch.load(read_checkpoint(straight).folder / "rank0.pt", weights_only=True)["model"]
    b = torch.load(read_checkpoint(resumed).folder / "rank1.pt", weights_only=True)["model"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-7)
    traffic = pd.read_parquet(straight / "traffic.parquet")
    assert len(traffic) and (traffic["wire_bytes"] > 0).any()


def test_a_run_on_dask_workers_resumes_on_threads_of_this_process(tmp_path):
    """Every backend writes the same checkpoint files: --resume with --replicas continues a Dask run
    where it stopped, and ends where the same run on threads alone does."""
    moved, threads = tmp_path / "moved", tmp_path / "threads"
    assert main(["train", *TINY, "--workers", "2", "--epochs", "2", "--out", str(moved)]) == 0
    assert main(["train", "--resume", str(moved), "--replicas", "2", "--epochs", "3", "--quiet"]) == 0
    assert main(["train", *TINY, "--replicas", "2", "--epochs", "3", "--out", str(threads)]) == 0
    assert list(pd.read_parquet(moved / "eval.parquet")["epoch"]) == [0, 1, 2]
    a = torch.load(read_checkpoint(moved).folder / "rank0.pt", weights_only=True)["model"]
    b = torch.load(read_checkpoint(threads).folder / "rank0.pt", weights_only=True)["model"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-7)


def test_resume_without_checkpoint_is_one_clear_line(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--resume" in err


def _svmlight(path, n: int = 120) -> None:
    rows = [f"{i % 3} 1:{(i % 3) + 0.1 * (i % 7)} 2:{(i * 7) % 5} 3:1" for i in range(n)]
    path.write_text("\n".join(rows) + "\n")


def test_train_against_a_scheduler_started_from_the_command_line(tmp_path, capsys, monkeypatch):
    """Relative --data and --out paths mean the same files on workers started in another folder."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with dask_processes(tmp_path / "lab", workers=2) as lab:
        monkeypatch.chdir(here)
        _svmlight(here / "mine.svm")
        options = [*TINY[2:], "--data", "svmlight:mine.svm", "--workers", "2", "--epochs", "2",
                   "--scheduler", lab.address]  # fmt: skip
        assert main(["train", *options, "--out", "run"]) == 0
        assert len(pd.read_parquet(here / "run" / "eval.parquet")) == 2
        assert read_checkpoint(here / "run").epoch == 1 and not any(elsewhere.iterdir())

        # a worker told to read what it cannot find: one line, no restart (none could help)
        config = RunConfig.from_flat(data="svmlight:mine.svm", model="mlp:hidden=8", batch_size=16, epochs=1,
                                     workers=2, scheduler=lab.address, restarts=2, data_to_workers="read")  # fmt: skip
        with pytest.raises(DataError) as caught:
            train_distributed(config, on_ready=lambda handle: (here / "mine.svm").unlink())
        message = str(caught.value)
        assert len(message.splitlines()) == 1 and "restarts" not in message
        assert f"{here / 'mine.svm'} not found" in message and "every worker's machine" in message


def test_workers_without_the_package_end_the_run_in_one_line_at_once(tmp_path, capsys, monkeypatch):
    shadow = tmp_path / "shadow" / "adass"  # an adass that cannot be imported, first on the workers' path
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError('No module named adass', name='adass')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    with dask_processes(tmp_path / "lab", workers=2) as lab:
        monkeypatch.delenv("PYTHONPATH")
        started = time.monotonic()
        code = main(["train", *TINY, "--workers", "2", "--epochs", "1", "--scheduler", lab.address,
                     "--out", str(tmp_path / "run")])  # fmt: skip
        took = time.monotonic() - started
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and "cannot load the run's code (ModuleNotFoundError: No module named adass)" in err
    assert "restarts" not in err and took < 60  # three attempts and their waits took longer


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}


def _listening() -> set[int]:
    return {c.laddr.port for c in psutil.Process().net_connections("tcp") if c.status == psutil.CONN_LISTEN}


def _settled(before_children: set[int], before_ports: set[int]) -> bool:
    deadline = time.time() + 20
    while time.time() < deadline:
        if _children() <= before_children and _listening() <= before_ports:
            return True
        time.sleep(0.3)
    return False


def test_no_process_or_port_left_after_a_run_or_a_failed_run():
    config = RunConfig.from_flat(data="synthetic:n=120,d=4,classes=3,test=30", model="mlp:hidden=8", epochs=3,
                                 batch_size=16, workers=2, timeout_s=20)  # fmt: skip
    children, ports = _children(), _listening()
    train_distributed(config)
    assert _settled(children, ports)

    handles = []

    def kill_rank_one(record):
        if record.epoch == 0:
            client = handles[0].client
            pids = client.run(os.getpid)
            os.kill(pids[handles[0].workers()[1]], signal.SIGKILL)

    with pytest.raises(RunFailure):  # no restart allowed: the lost replica ends the run
        train_distributed(config.replace(restarts=0), on_ready=handles.append, progress=kill_rank_one)
    assert _settled(children, ports)


def test_compare_runs_every_sampler_exchange_and_codec_on_one_cluster(tmp_path, capsys):
    from adass.experiments.compare import DISTRIBUTED_COLUMNS

    out = tmp_path / "cmp"
    args = ["compare", *TINY, "--model", "mlp:hidden=64", "--workers", "2", "--epochs", "2",
            "--samplers", "adass:eps=0.3,warmup=1",
            "--exchanges", "ring", "ps:servers=1", "--codecs", "fp32", "randk:ratio=0.1", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    table = pd.read_csv(out / "compare.csv")
    assert list(table.columns) == DISTRIBUTED_COLUMNS
    assert len(table) == (2 + 2) * 2 * 2  # full, adass and ADASS's two controls, per exchange and codec
    full_fp32 = table[
        (table["sampler"] == "full") & (table["exchange"] == "ring") & (table["codec"] == "fp32")
    ]
    assert full_fp32["backprop_frac"].item() == 1.0
    ring = table[(table["exchange"] == "ring") & (table["sampler"] == "full")].set_index("codec")
    assert ring.loc["randk:ratio=0.1", "wire_bytes"] < 0.3 * ring.loc["fp32", "wire_bytes"]
    assert "Dask dashboard" not in capsys.readouterr().err  # served only when asked for (--dask-dashboard)


def test_compare_refuses_exchanges_without_workers(tmp_path, capsys):
    code = main(["compare", *TINY, "--samplers", "full", "--codecs", "fp16", "--out", str(tmp_path / "x")])
    assert code == 2 and "--workers" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_bind_that_names_nothing_on_the_workers_fails_in_one_line(tmp_path, capsys):
    out = tmp_path / "bound"
    code = main(["train", *TINY, "--workers", "2", "--epochs", "1", "--bind", "nosuchif0", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("adass train: error: --bind: 'nosuchif0' is not allowed; expected an interface")
    assert "Traceback" not in "\n".join(err)
