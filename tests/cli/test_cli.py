"""The ``adass`` command as a user runs it: help, bad input, a tiny train and compare."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from adass.cli import main
from adass.experiments.compare import BUDGET_MATCHED, COMPARE_COLUMNS, SCHEDULE_MATCHED

TINY = ["--data", "synthetic:n=120,d=4,classes=3,test=30", "--model", "mlp:hidden=8", "--epochs", "2"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "adass.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_every_option_with_allowed_values():
    top = run_cli("--help")
    assert top.returncode == 0
    for command in ("train", "compare", "bench"):
        assert command in top.stdout
    train = run_cli("train", "--help").stdout
    for flag in ("--data", "--model", "--sampler", "--epochs", "--batch-size", "--lr", "--momentum",
                 "--weight-decay", "--schedule", "--seed", "--out"):  # fmt: skip
        assert flag in train
    assert "eps=0.9" in train and "selective_backprop" in train and "a number in [0, 1]" in train
    assert "constant|step|cosine" in train
    assert "--samplers" in run_cli("compare", "--help").stdout


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--epochs", "0"], "--epochs"),
        (["--sampler", "adass:eps=7"], "--sampler"),
        (["--sampler", "bogus"], "--sampler"),
        (["--model", "mlp:hidden=0"], "--model"),
        (["--schedule", "linear"], "--schedule"),
        (["--data", "idx:/nonexistent/folder"], "--data"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, args, flag):
    out = tmp_path / "run"
    code = main(["train", *TINY, *args, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and flag in err
    assert not out.exists()


def test_argparse_errors_are_one_line_too():
    result = run_cli("train", "--out")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_train_writes_records_and_prints_a_summary(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--sampler", "adass:eps=0.3,warmup=1", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "test_acc" in printed and "backprop_frac" in printed
    for name in ("eval.parquet", "selection.parquet", "steps.parquet", "config.json"):
        assert (out / name).exists()
    config = json.loads((out / "config.json").read_text())
    assert config["sampler"]["sampler"] == "adass:eps=0.3,warmup=1"
    assert len(pd.read_parquet(out / "eval.parquet")) == 2
    # a second run into the same folder is refused rather than overwriting it
    assert main(["train", *TINY, "--out", str(out), "--quiet"]) == 2


def test_compare_writes_one_row_per_sampler(tmp_path):
    out = tmp_path / "cmp"
    args = ["compare", *TINY, "--samplers", "random:ratio=0.5", "adass:eps=0.2,warmup=1", "--seeds", "2",
            "--out", str(out), "--quiet"]  # fmt: skip
    assert main(args) == 0
    table = pd.read_csv(out / "compare.csv")
    assert list(table.columns) == COMPARE_COLUMNS
    assert list(table["sampler"]) == ["full", "random:ratio=0.5", "adass:eps=0.2,warmup=1",
                                      SCHEDULE_MATCHED, BUDGET_MATCHED]  # ADASS's controls  # fmt: skip
    full = table.set_index("sampler").loc["full"]
    assert full["backprop_frac"] == 1.0 and full["wall_ratio"] == 1.0
    assert table.set_index("sampler").loc["random:ratio=0.5", "backprop_frac"] == pytest.approx(0.5, abs=0.01)
    assert (out / "runs").is_dir() and len(list((out / "runs").iterdir())) == 10


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--lr", "nan"], "--lr"),
        (["--lr", "inf"], "--lr"),
        (["--momentum=-inf"], "--momentum"),
        (["--timeout-s", "nan"], "--timeout-s"),
        (["--sampler", "adass:eps=nan"], "--sampler"),
        (["--workers", "2", "--codec", "randk:ratio=nan"], "--codec"),
        (["--workers", "2", "--codec", "qsgd:bits=inf"], "--codec"),
    ],
)
def test_nan_and_infinity_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, args, flag):
    out = tmp_path / "run"
    code = main(["train", *TINY, *args, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"adass train: error: {flag}: ")
    assert args[-1].split("=")[-1] in err and "expected" in err
    assert not out.exists()


def test_compare_checks_its_own_options_before_writing(tmp_path, capsys):
    out = tmp_path / "cmp"
    for bad in (["--seeds", "nan"], ["--samplers", "full", "random:ratio=nan"]):
        samplers = [] if "--samplers" in bad else ["--samplers", "full"]
        code = main(["compare", *TINY, *samplers, *bad, "--out", str(out), "--quiet"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and bad[0] in err and "nan" in err
    assert not out.exists()


def test_top_level_help_lists_the_commands_without_importing_the_library():
    code = (
        "import sys\n"
        "from adass.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as stop:\n    assert stop.code == 0\n"
        "print(sorted(m for m in ('torch', 'pandas', 'param', 'panel', 'dask', 'sklearn') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
    assert "dashboard" in result.stdout and "compare" in result.stdout


@pytest.mark.parametrize("args", [[], ["bogus"]])
def test_a_missing_or_unknown_command_is_one_line_and_exit_2(args):
    result = run_cli(*args)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "COMMAND" in result.stderr


@pytest.mark.parametrize(
    "args, flag, shown",
    [
        (["--epochs", "1e1"], "--epochs", "'1e1'"),
        (["--epochs", "１０"], "--epochs", "'１０'"),
        (["--epochs", "1_0"], "--epochs", "'1_0'"),
        (["--epochs", "2.0"], "--epochs", "'2.0'"),
        (["--batch-size", "٣٢"], "--batch-size", "'٣٢'"),
        (["--lr", "０.1"], "--lr", "'０.1'"),
        (["--lr", "1_0.0"], "--lr", "'1_0.0'"),
        (["--model", "mlp:hidden=1e1"], "--model", "hidden='1e1'"),
        (["--workers", "2", "--codec", "qsgd:bits=1e1"], "--codec", "bits='1e1'"),
        (["--workers", "2", "--codec", "qsgd:bits=８"], "--codec", "bits='８'"),
    ],
)
def test_numbers_are_ascii_and_integers_are_digits(tmp_path, capsys, args, flag, shown):
    out = tmp_path / "run"
    code = main(["train", *TINY, *args, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"adass train: error: {flag}: ")
    assert f"{shown} is not allowed" in err and "expected" in err
    assert not out.exists()


def test_a_float_option_still_takes_an_exponent(tmp_path):
    args = ["train", *TINY, "--lr", "5e-2", "--epochs", "1", "--out", str(tmp_path / "run"), "--quiet"]
    assert main(args) == 0
