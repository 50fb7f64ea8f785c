"""Run records on disk: today's columns, older runs read with today's names, and which code made a run."""

import json

import pandas as pd

from adass import __version__
from adass.metrics import EvalRecord, ParquetSink, StepRecord, columns, load_run


def test_an_older_runs_columns_are_read_with_todays_names(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    old_eval = pd.DataFrame({"run": ["r"], "epoch": [0], "wall_s": [1.5], "backprops": [10], "forwards": [10],
                             "wire_bytes": [0], "train_loss": [1.0], "test_loss": [1.1], "test_acc": [0.5],
                             "kept_frac": [1.0]})  # fmt: skip
    old_steps = pd.DataFrame({"run": ["r"], "epoch": [0], "step": [0], "rank": [0], "samples": [8], "loss": [1.0],
                              "compute_s": [0.1], "encode_s": [0.0], "comm_s": [0.0], "decode_s": [0.0],
                              "wait_s": [0.0]})  # fmt: skip
    old_eval.to_parquet(tmp_path / "eval.parquet")
    old_steps.to_parquet(tmp_path / "steps.parquet")
    run = load_run(tmp_path)
    assert list(run["eval"].columns) == columns(EvalRecord) and run["eval"]["train_s"].tolist() == [1.5]
    assert list(run["steps"].columns) == columns(StepRecord)
    assert run["steps"]["staleness"].tolist() == [0]  # added later: an older run's steps were in lock-step
    # a resumed run appends today's records to the old ones under the same names
    sink = ParquetSink(tmp_path)
    sink.resume()
    sink.write(EvalRecord("r", 1, 3.0, 20, 20, 0, 0.9, 1.0, 0.6))
    sink.close()
    assert load_run(tmp_path)["eval"]["train_s"].tolist() == [1.5, 3.0]


def test_config_json_names_the_version_and_commit_that_made_the_run(tmp_path):
    ParquetSink(tmp_path, {"optim": {"epochs": 1}})
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["optim"] == {"epochs": 1}
    assert saved["adass"]["version"] == __version__
    commit = saved["adass"]["commit"]  # None outside a git checkout
    assert commit is None or len(commit.removesuffix("-dirty")) == 40
