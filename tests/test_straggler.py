"""``--straggler``: its two forms parse and print back, bad values fail in one line, the slowed
replica is the one named (or each in turn), and a run's config.json keeps it."""

import pytest

from adass.config import RunConfig
from adass.registry import SpecError
from adass.straggler import Straggler, parse_straggler


@pytest.mark.parametrize("text", ["0:0.05", "3:1.5", "rotate:0.05:10"])
def test_a_straggler_prints_as_it_is_written(text):
    assert str(parse_straggler(text)) == text


def test_nobody_is_slowed_without_a_straggler():
    nobody = parse_straggler("")
    assert nobody == Straggler() and str(nobody) == ""
    assert all(nobody.delay_s(rank, step, 4) == 0 for rank in range(4) for step in range(10))


def test_a_fixed_straggler_slows_its_rank_in_every_step():
    s = parse_straggler("2:0.25")
    assert [s.delay_s(r, step, 4) for step in (0, 7) for r in range(4)] == [0, 0, 0.25, 0] * 2


def test_a_rotating_straggler_slows_each_replica_in_turn():
    s = parse_straggler("rotate:0.1:3")
    slowed = [[r for r in range(3) if s.delay_s(r, step, 3)] for step in range(12)]
    assert slowed == [[0]] * 3 + [[1]] * 3 + [[2]] * 3 + [[0]] * 3


@pytest.mark.parametrize(
    "text", ["x", "1", "-1:0.1", "1:0", "1:61", "rotate:0.1", "rotate:0.1:0", "a:b", "1:0.1:2"]
)
def test_a_bad_straggler_is_refused_in_one_line(text):
    with pytest.raises(SpecError) as info:
        RunConfig.from_flat(workers=2, straggler=text)
    message = str(info.value)
    assert "\n" not in message and message.startswith("--straggler") and repr(text) in message
    assert "RANK:DELAY_S" in message and "rotate:DELAY_S:STEPS" in message


def test_a_straggler_must_be_a_replica_of_the_run():
    with pytest.raises(
        SpecError, match=r"--straggler: rank 2 is not a replica of --workers 2; expected 0..1"
    ):
        RunConfig.from_flat(workers=2, straggler="2:0.1")
    with pytest.raises(SpecError, match="--straggler.*needs --workers"):
        RunConfig.from_flat(straggler="0:0.1")


def test_the_run_configuration_keeps_the_straggler():
    config = RunConfig.from_flat(workers=3, straggler="rotate:0.05:4")
    assert config.to_dict()["cluster"]["straggler"] == "rotate:0.05:4"
    assert RunConfig.from_dict(config.to_dict()).cluster.straggler == "rotate:0.05:4"
    old = config.to_dict()
    del old["cluster"]["straggler"]  # a run saved before the option existed
    assert RunConfig.from_dict(old).cluster.straggler == ""
