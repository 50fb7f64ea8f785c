"""A run that diverges with finite numbers ends with one line and a non-zero exit, not with a summary."""

import json

import pandas as pd

from adass.cli import main

SYNTHETIC = ["--data", "synthetic:n=600,d=8,classes=3,test=300", "--model", "mlp:hidden=16", "--quiet"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_loss_that_blows_up_stops_the_run_and_its_corrected_rerun_goes_on(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--data", "mnist5k", "--lr", "100", "--epochs", "4", "--quiet", "--out", str(out)]
    assert main(args) == 2
    err = _one_line(capsys)
    assert err.startswith("adass train: error: epoch 0: the training loss grew to ")
    assert "1000x its first step's" in err and "--diverge-factor 1000" in err and "lower --lr" in err
    assert not out.exists()  # it finished no epoch: nothing is left that would refuse the rerun
    assert main(["train", "--data", "mnist5k", "--epochs", "1", "--quiet", "--out", str(out)]) == 0
    assert len(pd.read_parquet(out / "eval.parquet")) == 1


def test_accuracy_at_chance_epoch_after_epoch_stops_the_run_and_keeps_the_epochs_before(tmp_path, capsys):
    out = tmp_path / "run"
    # --lr 1 leaves the model dead from its second epoch on (one class for every digit) with a loss
    # that stays finite and near its start (2.3), far under the loss check: the accuracy check stops
    # it after epochs 2, 3 and 4 at chance (the first two are not counted)
    args = ["--data", "mnist5k", "--lr", "1", "--epochs", "20", "--chance-epochs", "3", "--quiet"]
    assert main(["train", *args, "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert err.startswith("adass train: error: epoch 4: test accuracy ")
    assert "at chance" in err and "3 epochs in a row (--chance-epochs 3)" in err
    evals = pd.read_parquet(out / "eval.parquet")
    assert list(evals["epoch"]) == [0, 1, 2, 3, 4]  # the epoch that showed it is recorded
    pointer = json.loads((out / "checkpoints" / "latest.json").read_text())
    assert pointer["epoch"] == 3  # but its model is not checkpointed
    # a resume that turns the check off goes on from the last checkpoint
    assert main(["train", "--resume", str(out), "--epochs", "6", "--chance-epochs", "0", "--quiet"]) == 0
    assert list(pd.read_parquet(out / "eval.parquet")["epoch"]) == list(range(6))


def test_the_loss_check_can_be_turned_off(tmp_path, capsys):
    args = [*SYNTHETIC, "--lr", "30", "--epochs", "3"]
    assert main(["train", *args, "--out", str(tmp_path / "on")]) == 2
    assert "--diverge-factor 1000" in _one_line(capsys)
    assert main(["train", *args, "--diverge-factor", "0", "--out", str(tmp_path / "off")]) == 0


def test_a_healthy_run_does_not_trip_the_checks(tmp_path):
    assert main(["train", *SYNTHETIC, "--epochs", "8", "--sampler", "adass:eps=0.3,warmup=1",
                 "--out", str(tmp_path / "run")]) == 0  # fmt: skip
