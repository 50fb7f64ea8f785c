"""``adass reproduce`` end to end on the test plan (``ADASS_REPRODUCE_SIZES=tiny``), and its input errors
(resuming and ``--jobs``: test_resume.py)."""

import os
import re
import signal
import subprocess
import sys

import pandas as pd
import pytest

from adass.cli import main
from adass.experiments.reproduce import TINY
from adass.experiments.reproduce.plan import SIZES_ENV

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
VERDICT = re.compile(r"^\*\*Verdict, claim (\d): (holds|does not hold|holds only when .+)\*\*", re.M)


def test_tiny_reproduce_writes_every_section(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SIZES_ENV, TINY.name)
    out = tmp_path / "report"
    assert main(["reproduce", "--quick", "--out", str(out)]) == 0
    report = (out / "report.md").read_text()
    for heading in (
        "## Claim 1:",
        "### (a) samplers",
        "### (b) real processes",
        "### (c) simulated",
        "## Claim 2:",
        "## Claim 3:",
        "## Environment",
    ):
        assert heading in report
    assert [m.group(1) for m in VERDICT.finditer(report)] == ["1", "2", "3"]
    assert "reproduce --quick --out" in report and f"{SIZES_ENV}=tiny" in report
    assert "torch " in report and "dask " in report and "CPU cores" in report
    assert "Arms not run" not in report  # the test plan runs only codecs of this build

    plots = re.findall(r"\(plots/([\w.]+\.png)\)", report)
    assert len(plots) == 6
    for name in plots:
        assert (out / "plots" / name).read_bytes().startswith(PNG_MAGIC)
    for stem in ("dml_samplers", "dml_processes", "dml_simulated", "quantize_summary", "sparsify_summary"):
        assert (out / f"{stem}.csv").stat().st_size > 0
    for stem, coords in (
        ("quantize_summary", ["bits", "strategy", "ef"]),
        ("sparsify_summary", ["ratio", "technique"]),
    ):
        columns = list(pd.read_csv(out / f"{stem}.csv").columns)
        assert columns[columns.index("codec") + 1 : columns.index("seeds")] == coords
        assert {"deficit_pts", "wire_frac", "step_ms_1gbit", "comm_ms_10gbit"} <= set(columns)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no staging folder left behind
    printed = capsys.readouterr()
    assert printed.out.count("claim ") == 3 and "report.md" in printed.out
    # the run counts first, then one progress line per finished task: [claim] k/n label
    assert printed.err.startswith(
        "runs of plan 'tiny': claim 1: 14 (samplers 6, processes 4, simulated 4); claim 2: 5; claim 3: 9"
    )
    for claim in ("claim 1, samplers", "claim 1, processes", "claim 1, simulated", "claim 2", "claim 3"):
        assert re.search(rf"^\[{claim}\] \d+/\d+ ", printed.err, re.M)


@pytest.mark.parametrize("kind", ["file", "non-empty"])
def test_bad_out_is_one_line(tmp_path, capsys, kind):
    target = tmp_path / "target"
    if kind == "file":
        target.write_text("x")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine")
    assert main(["reproduce", "--quick", "--out", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("adass reproduce: error: --out:") and str(target) in err and "\n" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


def test_unknown_sizes_are_refused_before_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SIZES_ENV, "huge")
    assert main(["reproduce", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "ADASS_REPRODUCE_SIZES" in err and "'huge'" in err and "full|quick|tiny" in err
    assert not (tmp_path / "r").exists()


def test_an_interrupted_run_keeps_finished_runs_and_writes_no_report(tmp_path):
    out = tmp_path / "report"
    env = {**os.environ, SIZES_ENV: TINY.name}
    argv = [sys.executable, "-m", "adass.cli", "reproduce", "--quick", "--out", str(out)]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert proc.stderr.readline().startswith("runs of plan 'tiny'")
        first = proc.stderr.readline()  # the first progress line: the samplers' runs are finished
        assert first.startswith("[claim 1, samplers] 6/6")
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
    assert proc.returncode == 130 and "finished runs are kept under --out/runs" in rest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no staging folder left behind
    assert sorted(p.name for p in out.iterdir()) == ["runs"]  # no report, half-written or whole
    assert len(list((out / "runs" / "dml_samplers").glob("*.json"))) == 6


def test_an_interrupt_stops_the_worker_processes_of_jobs(tmp_path):
    out = tmp_path / "report"
    env = {**os.environ, SIZES_ENV: TINY.name}
    argv = [sys.executable, "-m", "adass.cli", "reproduce", "--quick", "--jobs", "2", "--out", str(out)]
    # its own process group, as a terminal's Ctrl-C reaches the command and its workers together
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        for line in proc.stderr:  # claim 2's grid runs on the workers
            if line.startswith("[claim 2] 1/"):
                break
        os.killpg(proc.pid, signal.SIGINT)
        rest = proc.communicate(timeout=90)[1]  # workers that kept running would hold it past this
    finally:
        proc.kill()
    assert proc.returncode == 130 and "finished runs are kept under --out/runs" in rest
    assert not (out / "report.md").exists() and len(list((out / "runs" / "grid").glob("*.json"))) >= 1
