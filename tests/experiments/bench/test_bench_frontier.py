"""The frontier bench: every method over its knob in quick mode, and the comparison of frontiers,
which must find a method that lies above another by what it lies above, and say when they are level."""

import math
import zlib

import numpy as np
import pandas as pd
import pytest

from adass.cli import main
from adass.experiments.bench import frontier


def _runs(offsets: dict[str, float], seeds: int = 6, noise: float = 0.002) -> pd.DataFrame:
    """Made-up runs: every method's accuracy is one curve of its cost plus its own offset and seed noise
    (a method with a spec of its own, such as ``adass_drop``, draws from a generator of its own,
    so it changes none of the others' draws)."""
    shared, rows = np.random.default_rng(0), []
    for method, (knob, values) in frontier.METHODS.items():
        rng = np.random.default_rng(zlib.crc32(method.encode())) if method in frontier.SPECS else shared
        for i, value in enumerate(values):
            cost = 0.3 + 0.7 * i / max(1, len(values) - 1)  # every method spans the same costs
            for seed in range(seeds):
                acc = 0.6 + 0.3 * math.sqrt(cost) + offsets.get(method, 0.0) + rng.normal(scale=noise)
                rows.append({"method": method, "knob": knob, "value": value, "seed": seed, "test_acc": acc,
                             "backprop_frac": cost, "time_frac": cost * 1.1})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_frontier_above_another_is_found_above_by_its_margin():
    table = frontier.compare_frontiers(_runs({"adass": 0.02, "random": -0.01})).set_index("against")
    assert table.loc["full", "acc_gap_backprops"] == pytest.approx(0.02, abs=0.002)
    assert table.loc["random", "acc_gap_backprops"] == pytest.approx(0.03, abs=0.002)
    assert table.loc["random", "acc_gap_time"] == pytest.approx(0.03, abs=0.002)
    assert table.loc["full", "verdict"].startswith("adass above by")
    assert table.loc["full", "cost_gap_backprops"] < 0  # adass reaches the same accuracy for less


def test_frontiers_within_noise_are_called_level_and_a_lower_one_below():
    table = frontier.compare_frontiers(_runs({"infobatch": 0.0005, "random": 0.05}, noise=0.01)).set_index(
        "against"
    )
    assert table.loc["infobatch", "verdict"] == "level (within 1 se)"
    assert table.loc["random", "verdict"].startswith("random above by")
    assert table.loc["random", "acc_gap_backprops"] == pytest.approx(-0.05, abs=0.01)


def test_frontiers_that_share_no_cost_are_not_compared():
    runs = _runs({})
    runs.loc[runs["method"] == "random", "backprop_frac"] /= 10  # 0.03 .. 0.1: below every other cost
    assert frontier.compare_frontiers(runs).set_index("against").loc["random", "verdict"] == "no overlap"


def test_adass_over_all_its_knobs_follows_whichever_curve_is_higher_at_each_cost():
    runs = _runs({}, noise=0.001)
    other_curve = runs["method"] == "adass_drop"
    dear = runs["backprop_frac"] > 0.65
    runs.loc[other_curve & dear, "test_acc"] += 0.03  # above adass where it costs more
    runs.loc[other_curve & ~dear, "test_acc"] -= 0.03  # below where it costs less
    gaps = {ours: frontier.compare_frontiers(runs, ours).set_index("against") for ours in frontier.OURS}
    best = gaps["adass_best"]
    assert "adass" not in best.index and "adass_drop" not in best.index  # not against its own curves
    for other in ("random", "infobatch", "full"):
        each = [gaps[m].loc[other, "acc_gap_backprops"] for m in ("adass", "adass_drop")]
        assert best.loc[other, "acc_gap_backprops"] > max(each) + 0.005  # each curve where it is the higher
        assert best.loc[other, "verdict"].startswith("adass_best above by")


def test_an_envelope_of_curves_on_different_seeds_is_refused():
    runs = _runs({})
    runs = runs[~((runs["method"] == "adass_drop") & (runs["seed"] == 0))]
    with pytest.raises(ValueError, match="different numbers of seeds"):
        frontier.compare_frontiers(runs, "adass_best")


def test_quick_frontier_bench_runs_every_method_over_its_knob(tmp_path, capsys):
    assert main(["bench", "frontier", "--quick", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("# adass bench frontier") == 1
    points = pd.read_csv(tmp_path / "frontier_points.csv")
    expected = {(m, v) for m, (_, values) in frontier.METHODS.items() for v in values}
    assert set(zip(points["method"], points["value"], strict=True)) == expected
    assert (points["seeds"] == 2).all()
    full = points[points["method"] == "full"].set_index("value")
    assert full.loc[1.0, "backprop_frac"] == 1.0 and full.loc[0.5, "backprop_frac"] == 0.5
    table = pd.read_csv(tmp_path / "frontier.csv")
    for ours in frontier.OURS:  # each of ADASS's curves against every other method
        others = [m for m in frontier.METHODS if m != ours and m not in frontier.ENVELOPES.get(ours, ())]
        assert list(table.loc[table["ours"] == ours, "against"]) == others
    assert (tmp_path / "frontier_synthetic-tiny.png").stat().st_size > 10_000
    assert "ADASS at its defaults" in (tmp_path / "frontier.md").read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["bench", "samplers", "--seeds", "3"],
            "--seeds: only the frontier, adass_choice and faults suites take it, not 'samplers'",
        ),
        (["bench", "frontier", "--settings", "mnist5k,cifar"], "--settings: 'cifar' is not a setting"),
        (["bench", "frontier", "--settings", "short-3"], "'short-3' is not a setting of the frontier suite"),
        (
            ["bench", "adass_choice", "--settings", "short-3,long"],
            "'long' is not a setting of the adass_choice",
        ),
        (
            ["bench", "samplers", "--settings", "mnist5k"],
            "--settings: only the frontier and adass_choice suites",
        ),
    ],
)
def test_frontier_options_are_refused_where_they_mean_nothing(tmp_path, capsys, argv, message):
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
