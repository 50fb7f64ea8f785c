"""Top-k: the largest magnitudes survive, indices travel bit-packed, payloads do not add."""

from __future__ import annotations

import pytest
import torch
from codec_cases import chunk

from adass.codecs import TopK, make_codec


def test_keeps_the_largest_magnitudes(key) -> None:
    x = torch.tensor([0.1, -5.0, 0.2, 3.0, -0.3, 0.0, 4.0, 0.05])
    codec = TopK(ratio=0.375)  # k = 3
    out = codec.decode(codec.encode(x, key))
    assert torch.equal(out, torch.tensor([0.0, -5.0, 0.0, 3.0, 0.0, 0.0, 4.0, 0.0]))


def test_wire_bytes_and_index_width(key) -> None:
    codec = make_codec("topk:ratio=0.01")
    payload = codec.encode(chunk(10_000), key)
    assert payload.header["index_bits"] == 14  # 2**14 > 9,999
    assert payload.nbytes == 100 * 4 + -(-100 * 14 // 8) + 9
    assert payload.nbytes / payload.raw_bytes == pytest.approx(0.0146)


@pytest.mark.parametrize("n", [0, 1, 2, 300])
def test_edge_lengths(n: int, key) -> None:
    codec = TopK(ratio=0.001)
    x = chunk(n)
    out = codec.decode(codec.encode(x, key))
    assert out.shape == x.shape
    if n:
        i = x.abs().argmax()
        assert out[i] == x[i] and out.count_nonzero() == 1


def test_not_summable(key) -> None:
    codec = TopK(0.1)
    p = codec.encode(chunk(50), key)
    assert not codec.traits.summable and not codec.traits.can_share_scale
    with pytest.raises(TypeError, match="not summable"):
        codec.add(p, p)
    with pytest.raises(TypeError, match="no shared-scale mode"):
        codec.with_shared_scale()
