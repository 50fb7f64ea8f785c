"""Arms whose codec this build lacks are left out by name, once per kind; the others run."""

from adass.config import RunConfig
from adass.experiments.reproduce import TINY, claim_sparsify
from adass.experiments.reproduce.available import split_available
from adass.experiments.reproduce.grid import Arm
from adass.experiments.reproduce.plan import Plan


def test_missing_codecs_are_listed_once_per_technique(tiny_config: RunConfig):
    plan = Plan(**{**vars(TINY), "rs_arms": [("ef", "ring", "ef(randk:ratio={ratio},scale=false)"),
                                              ("nosuch", "ring", "nosuch(randk:ratio={ratio})")]})  # fmt: skip
    kept, left_out = split_available(tiny_config, claim_sparsify.arms(plan), 2, family="technique")
    assert [a.codec for a in kept] == ["ef(randk:ratio=0.1,scale=false)", "ef(randk:ratio=0.01,scale=false)"]
    assert len(left_out) == 1 and left_out[0].startswith(
        "nosuch (all its arms), e.g. ring / nosuch(randk:ratio=0.1)"
    )


def test_without_a_family_every_arm_left_out_has_its_line(tiny_config: RunConfig):
    arms = [Arm("a", "ring", "randk:ratio=0.1,nosuchkey=9"), Arm("b", "ring", "fp32")]
    kept, left_out = split_available(tiny_config, arms, 2)
    assert [a.label for a in kept] == ["b"] and "nosuchkey" in left_out[0]


def test_settings_of_claim_3_alone_reach_its_grid_and_not_claim_2s():
    from adass.experiments.reproduce import claim_quantize
    from adass.experiments.reproduce.plan import FULL

    wide = {**TINY.grids[next(iter(TINY.grids))], "model": "mlp:hidden=16"}
    plan = Plan(**{**vars(TINY), "rs_settings": {"tiny-wide": wide}})
    assert list(claim_sparsify.count(plan)) == [*TINY.grids, "tiny-wide"]
    assert list(claim_quantize.count(plan)) == list(TINY.grids)
    assert claim_sparsify.count(plan)["tiny-wide"] == claim_sparsify.count(TINY)[next(iter(TINY.grids))]
    assert TINY.sparsify() is TINY  # nothing extra: the same plan
    assert "synthetic-hard-wide" in FULL.sparsify().grids and "synthetic-hard-wide" not in FULL.grids
