"""The samplers benchmark runs end to end in quick mode and writes its tables."""

import pandas as pd

from adass.bench import samplers
from adass.cli import main


def test_quick_bench_writes_tables(tmp_path, capsys):
    assert main(["bench", "samplers", "--quick", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "random (matched to adass)" in printed and "at least 35% fewer backprops" in printed
    table = pd.read_csv(tmp_path / "samplers.csv")
    assert set(samplers.BASELINES) <= set(table["sampler"])
    assert (table.loc[table["sampler"] == "full", "backprop_frac"] == 1.0).all()
    assert (tmp_path / "samplers.md").read_text().startswith("# adass bench samplers")
    runs = pd.read_csv(tmp_path / "samplers_runs.csv")
    adass_bp = runs.loc[runs["sampler"] == samplers.ADASS, "backprops"].item()
    matched_bp = runs.loc[runs["sampler"] == "random (matched to adass)", "backprops"].item()
    assert abs(adass_bp - matched_bp) <= 0.01 * runs["backprops"].max()
