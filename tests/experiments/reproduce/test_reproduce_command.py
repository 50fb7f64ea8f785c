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
        "### (d) PowerSGD on real processes",
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
    for stem in ("dml_samplers", "dml_processes", "dml_simulated", "dml_powersgd", "quantize_summary",
                 "sparsify_summary"):  # fmt: skip
        assert (out / f"{stem}.csv").stat().st_size > 0
    _assert_powersgd_part(out, report)
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
        "runs of plan 'tiny': claim 1: 17 (samplers 6, processes 4, powersgd 3, simulated 4); claim 2: 5; "
        "claim 3: 9"
    )
    parts = ("claim 1, samplers", "claim 1, processes", "claim 1, powersgd", "claim 1, simulated", "claim 2",
             "claim 3")  # fmt: skip
    for claim in parts:
        assert re.search(rf"^\[{claim}\] \d+/\d+ ", printed.err, re.M)


def _assert_powersgd_part(out, report: str) -> None:
    """Part (d): the ring's PowerSGD beside torch's hook at the tiny plan's rank, ADASS under PowerSGD
    beside ADASS in fp32, each with accuracy, wire bytes and step time, and a verdict line of its own."""
    table = pd.read_csv(out / "dml_powersgd.csv")
    rank, adass = TINY.psgd_ranks[0], TINY.adass
    assert list(zip(table["sampler"], table["arm"], strict=True)) == [
        ("full", "ring fp32"), ("full", f"ring PowerSGD rank {rank}"), ("full", f"DDP PowerSGD rank {rank}"),
        (adass, "ring fp32"), (adass, f"ring PowerSGD rank {TINY.psgd_adass_rank}"),
    ]  # fmt: skip
    assert {"test_acc", "acc_se_pts", "wire_kB_step", "step_ms"} <= set(table.columns)
    assert table[["test_acc", "wire_kB_step", "step_ms"]].gt(0).all().all()
    # fewer bytes than fp32 on the same sampler, for the codec and the hook alike
    for sampler, group in table.groupby("sampler"):
        fp32 = group[group["arm"] == "ring fp32"]["wire_kB_step"].iloc[0]
        assert (group[group["arm"] != "ring fp32"]["wire_kB_step"] < fp32).all(), sampler
    part = report[report.index("### (d) PowerSGD") : report.index("**Verdict, claim 1")]
    for arm in table["arm"]:
        assert f"| {arm} " in part
    assert "ring PowerSGD within one standard error of torch's hook" in part
    assert "ADASS with PowerSGD within 0.5 points of ADASS fp32" in part
    assert re.search(r"^\*\*Verdict, PowerSGD: (holds|does not hold|holds only when .+)\*\*$", part, re.M)


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
