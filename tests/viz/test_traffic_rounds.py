"""The traffic views of a low-rank codec: its two rounds show as chunks of their own, and wire over
raw is the saving against fp32."""

import torch

from adass.exchange import simulate
from adass.viz import chunk_bytes, traffic_heatmap

SHAPES = [(32, 50), (32,), (4, 32), (4,)]


def test_rounds_are_chunks_of_their_own_and_raw_bytes_are_fp32s():
    grads = [torch.randn(sum(torch.Size(s).numel() for s in SHAPES)) for _ in range(3)]
    traffic = simulate(grads, exchange="ring", codec="powersgd:rank=1", layers=SHAPES).traffic
    bars = chunk_bytes(traffic)
    assert list(bars.data["chunk"].unique()) == ["p 0", "p 1", "p 2", "q 0", "q 1", "q 2"]
    fp32 = simulate(grads, exchange="ring", codec="fp32").traffic
    assert traffic["raw_bytes"].sum() == fp32["raw_bytes"].sum()
    ratio = traffic["wire_bytes"].sum() / traffic["raw_bytes"].sum()
    assert f"wire/raw {ratio:.2f}" in bars.opts.get().kwargs["title"] and ratio < 0.2
    assert list(chunk_bytes(fp32).data["chunk"].unique()) == ["0", "1", "2"]
    heat = traffic_heatmap(traffic)  # the links carry both rounds' bytes
    assert heat.data["wire_bytes"].sum() == traffic["wire_bytes"].sum()
