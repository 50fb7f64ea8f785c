"""Verdicts follow the numbers: each claim's checks flip when the measurements cross their targets."""

import doctest
import math

import pandas as pd
import pytest

from adass.experiments.reproduce import (
    FULL,
    QUICK,
    TINY,
    Section,
    claim_dml,
    claim_quantize,
    claim_sparsify,
    dml_powersgd,
)
from adass.experiments.reproduce.verdict import (
    Check,
    checks_table,
    deficit_pts,
    mean_se,
    plus_minus,
    verdict,
    verdicts,
)


def _check(when: str, passed: bool) -> Check:
    return Check(when, "goal", passed, "")


def test_verdict_holds_only_when_every_setting_passes():
    assert verdict([_check("P=2", True), _check("P=4", True)]) == "holds"
    assert verdict([_check("P=2", True), _check("P=4", False)]) == "holds only when P=2"
    assert verdict([_check("P=2", False), _check("P=4", False)]) == "does not hold"
    assert verdict([]) == "does not hold"


def test_a_setting_passes_only_when_all_its_checks_do():
    checks = [_check("a", True), _check("a", False), _check("b", True), _check("c", True)]
    assert verdict(checks) == "holds only when b; c"
    assert verdict(checks[:2]) == "does not hold"


def test_mean_se_and_paired_deficit():
    mean, se = mean_se([0.8, 0.9, 1.0])
    assert mean == pytest.approx(0.9) and se == pytest.approx(0.1 / math.sqrt(3))
    assert math.isnan(mean_se([0.5])[1])
    ref, arm = pd.Series([0.90, 0.80], index=[0, 1]), pd.Series([0.89, 0.78], index=[0, 1])
    deficit, deficit_se = deficit_pts(ref, arm)
    assert deficit == pytest.approx(1.5) and deficit_se == pytest.approx(0.5)
    assert plus_minus(1.5, 0.5) == "+1.50 ± 0.50" and plus_minus(1.5, float("nan")) == "+1.50 (one seed)"


def _q_table(deficits: dict[tuple[int, bool], float]) -> pd.DataFrame:
    rows = [
        {"arm": "fp32", "bits": None, "strategy": None, "ef": None, "deficit_pts": 0.0, "deficit_se_pts": 0.1}
    ]
    rows += [
        {
            "arm": f"q{b}{ef}",
            "bits": b,
            "strategy": "shared_scale",
            "ef": ef,
            "deficit_pts": d,
            "deficit_se_pts": 0.1,
        }
        for (b, ef), d in deficits.items()
    ]
    return pd.DataFrame(rows)


def test_quantize_verdict_flips_with_the_accuracy_deficit():
    good = {(4, False): 0.4, (2, True): 0.9, (2, False): 5.0}  # 2 bits without EF is reported only
    assert verdict(claim_quantize.checks(_q_table(good))) == "holds"
    worse_4 = {**good, (4, False): 0.6}
    assert verdict(claim_quantize.checks(_q_table(worse_4))) == "holds only when 2 bits, shared_scale, ef"
    worse_both = {**worse_4, (2, True): 1.1}
    assert verdict(claim_quantize.checks(_q_table(worse_both))) == "does not hold"
    assert claim_quantize.tolerance_pts(8, False) == 0.5 and claim_quantize.tolerance_pts(2, False) is None


def _rs_table(arms: list[tuple[float, str, float, float]]) -> pd.DataFrame:
    rows = [
        {
            "arm": "fp32",
            "ratio": None,
            "technique": None,
            "deficit_pts": 0.0,
            "deficit_se_pts": 0.0,
            "wire_frac": 1.0,
        }
    ]
    rows += [
        {
            "arm": f"{t} {r}",
            "ratio": r,
            "technique": t,
            "deficit_pts": d,
            "deficit_se_pts": 0.1,
            "wire_frac": w,
        }
        for r, t, d, w in arms
    ]
    return pd.DataFrame(rows)


def test_sparsify_verdict_flips_with_accuracy_and_wire_bytes():
    arms = [(0.1, "ef", 0.3, 0.105), (0.01, "ef", 0.8, 0.015), (0.001, "ef", 9.0, 0.002)]
    assert verdict(claim_sparsify.checks(_rs_table(arms))) == "holds"
    too_many_bytes = [(0.1, "ef", 0.3, 0.12), *arms[1:]]
    assert verdict(claim_sparsify.checks(_rs_table(too_many_bytes))) == "holds only when ratio 0.01, ef"
    less_accurate = [arms[0], (0.01, "ef", 1.2, 0.015), arms[2]]
    assert verdict(claim_sparsify.checks(_rs_table(less_accurate))) == "holds only when ratio 0.1, ef"


def test_simulated_ring_against_ps_flips_with_step_time():
    def sim(ring_ms: float) -> pd.DataFrame:
        return pd.DataFrame([
            {"workers": 8, "exchange": "ring", "comm_ms_1gbit": ring_ms, "comm_ms_10gbit": 1.0},
            {"workers": 8, "exchange": "PS", "comm_ms_1gbit": 5.0, "comm_ms_10gbit": 2.0},
        ])  # fmt: skip

    assert verdict(claim_dml.simulated_checks(sim(4.0))) == "holds"
    assert verdict(claim_dml.simulated_checks(sim(6.0))) == "holds only when P=8 simulated, 10gbit"


def test_adass_against_full_flips_with_accuracy_and_backprops():
    def runs(adass_acc: float) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {"dataset": "d", "sampler": s, "seed": k, "test_acc": a}
                for k in range(2)
                for s, a in (("full", 0.90), ("adass", adass_acc))
            ]
        )

    def table(frac: float) -> pd.DataFrame:
        return pd.DataFrame([{"dataset": "d", "sampler": "adass", "backprop_frac": frac}])

    assert verdict(claim_dml.sampler_checks(runs(0.897), table(0.6))) == "holds"
    assert verdict(claim_dml.sampler_checks(runs(0.890), table(0.6))) == "does not hold"
    assert verdict(claim_dml.sampler_checks(runs(0.897), table(1.0))) == "does not hold"


def test_powersgd_against_the_hook_and_adass_fp32_flips_with_accuracy():
    plan = QUICK  # ranks 1, 2 and 4; two seeds

    def runs(ring_rank_2: list[float], adass_psgd: list[float]) -> pd.DataFrame:
        rows = []
        for arm in dml_powersgd.arms(plan):
            for seed in range(2):
                if arm.sampler == plan.adass:
                    acc = adass_psgd[seed] if arm.rank else 0.900
                elif arm.kind == "ring" and arm.rank == 2:
                    acc = ring_rank_2[seed]
                else:
                    acc = 0.900 + 0.004 * seed
                rows.append({"sampler": arm.sampler, "arm": arm.name, "seed": seed, "test_acc": acc})
        return pd.DataFrame(rows)

    def judged(ring_rank_2: list[float], adass_psgd: list[float]) -> str:
        return verdict(
            dml_powersgd.checks(runs(ring_rank_2, adass_psgd), plan, claim_dml.ADASS_TOLERANCE_PTS)
        )

    assert judged([0.900, 0.904], [0.898, 0.899]) == "holds"
    # 0.5 points below the hook on average, with a standard error of 0.1 point
    assert judged([0.894, 0.900], [0.898, 0.899]) == "holds only when rank 1; rank 4; ADASS, rank 4"
    assert judged([0.910, 0.920], [0.898, 0.899]) == "holds"  # above the hook passes
    assert judged([0.900, 0.904], [0.890, 0.899]) == "holds only when rank 1; rank 2; rank 4"
    one_seed = runs([0.900, 0.904], [0.898, 0.899]).query("seed == 0")
    checks = dml_powersgd.checks(one_seed, plan, claim_dml.ADASS_TOLERANCE_PTS)
    assert verdict(checks) == "holds" and "(one seed)" in checks[0].measured


def test_hook_wire_bytes_follow_torchs_rule_after_its_plain_steps():
    assert doctest.testmod(dml_powersgd).failed == 0
    shapes = [(128, 784), (128,), (10, 128), (10,)]  # the full plan's MLP
    numel = 784 * 128 + 128 + 1280 + 10
    # P = 4: each value 2 * 3 / 4 times by each of four ranks, four bytes
    assert dml_powersgd.hook_wire_bytes(shapes, 4, 4, 2) == 2 * 3 * 4 * numel
    compressed = (128 + 784) * 4 + (10 + 128) * 4 + 128 + 10  # both matrices are worth it at rank 4
    assert dml_powersgd.hook_wire_bytes(shapes, 4, 4, 102) == pytest.approx(
        2 * 3 * 4 * (2 * numel + 100 * compressed) / 102
    )
    # at rank 8 the (10, 128) layer travels whole, as torch decides
    at_8 = (128 + 784) * 8 + 1280 + 128 + 10
    assert dml_powersgd.hook_wire_bytes(shapes, 8, 2, 1002) == pytest.approx(
        2 * 4 * (2 * numel + 1000 * at_8) / 1002
    )


def test_a_claim_on_two_data_sets_gets_a_verdict_for_each():
    def table(hard_deficit: float) -> pd.DataFrame:
        frame = pd.concat([_q_table({(4, True): 0.2}).assign(setting="mnist5k"),
                           _q_table({(4, True): hard_deficit}).assign(setting="synthetic-hard")])  # fmt: skip
        return frame[["setting", *frame.columns[:-1]]]

    section = Section("quantize", "claim", checks=claim_quantize.checks(table(0.3)))
    assert verdicts(section.checks) == {"mnist5k": "holds", "synthetic-hard": "holds"}
    assert section.verdict == "mnist5k: holds; synthetic-hard: holds"
    section.checks = claim_quantize.checks(table(0.7))
    assert section.verdict == "mnist5k: holds; synthetic-hard: does not hold"
    lines = section.markdown(2)
    assert "**Verdict, claim 2, mnist5k: holds**" in lines
    assert "**Verdict, claim 2, synthetic-hard: does not hold**" in lines
    assert "setting" in checks_table(section.checks).columns
    # one data set: the plain verdict line and no setting column
    single = Section("quantize", "claim", checks=claim_quantize.checks(_q_table({(4, True): 0.2})))
    assert "**Verdict, claim 2: holds**" in single.markdown(2)
    assert "setting" not in checks_table(single.checks).columns


def test_the_full_plan_runs_the_grids_on_both_data_sets():
    assert list(FULL.grids) == ["mnist5k", "synthetic-hard"]
    assert FULL.grids["synthetic-hard"]["data"].startswith("synthetic:n=6000")
    assert len(QUICK.grids) == len(TINY.grids) == 1


def test_brief_counts_the_passing_arms_of_each_group_instead_of_listing_them():
    from adass.experiments.reproduce.verdict import Check, brief

    checks = [Check(f"ratio {r}, {arm}", goal, passed, "")
              for r, arms in (("0.1", {"ef": True, "mc": True, "dmc": False}), ("0.01", {"ef": False, "dmc": True}))
              for arm, passed in arms.items() for goal in ("accuracy", "wire bytes")]  # fmt: skip
    assert brief(checks) == "holds only at ratio 0.1 (2 of 3 arms) and ratio 0.01 (1 of 2 arms)"
    assert brief([Check("ratio 0.1, ef", "g", True, "")]) == "holds"
    assert brief([Check("P=2", "g", True, ""), Check("P=4", "g", False, "")]) == "holds only when P=2"


def test_the_report_summary_has_one_short_row_per_claim_and_data_set():
    from adass.experiments.reproduce.report import _summary
    from adass.experiments.reproduce.section import Section
    from adass.experiments.reproduce.verdict import Check

    arms = [f"ratio 0.1, arm{k}" for k in range(15)]
    section = Section("sparsify", "RS-ADASS keeps accuracy",
                      checks=[Check(when, "g", k < 12, "", data) for data in ("a", "b") for k, when in enumerate(arms)])  # fmt: skip
    rows = [line for line in _summary([section]) if line.startswith("| 1.") or line.startswith("|  |")]
    assert rows == ["| 1. RS-ADASS keeps accuracy | a | holds only at ratio 0.1 (12 of 15 arms) |",
                    "|  | b | holds only at ratio 0.1 (12 of 15 arms) |"]  # fmt: skip
