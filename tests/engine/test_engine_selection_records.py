"""SelectionRecords hold the bounds the selection was made from, so every ADASS epoch has a threshold."""

import pytest

from adass.metrics import EvalRecord, MemorySink, SelectionRecord
from adass.runtime import train
from adass.viz import selection_threshold


@pytest.mark.parametrize("replicas", [0, 2])
def test_every_adaptive_epoch_drops_only_bounds_below_what_it_keeps(tiny_config, replicas):
    config = tiny_config.replace(sampler="adass:eps=0.3,warmup=1,final=0,resample=0", epochs=4)
    sink = MemorySink()
    train(config, sink=sink, replicas=replicas)
    selection = sink.frame(SelectionRecord)
    assert sorted(selection["epoch"].unique()) == [0, 1, 2, 3]
    for epoch in (1, 2, 3):
        rows = selection[selection["epoch"] == epoch]
        assert not rows["kept"].all()  # the epoch did drop samples
        threshold = selection_threshold(rows)
        assert threshold is not None and rows.loc[rows["kept"], "bound"].min() == threshold
    assert len(sink.frame(EvalRecord)) == 4
