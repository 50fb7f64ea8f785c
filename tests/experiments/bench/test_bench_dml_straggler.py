"""The straggler case of the dml benchmark runs end to end in quick mode and writes its tables
(timings are not asserted); its option is refused where it does not apply."""

import pandas as pd
import pytest

from adass.cli import main
from adass.experiments.bench import dml_straggler


def test_quick_straggler_bench_writes_tables(tmp_path, capsys):
    assert main(["bench", "dml", "--quick", "--straggler-only", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "an SSP arm >= 1.5x faster than the sync ring" in printed and "async reported" in printed
    assert (tmp_path / "dml_straggler.md").read_text().startswith("# adass bench dml: a straggler")
    assert not (tmp_path / "dml.md").exists()  # the other parts did not run

    table = pd.read_csv(tmp_path / "dml_straggler.csv")
    assert list(table.columns) == dml_straggler.COLUMNS
    plan = dml_straggler.QUICK
    assert len(table) == len(plan.stragglers) * len(dml_straggler.ARMS)
    assert list(table["arm"]) == list(dml_straggler.ARMS) * len(plan.stragglers)
    ring = table[table["arm"] == "ring sync"]
    assert (ring["speedup_vs_ring"] == 1.0).all() and (ring["acc_vs_ring_pts"] == 0.0).all()
    in_lock_step = table["arm"].isin(["ring sync", "ps sync"])
    assert (table.loc[in_lock_step, "staleness_max"] == 0).all()
    assert (table["epoch_s"] > 0).all() and table["test_acc"].between(0, 1).all()
    ssp = table[table["arm"].str.contains("ssp")]
    assert (ssp["staleness_max"] >= 0).all()
    runs = pd.read_csv(tmp_path / "dml_straggler_runs.csv")
    assert len(runs) == len(table) * len(plan.seeds)


@pytest.mark.parametrize("argv, words", [
    (["bench", "exchange", "--straggler-only"], ["--straggler-only", "'exchange'"]),
    (["bench", "dml", "--straggler-only", "--netlab", "1gbit"], ["--straggler-only", "--netlab"]),
])  # fmt: skip
def test_the_straggler_only_option_is_refused_where_it_does_not_apply(argv, words, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(w in err[0] for w in words)
