"""The bench behind ADASS's default budget: every candidate beside full training, and its table."""

from pathlib import Path

import pandas as pd
import pytest

from adass.cli import main
from adass.experiments.bench import adass_choice
from adass.sampling import SAMPLERS


def test_quick_choice_bench_runs_every_candidate_against_full(tmp_path, capsys):
    assert main(["bench", "adass_choice", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "# adass bench adass_choice" in out
    table = pd.read_csv(tmp_path / "adass_choice.csv")
    assert list(table["spec"]) == list(adass_choice.CANDIDATES)
    assert table["backprop_frac"].between(0.05, 1.0).all() and (table["seeds"] == 1).all()
    runs = pd.read_csv(tmp_path / "adass_choice_runs.csv")
    assert set(runs["spec"]) == {"full", *adass_choice.CANDIDATES}
    report = (tmp_path / "adass_choice.md").read_text()
    defaults = next(line for line in report.splitlines() if line.startswith("| adass ")).split("|")
    assert (
        defaults[2].strip() == "the defaults" and " at " in defaults[3] and "±" not in defaults[3]
    )  # one seed
    assert "`synthetic-tiny`: `synthetic:n=400,d=8,classes=3,test=100`, `mlp:hidden=16`, lr 0.05" in report


def test_every_setting_is_described_with_its_optimiser_filled_in():
    for options in adass_choice.SETTINGS.values():  # the image setting's data is written by the bench
        assert adass_choice.describe(options).endswith(f"{options['epochs']} epochs")
    short = adass_choice.describe(adass_choice.SETTINGS["short-3"])
    assert "lr 0.1, batch 32, constant schedule, 3 epochs" in short
    assert "lr 0.02, batch 64, cosine schedule, 8 epochs" in adass_choice.describe(
        adass_choice.SETTINGS["images-32"]
    )


def test_a_cell_is_the_mean_gap_its_standard_error_and_the_cost():
    rows = []
    for seed, (full, mine, spent) in enumerate([(0.90, 0.89, 60), (0.80, 0.81, 70), (0.85, 0.85, 65)]):
        rows += [{"setting": "s", "spec": "full", "seed": seed, "test_acc": full, "backprops": 100, "train_s": 2.0},
                 {"setting": "s", "spec": "adass", "seed": seed, "test_acc": mine, "backprops": spent,
                  "train_s": 1.0}]  # fmt: skip
    table = adass_choice.summarise(pd.DataFrame(rows))
    assert table.loc[0, "gap_points"] == pytest.approx(0.0, abs=1e-9)  # -1, +1, 0 points
    assert table.loc[0, "gap_se"] == pytest.approx(1 / 3**0.5)  # sd 1 over 3 seeds
    assert table.loc[0, "backprop_frac"] == pytest.approx(0.65) and table.loc[0, "time_frac"] == 0.5
    assert adass_choice.cells(table).loc[0, "s"] == "+0.00 ± 0.58 at 0.650"


def test_the_defaults_are_the_first_candidate_and_every_candidate_is_a_valid_spec():
    assert adass_choice.CANDIDATES[0] == "adass"
    for spec in adass_choice.CANDIDATES:
        SAMPLERS.resolve(spec)  # raises on a name, a knob or a value that does not exist


def test_the_docs_name_every_setting_of_the_choice():
    page = (Path(__file__).parents[3] / "docs" / "concepts" / "adass.md").read_text()
    section = page.split("## Choosing ADASS's defaults")[1].split("\n## ")[0]
    assert "adass bench adass_choice" in section
    for name, options in adass_choice.SETTINGS.items():
        assert name in section
        if name not in adass_choice.FRONTIER:  # the frontier's own are stated on the results page
            assert options["data"] in section and f"{options['epochs']} epochs" in section


def test_the_settings_option_names_every_setting_of_both_suites():
    from adass.cli.command_options import BenchOptions
    from adass.experiments.bench import frontier

    doc = BenchOptions.param["settings"].doc
    for name in {*frontier.SETTINGS, *adass_choice.SETTINGS}:
        assert name in doc
