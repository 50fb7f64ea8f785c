"""make_codec: every spec round-trips through its canonical name; bad specs fail in one line."""

from __future__ import annotations

import pytest
import torch
from codec_cases import ALL_SPECS, chunk

from adass.codecs import CODECS, ChunkKey, Codec, StackCodec, make_codec
from adass.registry import SpecError


def test_registry_names() -> None:
    assert CODECS.names() == ["bf16", "fp16", "fp32", "powersgd", "qsgd", "randk", "sharedk", "topk"]


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_canonical_name_round_trips(spec: str) -> None:
    codec = make_codec(spec)
    again = make_codec(codec.name)
    assert again == codec and again.name == codec.name
    assert again.traits == codec.traits


@pytest.mark.parametrize("spec", ALL_SPECS)
@pytest.mark.parametrize("n", [0, 1, 513])
def test_every_codec_round_trips_edge_lengths(spec: str, n: int) -> None:
    codec: Codec = make_codec(spec)
    key = ChunkKey(1, 2, 3)
    for x in (chunk(n), torch.zeros(n)):
        payload = codec.encode(x, key)
        out = codec.decode(payload)
        assert out.shape == (n,) and out.dtype == torch.float32 and torch.isfinite(out).all()
        assert payload.numel == n and payload.nbytes >= 0
        if codec.traits.fixed_size:
            assert codec.encode(chunk(n, seed=9), key).nbytes == payload.nbytes
    if codec.traits.summable and n:
        assert codec.decode(codec.add(payload, payload)).shape == (n,)


def test_stacking_and_the_memory_variant() -> None:
    stack = make_codec("randk:ratio=0.01,scale=false+qsgd:bits=8")
    assert isinstance(stack, StackCodec) and stack.outer.name.startswith("randk")
    under = make_codec("randk:ratio=0.01,scale=false+qsgd:bits=8", for_memory=True)
    assert under.inner.rounding == "nearest" and stack.inner.rounding == "auto"
    assert make_codec(under.name) == under


@pytest.mark.parametrize(
    "spec,message",
    [
        ("", "empty"),
        ("zip", "'zip' is not allowed"),
        ("qsgd:bits=0", "bits=0 is not allowed"),
        ("qsgd:bits=17", "bits=17 is not allowed"),
        ("qsgd:bits=4.5", "bits='4.5' is not allowed"),
        ("qsgd:bucket=0", "bucket=0 is not allowed"),
        ("randk:ratio=2", "ratio=2 is not allowed"),
        ("randk:k=3", "unknown parameter 'k'"),
        ("qsgd+randk", "only a sparsifier"),
        ("randk+", "empty part"),
        ("ef(fp32)", "names a memory"),
        ("ef(fp32", "unbalanced"),
        ("randk+ef(qsgd)", "names a memory"),
        ("topk:ef=true", "unknown parameter 'ef'"),
    ],
)
def test_bad_specs_fail_in_one_line(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match=message) as info:
        make_codec(spec)
    assert "\n" not in str(info.value)


@pytest.mark.cuda
@pytest.mark.parametrize("spec", ALL_SPECS)
def test_codecs_run_on_cuda(spec: str) -> None:
    codec = make_codec(spec)
    x = chunk(1300).cuda()
    payload = codec.encode(x, ChunkKey(1, 2, 3))
    out = codec.decode(payload)
    assert out.is_cuda and out.shape == x.shape and torch.isfinite(out).all()
    if codec.traits.lossless:
        assert torch.equal(out, x)
