"""The gloo wire framing: heads, overflow descriptors and bodies round-trip a payload exactly."""

from __future__ import annotations

import pytest
import torch

from adass.codecs import ChunkKey, Payload, make_codec
from adass.exchange.transport import Transfer, framing


def _roundtrip(payload: Payload, meta: Transfer) -> tuple[Payload, framing.Frame]:
    head, overflow = framing.pack_head(payload, meta, 12.5, 13.0)
    assert head.numel() == framing.HEAD_BYTES
    assert (overflow is not None) == (framing.overflow_bytes(head) > 0)
    frame = framing.unpack_head(head, overflow)
    bodies = [b.clone() for b in framing.body_views(payload)]  # what the receiver's buffers hold
    assert [b.numel() for b in bodies] == framing.body_sizes(frame.layout)
    return framing.assemble(frame, bodies), frame


@pytest.mark.parametrize(
    "spec", ["fp32", "bf16", "qsgd:bits=3,bucket=5", "randk:ratio=0.3+qsgd:bits=8", "topk:ratio=0.2"]
)
def test_codec_payloads_roundtrip(spec: str) -> None:
    codec = make_codec(spec)
    payload = codec.encode(torch.randn(97), ChunkKey(1, 2, 3))
    got, frame = _roundtrip(payload, Transfer("reduce_scatter", 2, 1, step=7, epoch=3))
    assert got.nbytes == payload.nbytes and got.numel == payload.numel and got.header == payload.header
    assert torch.equal(codec.decode(got), codec.decode(payload))
    assert frame.meta == Transfer("reduce_scatter", 2, 1, step=7, epoch=3)
    assert (frame.sent_at, frame.not_before) == (12.5, 13.0)


def test_a_payload_travels_as_one_body() -> None:
    payload = make_codec("randk:ratio=0.3+qsgd:bits=3,bucket=5").encode(torch.randn(97), ChunkKey(1, 2, 3))
    assert sum(1 for t in payload.tensors.values() if t.numel()) > 1
    [body] = framing.body_views(payload)
    layout = framing.layout_of(payload)
    assert body.numel() == framing.body_sizes(layout)[0]
    assert body.numel() == payload.nbytes - payload.header_bytes + framing.padding_bytes(layout)
    single = make_codec("fp16").encode(torch.randn(9), ChunkKey(0, 0, 0))
    [view] = framing.body_views(single)
    assert view.data_ptr() == single.tensors["values"].data_ptr()  # one tensor: sent without a copy


def test_long_header_overflows_and_empty_tensors_travel() -> None:
    payload = Payload(
        {"a": torch.zeros(0, dtype=torch.int64), "flags": torch.tensor([True, False]), "x": torch.arange(6).reshape(2, 3)},
        numel=6, header={"note": "x" * 600, "nested": {"k": [1, 2, 3]}}, header_bytes=9,
    )  # fmt: skip
    got, frame = _roundtrip(payload, Transfer("count", raw_bytes=8))
    assert frame.meta.raw_bytes == 8
    assert got.header == payload.header
    assert got.tensors["a"].shape == (0,) and got.tensors["a"].dtype == torch.int64
    assert torch.equal(got.tensors["flags"], payload.tensors["flags"])
    assert torch.equal(got.tensors["x"], payload.tensors["x"])


def test_header_must_be_plain_values() -> None:
    payload = Payload({}, numel=0, header={"t": torch.zeros(1)})
    with pytest.raises(TypeError, match="JSON"):
        framing.pack_head(payload, Transfer("push"), 0.0, 0.0)


def test_foreign_bytes_are_rejected() -> None:
    with pytest.raises(RuntimeError, match="not an adass frame"):
        framing.overflow_bytes(torch.zeros(framing.HEAD_BYTES, dtype=torch.uint8))


@pytest.mark.parametrize("src", [-1, 0, 7, 70_000])
def test_head_names_its_sender(src: int) -> None:
    payload = make_codec("fp32").encode(torch.randn(5), ChunkKey(0, 0, 0))
    head, _ = framing.pack_head(payload, Transfer("push"), 0.0, 0.0, src=src)
    assert framing.head_source(head) == src
    assert framing.unpack_head(head).numel == 5
