"""The codec kernels benchmark runs in quick mode and writes every row it promises."""

import pandas as pd

from adass.cli import main
from adass.experiments.bench import codecs


def test_quick_codecs_bench_writes_reference_and_fused_rows(tmp_path, capsys):
    assert main(["bench", "codecs", "--quick", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("# adass bench codecs (quick)")
    table = pd.read_csv(tmp_path / "codecs.csv")
    assert (tmp_path / "codecs.md").exists()
    kernels = sorted(set(table["kernels"]))
    coded = {(spec, op) for spec in codecs.QSGD_CODECS for op in ("encode", "decode")}
    promised = set(codecs.TARGETS) | set(codecs.RING_OPS) | coded | {(codecs.SHAREDK, "choose")}
    assert ("qsgd:bits=2", "encode") in promised  # 2 bits has its fused kernels too
    assert set(zip(table["codec"], table["op"], strict=True)) == promised
    assert len(table) == len(promised) * len(kernels)
    assert (table["ms"] > 0).all() and (table["vs_baseline"] > 0).all()
