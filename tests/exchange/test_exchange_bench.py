"""Smoke test of ``adass bench exchange`` in quick mode."""

from __future__ import annotations

from pathlib import Path

from adass.bench import load_suite


def test_quick_bench_writes_both_files(tmp_path: Path, capsys) -> None:
    frame = load_suite("exchange").run(tmp_path, quick=True)
    assert (tmp_path / "exchange.md").read_text().startswith("# adass bench exchange")
    assert (tmp_path / "exchange.csv").exists()
    assert set(frame.part) == {"simulated", "loopback", "throttled"}
    sim = frame[frame.part == "simulated"]
    assert (sim[sim.codec == "fp32"].rel_error < 1e-6).all()
    assert (frame[frame.part == "loopback"].throughput_ratio > 0).all()
    assert "## Goals" in capsys.readouterr().out
