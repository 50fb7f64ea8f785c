"""``adass reproduce`` resumes from the finished runs under ``--out/runs``, ``--jobs N`` gives the same
numbers as one process, and grids on several data sets report each one."""

import dataclasses
import json
import math
import re
import shutil

import pandas as pd
import pytest

from adass.cli import main
from adass.experiments.reproduce import TINY, claim_quantize
from adass.experiments.reproduce.parallel import Runner
from adass.experiments.reproduce.plan import PLANS, SIZES_ENV
from adass.experiments.reproduce.store import RUNS, RunStore

VERDICT = re.compile(r"^\*\*Verdict, claim \d[^*]*\*\*", re.M)
SUMMARIES = ("dml_samplers", "quantize_summary", "sparsify_summary", "quantize_runs", "sparsify_runs")
#: what runs decide without timing: the columns that must not change when runs are reused or spread
ACCURACY = ["test_acc", "deficit_pts", "backprops"]


def _reproduce(out, *extra) -> int:
    return main(["reproduce", "--quick", "--out", str(out), *extra])


def _accuracy(out) -> dict[str, pd.DataFrame]:
    frames = {stem: pd.read_csv(out / f"{stem}.csv") for stem in SUMMARIES}
    return {stem: f[[c for c in ACCURACY if c in f.columns]] for stem, f in frames.items()}


def _ran(err: str) -> dict[str, int]:
    """Per part, from its last progress line: how many of its runs ran (were not reused)."""
    out = {}
    for line in err.splitlines():
        head, reused = re.match(r"\[([^\]]+)\] (\d+)/(\d+) ", line), re.search(r" · (\d+) reused", line)
        if head and head[2] == head[3]:
            out[head[1]] = int(head[2]) - (int(reused[1]) if reused else 0)
    return out


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    """One tiny reproduction with --jobs 1, shared by the tests below (they copy it before changing it)."""
    out = tmp_path_factory.mktemp("tiny") / "report"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SIZES_ENV, TINY.name)
        assert _reproduce(out, "--quiet") == 0
    return out


def test_resume_reruns_only_the_missing_runs(tiny_report, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SIZES_ENV, TINY.name)
    out = tmp_path / "report"
    shutil.copytree(tiny_report, out)
    grid = sorted((out / RUNS / "grid").glob("*.json"))
    samplers = sorted((out / RUNS / "dml_samplers").glob("*.json"))
    deleted = [grid[0], grid[-1], samplers[0]]
    kept = {p: p.stat().st_mtime_ns for p in (*grid, *samplers) if p not in deleted}
    for path in deleted:
        path.unlink()
    (out / "report.md").unlink()

    assert _reproduce(out) == 0
    err = capsys.readouterr().err
    ran = _ran(err)
    # claims 2 and 3 share the fp32 runs: a deleted grid run runs once, in whichever claim needs it first
    assert ran["claim 1, samplers"] == 1 and ran["claim 2"] + ran["claim 3"] == 2
    assert ran["claim 1, processes"] == ran["claim 1, powersgd"] == ran["claim 1, simulated"] == 0
    assert all(p.exists() for p in deleted)  # the same keys again
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())  # reused, not rewritten
    for stem, frame in _accuracy(out).items():
        pd.testing.assert_frame_equal(frame, _accuracy(tiny_report)[stem], obj=stem)
    report, before = (out / "report.md").read_text(), (tiny_report / "report.md").read_text()
    assert VERDICT.findall(report) == VERDICT.findall(before) and len(VERDICT.findall(report)) == 3


def test_overwrite_starts_afresh_and_other_plans_do_not_mix(tiny_report, tmp_path, monkeypatch, capsys):
    out = tmp_path / "report"
    shutil.copytree(tiny_report, out)
    monkeypatch.setenv(SIZES_ENV, TINY.name)
    assert _reproduce(out, "--overwrite") == 0
    assert set(_ran(capsys.readouterr().err).values()) != {0}  # every part ran again
    # the same arms under another plan's name hash to other keys
    store, config = RunStore(out / RUNS, "tiny"), {"optim": {"seed": 0}}
    other = RunStore(out / RUNS, "quick")
    assert store.key("grid", config, label="fp32") == RunStore(out / RUNS, "tiny").key(
        "grid", config, label="fp32"
    )
    assert store.key("grid", config, label="fp32") != other.key("grid", config, label="fp32")
    assert store.key("grid", config, label="fp32") != store.key("grid", config, label="ef")


def test_store_round_trips_rows(tmp_path):
    store = RunStore(tmp_path / RUNS, "tiny")
    row = {"test_acc": 0.1 + 0.2, "backprops": 12, "comm_share": float("nan"), "kept_fracs": [1.0, 0.5]}
    store.save("grid", "k", row)
    loaded = store.load("grid", "k")
    assert loaded["test_acc"] == row["test_acc"] and loaded["kept_fracs"] == [1.0, 0.5]
    assert math.isnan(loaded["comm_share"]) and store.load("grid", "missing") is None
    assert [p.name for p in (tmp_path / RUNS / "grid").iterdir()] == ["k.json"]  # no temporary file left
    json.loads((tmp_path / RUNS / "grid" / "k.json").read_text())


def test_jobs_2_equals_jobs_1(tmp_path, monkeypatch):
    # two seeds, so that the samplers' chains spread over the workers too
    monkeypatch.setitem(PLANS, TINY.name, dataclasses.replace(TINY, seeds=2))
    monkeypatch.setenv(SIZES_ENV, TINY.name)
    one, two = tmp_path / "one", tmp_path / "two"
    assert _reproduce(one, "--quiet") == 0
    assert _reproduce(two, "--quiet", "--jobs", "2") == 0
    for stem, frame in _accuracy(two).items():
        pd.testing.assert_frame_equal(frame, _accuracy(one)[stem], obj=stem)
    report_one, report_two = (one / "report.md").read_text(), (two / "report.md").read_text()
    # claims 2 and 3 judge accuracies and bytes; claim 1 also judges timings of real processes
    assert VERDICT.findall(report_two)[1:] == VERDICT.findall(report_one)[1:]
    assert "2 job(s)" in report_two and "1 job(s)" in report_one


@pytest.mark.parametrize("jobs", ["0", "-2", "two"])
def test_bad_jobs_is_one_line(tmp_path, monkeypatch, capsys, jobs):
    monkeypatch.setenv(SIZES_ENV, TINY.name)
    assert _reproduce(tmp_path / "r", "--jobs", jobs) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("adass reproduce: error: --jobs:") and "\n" not in err and jobs in err
    assert not (tmp_path / "r").exists()


def test_grids_on_two_data_sets_give_a_table_plots_and_verdict_for_each(tmp_path):
    other = {**TINY.setting, "data": "synthetic:n=200,d=5,classes=2,test=60"}
    plan = dataclasses.replace(TINY, grid_settings={"a": TINY.setting, "b": other}, q_bits=[8])
    (tmp_path / "plots").mkdir()
    with Runner(RunStore(tmp_path / RUNS, plan.name), quiet=True) as runner:
        section = claim_quantize.run(plan, tmp_path, runner)
    table = section.tables["summary"]
    assert list(table["setting"]) == ["a"] * 3 + ["b"] * 3  # fp32 and two arms on each
    assert sorted(section.plots) == ["quantize_accuracy_a.png", "quantize_accuracy_b.png",
                                     "quantize_step_1gbit_a.png", "quantize_step_1gbit_b.png"]  # fmt: skip
    assert all((tmp_path / "plots" / name).exists() for name in section.plots)
    assert {c.setting for c in section.checks} == {"a", "b"}
    lines = [line for line in section.markdown(2) if line.startswith("**Verdict")]
    assert [line.split(":")[0] for line in lines] == ["**Verdict, claim 2, a", "**Verdict, claim 2, b"]
