"""The samplers benchmark runs end to end in quick mode and writes its tables."""

from pathlib import Path

import pandas as pd

from adass.cli import main
from adass.data import load_dataset
from adass.experiments.bench import samplers
from adass.experiments.compare import BUDGET_MATCHED, SCHEDULE_MATCHED


def test_quick_bench_writes_tables(tmp_path, capsys):
    assert main(["bench", "samplers", "--quick", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert SCHEDULE_MATCHED in printed and "at least 30% fewer backprops" in printed
    assert "within 2 points of a standardized PyTorch MLP" in printed
    table = pd.read_csv(tmp_path / "samplers.csv")
    assert set(samplers.BASELINES) | {SCHEDULE_MATCHED, BUDGET_MATCHED} <= set(table["sampler"])
    assert (table.loc[table["sampler"] == "full", "backprop_frac"] == 1.0).all()
    assert (tmp_path / "samplers.md").read_text().startswith("# adass bench samplers")
    runs = pd.read_csv(tmp_path / "samplers_runs.csv")
    adass_bp = runs.loc[runs["sampler"] == samplers.ADASS, "backprops"].item()
    assert runs.loc[runs["sampler"] == SCHEDULE_MATCHED, "backprops"].item() == adass_bp


def test_the_off_centre_set_has_the_stated_statistics(tmp_path):
    folder = samplers.off_centre_idx(tmp_path / "idx")
    raw = load_dataset(f"idx:{folder},classes=10,standardize=off").x_train
    assert raw.shape[1:] == (40,) and float(raw.min()) >= 0.0 and float(raw.max()) <= 1.0
    assert abs(float(raw.mean()) - 0.55) < 0.01 and abs(float(raw.std(0).mean()) - 0.10) < 0.01


def test_the_docs_state_the_settings_the_suite_runs():
    page = (Path(__file__).parents[3] / "docs" / "results" / "benchmarks.md").read_text()
    section = page.split("(`adass bench samplers`)")[1].split("\n## ")[0]
    for name, options in samplers.SETTINGS.items():
        row = next(line for line in section.splitlines() if line.startswith(f"| {name} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        model = f"`{options['model']}`, {options['lr']}"
        assert cells == [name, f"`{options['data']}`", model, str(options["epochs"])]
