"""Reference equivalence for fp32: PS == ring == the exact (weighted) mean, for awkward sizes."""

from __future__ import annotations

import pytest
import torch
from exchange_cases import grads, weighted_mean

from adass.exchange import simulate

EXCHANGES = ["ring", "ps", "ps:servers=2", "ring:strategy=allgather", "ring:segment_kb=1"]


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 5, 7])
@pytest.mark.parametrize("n", [0, 1, 6, 1001])
def test_fp32_matches_exact_mean(workers: int, n: int) -> None:
    gs = grads(workers, n, seed=workers * 100 + n)
    counts = [float(i + 1) for i in range(workers)]
    for weights in (None, counts):
        exact = weighted_mean(gs, weights)
        for exchange in EXCHANGES:
            result = simulate(gs, exchange=exchange, codec="fp32", counts=weights)
            for out in result.outputs:
                assert out.dtype == torch.float32 and out.shape == (n,)
                torch.testing.assert_close(out, exact, rtol=1e-6, atol=1e-6)


def test_ring_pieces_match_whole_chunks() -> None:
    gs = grads(3, 5000, seed=1)
    whole = simulate(gs, exchange="ring", codec="fp32").outputs[0]
    pieces = simulate(gs, exchange="ring:segment_kb=1", codec="fp32")
    torch.testing.assert_close(pieces.outputs[0], whole, rtol=1e-6, atol=1e-7)
    assert pieces.traffic.groupby(["phase", "hop", "src"]).size().max() > 1  # several pieces per hop


def test_in_place_reduce_over_inproc() -> None:
    from adass.exchange import InProcHub, make_exchange

    hub = InProcHub(1)
    ring = make_exchange("ring", hub.transport(0), "fp32")
    x = torch.arange(10, dtype=torch.float32)
    expected = x.clone()
    out = ring.reduce(x, out=x)
    assert out.data_ptr() == x.data_ptr()
    torch.testing.assert_close(out, expected)
    with pytest.raises(ValueError, match="contiguous float32"):
        ring.reduce(x, out=torch.empty(10, dtype=torch.float64))
