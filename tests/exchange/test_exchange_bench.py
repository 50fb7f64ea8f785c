"""Smoke test of ``adass bench exchange`` in quick mode."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from adass.experiments.bench import load_suite
from adass.experiments.bench.exchange import THROTTLED, limits


def test_quick_bench_writes_both_files(tmp_path: Path, capsys) -> None:
    frame = load_suite("exchange").run(tmp_path, quick=True)
    assert (tmp_path / "exchange.md").read_text().startswith("# adass bench exchange")
    assert (tmp_path / "exchange.csv").exists()
    assert set(frame.part) == {"simulated", "loopback", "throttled"}
    sim = frame[frame.part == "simulated"]
    assert (sim[sim.codec == "fp32"].rel_error < 1e-6).all()
    assert (frame[frame.part == "loopback"].throughput_ratio > 0).all()
    assert "## Goals" in capsys.readouterr().out
    slow = frame[frame.part == "throttled"].set_index("codec")
    assert sorted(slow.index) == sorted(THROTTLED)
    assert slow.loc["fp32", "speedup_vs_fp32"] == 1.0  # paired with itself, round by round
    assert (slow.speedup_vs_fp32 > 0).all()
    wire = slow.wire_bytes_rank
    assert wire["randk:ratio=0.01"] < wire["qsgd:bits=8"] < wire["fp32"]
    bounds = slow[["cpu_s_rank", "cpu_s_all", "cpu_floor_s", "own_core_s", "model_s"]]
    assert (bounds.cpu_s_rank > 0).all() and (bounds.cpu_s_all >= bounds.cpu_s_rank).all()
    assert (bounds.cpu_floor_s >= bounds.cpu_s_rank).all()
    assert (bounds.own_core_s >= bounds[["cpu_s_rank", "model_s"]].max(axis=1)).all()
    assert slow.loc["fp32", "own_core_speedup"] == 1.0
    assert "## What bounds the throttled times" in (tmp_path / "exchange.md").read_text()


def test_limits_name_what_bounds_a_throttled_time() -> None:
    # 4 ranks on 2 cores: fp32 waits on the link; random-k's CPU (8 ms summed, 4 ms a core) is
    # more than its 1 ms on the link, but with a core per rank its busiest rank (2.5 ms) decides
    frame = pd.DataFrame([
        {"part": "throttled", "workers": 4, "size_mb": 10.0, "codec": "fp32", "cores": 2,
         "cpu_s_rank": 0.010, "cpu_s_all": 0.036, "model_s": 0.120},
        {"part": "throttled", "workers": 4, "size_mb": 10.0, "codec": "randk:ratio=0.01", "cores": 2,
         "cpu_s_rank": 0.0025, "cpu_s_all": 0.008, "model_s": 0.001},
        {"part": "loopback", "workers": 4, "size_mb": 10.0, "codec": "fp32"},
    ])  # fmt: skip
    limits(frame)
    fp32, randk, loop = frame.iloc[0], frame.iloc[1], frame.iloc[2]
    assert fp32.limit == "link" and randk.limit == "cpu"
    assert fp32.cpu_floor_s == pytest.approx(0.018) and randk.cpu_floor_s == pytest.approx(0.004)
    assert fp32.own_core_s == pytest.approx(0.120) and randk.own_core_s == pytest.approx(0.0025)
    assert randk.own_core_speedup == pytest.approx(48.0) and fp32.own_core_speedup == pytest.approx(1.0)
    assert pd.isna(loop.own_core_s)
