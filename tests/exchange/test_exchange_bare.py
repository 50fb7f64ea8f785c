"""Bare codec payloads: the tensors' bytes (and a count) in one buffer, rebuilt from the codec's
template; what the ring sends for codecs with a template."""

from __future__ import annotations

import pytest
import torch
from exchange_cases import grads

from adass.codecs import ChunkKey, make_codec
from adass.exchange import simulate
from adass.exchange.transport.bare import BareLayout
from adass.memory import build_pair


@pytest.mark.parametrize("spec", ["qsgd:bits=8", "qsgd:bits=3,bucket=7", "fp16", "ef(qsgd:bits=2)"])
@pytest.mark.parametrize("count", [None, 6.5])
def test_bare_buffers_round_trip(spec: str, count: float | None) -> None:
    for n in [0, 1, 1001]:
        codec = build_pair(spec)[0]  # the codec that travels (under a memory, its memory variant)
        layout = BareLayout(codec.template(n), counted=count is not None)
        payload = codec.encode(grads(1, n, seed=n)[0], ChunkKey(1, 2, 3))
        bare = layout.pack(payload, count)
        buf = bare.tensors["values"]
        tensor_bytes = sum(t.numel() * t.element_size() for t in payload.tensors.values())
        assert buf.dtype == torch.uint8 and buf.numel() == tensor_bytes + (8 if count is not None else 0)
        assert bare.numel == n and bare.header_bytes == 0  # the header does not travel
        back, got = layout.unpack(bare)
        assert got == count
        assert back.header == payload.header and back.numel == n
        assert torch.equal(codec.decode(back), codec.decode(payload))
        for name, t in back.tensors.items():  # views of the buffer, no copies
            assert t.numel() == 0 or t.untyped_storage().data_ptr() == buf.untyped_storage().data_ptr(), name


def test_a_payload_that_breaks_its_template_is_refused() -> None:
    codec = make_codec("qsgd:bits=8")
    layout = BareLayout(codec.template(100), counted=False)
    with pytest.raises(RuntimeError, match="template"):
        layout.pack(codec.encode(torch.randn(99), ChunkKey(0, 0, 0)), None)
    shared = make_codec("qsgd:bits=8,shared=true")
    wide = shared.add(
        *(shared.encode(torch.ones(100), ChunkKey(0, 0, 0), scale=torch.ones(1)) for _ in range(2))
    )
    with pytest.raises(RuntimeError, match="header"):
        layout.pack(wide, None)


@pytest.mark.parametrize("counts", [None, [1, 2, 3]])
def test_the_ring_sends_quantized_chunks_bare(counts) -> None:
    # requantized QSGD payloads travel as codes and scales (and the partial count), no header
    n, workers, codec = 3000, 3, make_codec("qsgd:bits=4")
    result = simulate(grads(workers, n), exchange="ring", codec="qsgd:bits=4", counts=counts)
    t = result.traffic
    payload = codec.encode(torch.randn(n // workers), ChunkKey(0, 0, 0))
    tensor_bytes = sum(x.numel() * x.element_size() for x in payload.tensors.values())
    count_bytes = 0 if counts is None else 8
    assert (t.wire_bytes == tensor_bytes + count_bytes).all()
    assert (t.raw_bytes == 4 * n // workers).all()


@pytest.mark.parametrize("spec", ["randk:ratio=0.1", "sharedk:ratio=0.2", "ef(randk:ratio=0.3,scale=false)",
                                  "sharedk:ratio=0.2+fp16", "randk:ratio=0.1,scale=false+bf16"])  # fmt: skip
@pytest.mark.parametrize("count", [None, 2.5])
def test_keyed_buffers_round_trip_and_refuse_another_key(spec: str, count: float | None) -> None:
    # random-k's header names the chunk key, so its layout follows from the length and the key
    for n in [0, 1, 1001]:
        codec, key = build_pair(spec)[0], ChunkKey(4, 5, 6)
        assert codec.template(n) is None
        layout = BareLayout(codec.keyed_template(n, key), counted=count is not None)
        payload = codec.encode(grads(1, n, seed=n)[0], key)
        bare = layout.pack(payload, count)
        selector = codec.keyed_values().selector
        tensor_bytes = sum(t.numel() * t.element_size() for t in payload.tensors.values())
        assert tensor_bytes == 4 * selector.k_for(n) / (2 if "16" in spec else 1)
        assert bare.tensors["values"].numel() == tensor_bytes + (8 if count is not None else 0)
        back, got = layout.unpack(bare)
        assert got == count and back.header == payload.header and back.numel == n
        assert torch.equal(codec.decode(back), codec.decode(payload))
        if n:
            with pytest.raises(RuntimeError, match="template"):
                layout.pack(build_pair(spec)[0].encode(grads(1, n)[0], ChunkKey(4, 6, 6)), count)  # next step


@pytest.mark.parametrize(
    "spec", ["dmc(randk:ratio=0.1,scale=false)", "mc(sharedk:ratio=0.2)", "dmc(sharedk:ratio=0.2+fp16)"]
)
@pytest.mark.parametrize("counts", [None, [1, 2, 3]])
def test_the_ring_sends_error_feedback_random_k_as_bare_values(spec: str, counts) -> None:
    # under a memory, random-k's payloads add along the ring: only the k kept values travel (and the
    # partial count), not a frame naming the chunk key that both sides know
    n, workers = 3000, 3
    result = simulate(grads(workers, n), exchange="ring", codec=spec, counts=counts)
    t = result.traffic
    keyed = build_pair(spec)[0].keyed_values()
    value_bytes = 2 if "fp16" in spec else 4
    k = keyed.selector.k_for(n // workers)
    assert len(t) and (t.wire_bytes == value_bytes * k + (0 if counts is None else 8)).all()
