"""``adass bench equivalence``: its grid covers every axis, and its verdict sees a changed bit."""

import pytest

from adass.cli import main
from adass.experiments.bench.equivalence import MEMORIES, SAMPLERS, cases, compare


def test_the_grid_covers_sixty_runs_over_every_axis():
    grid = cases()
    assert len(grid) >= 60
    assert {c["backend"] for c in grid} == {"local", "threads", "dask"}
    assert {c["flat"]["sampler"] for c in grid} == set(SAMPLERS)
    assert set(MEMORIES) <= {c["flat"].get("codec") for c in grid}
    assert len({c["id"] for c in grid}) == len(grid)


def test_a_changed_digest_or_byte_count_or_an_error_is_not_equivalent():
    grid = cases(quick=True)[:4]
    old = {c["id"]: {"digest": "a", "wire_bytes": 10, "test_acc": 0.5} for c in grid}
    new = {k: dict(v) for k, v in old.items()}
    ids = [c["id"] for c in grid]
    new[ids[1]]["digest"] = "b"
    new[ids[2]]["wire_bytes"] = 11
    new[ids[3]] = {"error": "SpecError: refused"}
    table = compare(grid, old, new)
    assert table["same_parameters"].tolist() == [True, False, True, False]
    assert table["same_wire_bytes"].tolist() == [True, True, False, False]
    assert table["error"].tolist()[3] == "SpecError: refused"


@pytest.mark.parametrize(
    "args, message",
    [
        (["bench", "equivalence"], "--against: the equivalence suite needs the git revision"),
        (["bench", "codecs", "--against", "HEAD"], "--against: only the equivalence suite"),
    ],
)
def test_against_is_checked_before_anything_runs(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    assert main([*args, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())
