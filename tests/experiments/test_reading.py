"""The two lines under a comparison table compare rows that differ in one thing only."""

import pandas as pd

from adass.experiments.reading import reading


def _row(sampler, exchange, codec, acc, backprop, wall, wire, epoch_s):
    return {"sampler": sampler, "exchange": exchange, "codec": codec, "seeds": 1, "test_acc": acc,
            "backprop_frac": backprop, "wall_ratio": wall, "wire_bytes": wire, "epoch_s": epoch_s}  # fmt: skip


def test_a_distributed_grid_reads_as_exchange_codec_and_selection():
    table = pd.DataFrame([
        _row("full", "ps", "fp32", 0.95, 1.0, 1.0, 400e6, 4.0),
        _row("full", "ring", "fp32", 0.95, 1.0, 0.25, 300e6, 1.0),
        _row("full", "ring", "qsgd:bits=8", 0.95, 1.0, 0.125, 75e6, 0.5),
        _row("full", "ps", "qsgd:bits=8", 0.95, 1.0, 0.5, 100e6, 2.0),
        _row("adass:eps=0.3", "ps", "fp32", 0.94, 0.7, 0.7, 280e6, 2.8),
        _row("adass:eps=0.3", "ring", "qsgd:bits=8", 0.94, 0.7, 0.1, 52e6, 0.4),
        _row("random (schedule-matched)", "ring", "qsgd:bits=8", 0.93, 0.7, 0.1, 52e6, 0.4),
    ])  # fmt: skip
    communication, selection = reading(table)
    assert "the ring instead of the PS takes 1.00 s an epoch against 4.00 s (4.0x faster)" in communication
    assert "qsgd:bits=8 instead of fp32 sends 75.0 MB against 300.0 MB (4.0x less)" in communication
    assert "(2.0x faster)" in communication
    assert selection.startswith("Selection: adass:eps=0.3 backpropagates 0.70 of full's samples")
    # against full on the same exchange and codec, not against the table's first row
    assert "0.70 of full's time on ps with fp32 and 0.80 on ring with qsgd:bits=8" in selection
    assert "0.930 for random samples at the same counts" in selection


def test_one_process_reads_selection_only_and_a_table_without_full_reads_nothing():
    table = pd.DataFrame([{"sampler": "full", "test_acc": 0.95, "backprop_frac": 1.0, "wall_ratio": 1.0},
                          {"sampler": "adass", "test_acc": 0.95, "backprop_frac": 0.6, "wall_ratio": 0.8}])  # fmt: skip
    (line,) = reading(table)
    assert line == ("Selection: adass backpropagates 0.60 of full's samples and takes 0.80 of full's time "
                    "(test accuracy 0.950 against 0.950 for full data).")  # fmt: skip
    assert reading(table[table["sampler"] == "adass"]) == []
