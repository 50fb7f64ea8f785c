"""The colocated-PS comparison runs end to end at tiny sizes and writes its table (timings are not asserted)."""

import pandas as pd

from adass.cli import main
from adass.experiments.bench import dml_colocated


def test_quick_colocated_bench_writes_its_table_and_goals(tmp_path, capsys):
    assert main(["bench", "dml_colocated", "--quick", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "colocated PS epoch time no worse than dedicated" in printed
    assert (tmp_path / "dml_colocated.md").read_text().startswith("# adass bench dml_colocated")
    table = pd.read_csv(tmp_path / "dml_colocated.csv")
    assert list(table.columns) == dml_colocated.COLUMNS
    plan = dml_colocated.QUICK_PLAN
    p, s = plan.workers, plan.servers
    assert list(zip(table["update"], table["placement"], strict=True)) == [
        ("replica", "dedicated"),
        ("replica", "colocated"),
        ("server", "dedicated"),
        ("server", "colocated"),
    ]
    by = table.set_index(["update", "placement"])
    for update in ("replica", "server"):
        # the ranks that exchanged: P replicas, plus S server workers only where they are dedicated
        assert by.loc[(update, "colocated"), "dask_workers"] == p
        assert by.loc[(update, "dedicated"), "dask_workers"] == p + s
        assert by.loc[(update, "colocated"), "messages_step"] == 2 * (p - 1) * s
        assert by.loc[(update, "dedicated"), "messages_step"] == 2 * p * s
        assert by.loc[(update, "colocated"), "test_acc"] == by.loc[(update, "dedicated"), "test_acc"]
        assert by.loc[(update, "colocated"), "epoch_vs_dedicated"] > 0
    goals = dml_colocated.targets(table)
    assert len(goals) == 6 and set(goals["met"]) <= {"yes", "no"}
    assert (goals[goals["goal"].str.contains("Dask workers|accuracy")]["met"] == "yes").all()
