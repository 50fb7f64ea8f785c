"""Every failure a user can cause or meet in one process ends in one line on stderr and writes nothing."""

import signal
import socket
import subprocess
import sys
import time

import pytest

from adass.cli import main

TINY = ["--data", "synthetic:n=64,d=4,classes=3,test=16", "--model", "logreg", "--epochs", "1", "--quiet"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _svm(tmp_path, text: str) -> str:
    path = tmp_path / "d.svm"
    path.write_text(text)
    return f"svmlight:{path}"


def test_an_empty_out_is_refused(capsys):
    assert main(["train", *TINY, "--out", ""]) == 2
    assert "--out" in _one_line(capsys)


def test_an_out_that_cannot_be_a_folder_is_refused(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out in (blocker, blocker / "run"):
        assert main(["train", *TINY, "--out", str(out)]) == 2
        assert "--out" in _one_line(capsys)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("0 1:nan\n1 1:2\n0 1:1\n1 1:0\n2 1:3\n", "NaN"),
        ("nan 1:1\n1 1:2\n0 1:1\n1 1:0\n", "NaN"),
        ("1 1:1\n1 1:2\n1 1:3\n", "class"),
        ("0 2000000000:1\n1 2000000000:1\n" * 150, "GiB"),
    ],
)
def test_bad_data_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, text, said):
    out = tmp_path / "run"
    assert main(["train", *TINY[2:], "--data", _svm(tmp_path, text), "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert "--data" in err and said in err
    assert not out.exists()


def test_a_closed_scheduler_port_fails_fast_in_one_line(tmp_path, capsys):
    address = f"tcp://127.0.0.1:{_closed_port()}"
    code = main(["train", *TINY, "--workers", "1", "--scheduler", address, "--out", str(tmp_path / "run")])
    assert code == 2
    err = _one_line(capsys)
    assert "--scheduler" in err and address in err


def test_resume_refuses_run_options_beside_it(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path), "--model", "lenet", "--lr", "0.1", "--quiet"]) == 2
    err = _one_line(capsys)
    assert "--model" in err and "--lr" in err and "--resume" in err


def test_ctrl_c_ends_a_run_with_one_line(tmp_path):
    out = tmp_path / "run"
    args = ["train", "--data", "synthetic:n=2000,d=8,classes=3,test=100", "--model", "logreg", "--epochs", "100000",
            "--quiet", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "adass.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        deadline = time.time() + 120
        while not (out / "config.json").exists() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # inside the epochs
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err


def test_tls_flags_need_an_external_scheduler(tmp_path, capsys):
    code = main(["train", *TINY, "--workers", "1", "--tls-ca", "ca.pem", "--out", str(tmp_path / "run")])
    assert code == 2
    assert "--tls-ca" in _one_line(capsys)


def test_a_run_gone_non_finite_stops_with_one_line(tmp_path, capsys):
    # the checks of finite divergence off, so that the losses grow on until they overflow
    args = ["train", "--data", "synthetic:n=600,d=8,classes=3,test=100", "--model", "mlp:hidden=16", "--lr", "100",
            "--momentum", "0.99", "--epochs", "20", "--diverge-factor", "0", "--chance-epochs", "0", "--quiet",
            "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(args) == 2
    err = _one_line(capsys)
    assert "not finite" in err and "--max-nonfinite" in err


def test_a_model_far_past_memory_is_refused_in_one_line_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    huge = "mlp:hidden=65536,layers=16"  # within the spec's bounds: 64 billion parameters
    assert main(["train", "--data", "synthetic:n=100,d=4,classes=2", "--model", huge, "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert "--model" in err and huge in err and "GiB" in err
    assert not out.exists()


def test_the_memory_check_counts_every_rank_this_host_holds():
    import psutil

    from adass.config import RunConfig
    from adass.data import load_dataset
    from adass.registry import SpecError
    from adass.runtime.model_memory import BYTES_PER_PARAMETER, check_model_fits, parameter_count

    data = load_dataset("synthetic:n=100,d=4,classes=2")
    available = psutil.virtual_memory().available
    # a model that fits once but not eight times: one rank passes, eight embedded ranks do not
    hidden = 1
    while (
        parameter_count(f"mlp:hidden={hidden},layers=2", data.shape, 2) * BYTES_PER_PARAMETER
        < 0.2 * available
    ):
        hidden *= 2
    spec = f"mlp:hidden={hidden},layers=2"
    check_model_fits(RunConfig.from_flat(data=data.name, model=spec), data)
    with pytest.raises(SpecError, match="for 8 ranks on this host"):
        check_model_fits(RunConfig.from_flat(data=data.name, model=spec, workers=8), data)
    # a cluster elsewhere: its hosts are not this one, so nothing is refused here
    check_model_fits(
        RunConfig.from_flat(data=data.name, model=spec, workers=8, scheduler="tcp://10.0.0.1:8786"), data
    )
