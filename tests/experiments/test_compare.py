"""``adass compare``: the schedule-matched and budget-matched controls and the per-seed wall ratio."""

import pandas as pd
import pytest

from adass.config import RunConfig
from adass.experiments.compare import (
    BUDGET_MATCHED,
    COMPARE_COLUMNS,
    SCHEDULE_MATCHED,
    compare,
    compare_runs,
    summarise,
)
from adass.sampling import build_sampler
from adass.sampling.random_subset import schedule_text
from adass.tables import markdown_table

ADASS = "adass:eps=0.4,warmup=1,final=1"


@pytest.fixture
def runs(tiny_config):
    return compare_runs(tiny_config.replace(epochs=5), [ADASS], seeds=2)


def test_every_adass_arm_brings_its_two_controls(runs):
    assert list(dict.fromkeys(runs["sampler"])) == ["full", ADASS, SCHEDULE_MATCHED, BUDGET_MATCHED]


def test_the_random_control_replays_adass_kept_counts_epoch_by_epoch(runs):
    for _, group in runs.groupby("seed"):
        by = group.set_index("sampler")
        assert by.loc[SCHEDULE_MATCHED, "kept_fracs"] == pytest.approx(by.loc[ADASS, "kept_fracs"], abs=1e-6)
        assert by.loc[SCHEDULE_MATCHED, "backprops"] == by.loc[ADASS, "backprops"]
        assert by.loc[ADASS, "kept_fracs"][0] == by.loc[ADASS, "kept_fracs"][-1] == 1.0  # warm-up, final


def test_the_full_control_trains_the_epochs_adass_backprops_pay_for(runs):
    for _, group in runs.groupby("seed"):
        by = group.set_index("sampler")
        share = by.loc[ADASS, "backprops"] / by.loc["full", "backprops"]
        assert by.loc[BUDGET_MATCHED, "epochs"] == max(1, round(share * 5))
        assert (
            by.loc[BUDGET_MATCHED, "backprops"]
            == by.loc[BUDGET_MATCHED, "epochs"] * by.loc["full", "backprops"] / 5
        )


def test_wall_ratio_is_the_median_of_per_seed_ratios():
    runs = pd.DataFrame({
        "sampler": ["full"] * 3 + ["x"] * 3, "spec": ["full"] * 3 + ["x"] * 3, "seed": [0, 1, 2] * 2,
        "test_acc": [0.9] * 6, "backprops": [10] * 6, "forwards": [10] * 6,
        "wall_s": [1.0, 2.0, 4.0, 0.5, 1.0, 40.0],  # ratios 0.5, 0.5, 10: one slow run
    })  # fmt: skip
    table = summarise(runs).set_index("sampler")
    assert table.loc["x", "wall_ratio"] == 0.5
    assert table.loc["x", "wall_ratio_iqr"] == pytest.approx(4.75)  # quartiles 0.5 and 5.25
    assert table.loc["full", "wall_ratio"] == 1.0 and table.loc["full", "wall_ratio_iqr"] == 0.0


def test_one_seed_has_no_accuracy_spread_rather_than_a_spread_of_zero():
    runs = pd.DataFrame({"sampler": ["full", "x"], "spec": ["full", "x"], "seed": [0, 0], "test_acc": [0.9, 0.8],
                         "backprops": [10, 5], "forwards": [10, 5], "wall_s": [1.0, 0.6]})  # fmt: skip
    table = summarise(runs).set_index("sampler")
    assert table["test_acc_std"].isna().all()
    rows = markdown_table(table.reset_index()[["sampler", "test_acc_std"]]).splitlines()[2:]
    assert [r.split("|")[2].strip() for r in rows] == ["-", "-"]  # printed as missing


def test_compare_writes_the_table_with_its_columns(tiny_config, tmp_path):
    table = compare(tiny_config.replace(epochs=3), ["random:ratio=0.5"], seeds=1, out_dir=tmp_path)
    assert list(table.columns) == COMPARE_COLUMNS
    assert (tmp_path / "compare.csv").exists() and (tmp_path / "compare_runs.csv").exists()


@pytest.mark.parametrize("n", [7, 240, 5000, 99_991])
def test_a_replayed_schedule_gives_back_every_count(n):
    counts = [n, 1, n // 3, n - 1, n // 2 + 1]
    sampler = build_sampler(
        f"random:schedule={schedule_text([k / n for k in counts])}", n=n, seed=0, epochs=5
    )
    assert [len(sampler.select(e)) for e in range(5)] == counts


def test_kernels_are_warmed_once_per_exchange_codec_and_memory_and_never_for_plain_fp32():
    from adass.experiments.compare import warm_kernels

    base = RunConfig.from_flat(data="synthetic:n=64,d=4,classes=2", model="logreg", replicas=2, epochs=1)
    q8 = base.replace(codec="qsgd:bits=8")
    configs = [base, q8, q8.replace(seed=3), q8.replace(codec="ef(qsgd:bits=2)")]
    assert warm_kernels(configs) == 2
    assert warm_kernels([base, RunConfig.from_flat(data="synthetic:n=64,d=4,classes=2")]) == 0
