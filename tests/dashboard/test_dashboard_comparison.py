"""The Compare tab: saved runs found under a folder, the chosen ones overlaid."""

from synthetic_records import eval_records

from adass.dashboard import RunComparison
from adass.metrics import ParquetSink


def test_comparison_finds_nested_runs_and_overlays_the_chosen(tmp_path, tiny_config):
    for where in ("a", "sweep/runs/b", "sweep/runs/c"):
        sink = ParquetSink(tmp_path / where, tiny_config.to_dict())
        for record in eval_records(3, run=where):
            sink.write(record)
        sink.close()
    (tmp_path / "not-a-run").mkdir()
    compare = RunComparison(tmp_path)
    assert compare.chosen.options == ["a", "sweep/runs/b", "sweep/runs/c"]
    compare.chosen.value = ["a", "sweep/runs/c"]
    compare.y.value = "test_loss"
    assert {c.label for c in compare.plot.object.Curve} == {"a", "sweep/runs/c"}
    assert "sampler full" in compare.table.object["what"].iloc[0]
    assert RunComparison(None).message.visible
