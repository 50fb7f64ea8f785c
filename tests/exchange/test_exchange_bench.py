"""Smoke test of ``adass bench exchange`` in quick mode."""

from __future__ import annotations

from pathlib import Path

from adass.bench import load_suite
from adass.bench.exchange import THROTTLED


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
