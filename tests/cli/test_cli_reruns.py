"""A run that fails before its first epoch is done leaves nothing in --out that would refuse the same
command once corrected; configuration errors are found up front, in one line, before any worker starts."""

import pandas as pd
import pytest

from adass.cli import main

TINY = ["--data", "synthetic:n=64,d=4,classes=3,test=16", "--model", "logreg", "--epochs", "1", "--quiet"]
FIVE = ["--data", "synthetic:n=5,d=4,classes=2,test=4", "--model", "logreg", "--epochs", "1", "--quiet"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    err = [line for line in err if not line.startswith("adass: warning:")]  # a tiny set's shift warning
    assert len(err) == 1, err
    return err[0]


def _trained(out) -> None:
    assert (out / "config.json").is_file()
    assert len(pd.read_parquet(out / "eval.parquet")) == 1


@pytest.mark.parametrize("count", ["--replicas", "--workers"])
def test_more_replicas_than_samples_is_refused_up_front(tmp_path, capsys, count):
    out = tmp_path / "run"
    assert main(["train", *FIVE, count, "8", "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"adass train: error: {count}: 8 replicas need at least 8 training samples")
    assert "has 5" in err
    assert not out.exists()
    assert main(["train", *FIVE, "--replicas", "2", "--out", str(out)]) == 0
    _trained(out)


@pytest.mark.parametrize("address", ["tcp://[::1", "tcp://127.0.0.1:99999", "tcp://:8786", "tcp://host:port"])
def test_a_scheduler_address_that_cannot_be_read_is_bad_input(tmp_path, capsys, address):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--workers", "1", "--scheduler", address, "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"adass train: error: --scheduler: {address!r} is no scheduler address")
    assert not out.exists()


def test_missing_tls_files_leave_nothing_behind(tmp_path, capsys):
    out = tmp_path / "run"
    tls = ["--tls-ca", str(tmp_path / "ca.pem"), "--tls-cert", str(tmp_path / "c.pem"),
           "--tls-key", str(tmp_path / "k.pem")]  # fmt: skip
    args = ["train", *TINY, "--workers", "1", "--scheduler", "tcp://127.0.0.1:1", *tls, "--out", str(out)]
    assert main(args) == 2
    assert "--tls-ca" in _one_line(capsys)
    assert not out.exists()
    assert main(["train", *TINY, "--out", str(out)]) == 0
    _trained(out)


def test_a_non_finite_stop_in_the_first_epoch_leaves_nothing_behind(tmp_path, capsys):
    out = tmp_path / "run"
    bad = ["--lr", "100", "--momentum", "0.99", "--max-nonfinite", "1", "--diverge-factor", "0",
           "--batch-size", "2"]  # fmt: skip
    assert main(["train", *TINY, "--model", "mlp:hidden=16", *bad, "--out", str(out)]) == 2
    assert "epoch 0: loss or gradient not finite" in _one_line(capsys)
    assert not out.exists()
    assert main(["train", *TINY, "--out", str(out)]) == 0
    _trained(out)


def test_a_failed_run_removes_only_what_it_wrote(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    tls = ["--tls-ca", str(tmp_path / "ca.pem"), "--tls-cert", str(tmp_path / "c.pem"),
           "--tls-key", str(tmp_path / "k.pem")]  # fmt: skip
    args = ["train", *TINY, "--workers", "1", "--scheduler", "tcp://127.0.0.1:1", *tls, "--out", str(out)]
    assert main(args) == 2
    _one_line(capsys)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert main(["train", *TINY, "--out", str(out)]) == 0
    _trained(out)
    assert (out / "notes.txt").read_text() == "mine"
