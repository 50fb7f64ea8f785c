"""The ADASS defaults benchmark runs end to end in quick mode and writes its table."""

from pathlib import Path

import pandas as pd

from adass.cli import main
from adass.experiments.bench import adass_defaults


def test_quick_defaults_bench_writes_every_arm(tmp_path, capsys):
    assert main(["bench", "adass_defaults", "--quick", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("# adass bench adass_defaults")
    table = pd.read_csv(tmp_path / "adass_defaults.csv")
    quantiles = table[table["study"] == "quantile"]
    assert list(quantiles["arm"]) == [f"quantile={q}" for q in adass_defaults.QUANTILES]
    assert set(table.loc[table["model"] == "logreg", "arm"]) == {"lipschitz=exact", "lipschitz=empirical",
                                                                  "lipschitz=const"}  # fmt: skip
    assert table["exceeded_frac"].between(0, 1).all() and table["backprop_frac"].between(0, 1).all()


def test_the_docs_state_the_settings_the_studies_ran_on():
    page = (Path(__file__).parents[3] / "docs" / "concepts" / "adass.md").read_text()
    section = page.split("## Choosing ADASS's defaults")[1].split("\n## ")[0]
    for options in adass_defaults.SETTINGS.values():
        assert options["data"] in section and f"lr {options['lr']}" in section
        assert f"{options['epochs']} epochs" in section
