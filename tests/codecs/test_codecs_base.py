"""Seeded randomness (shared streams ignore rank and hop, per-rank streams do not), payload sizes,
and decoding into a given tensor."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from codec_cases import ALL_SPECS, chunk

from adass.codecs import ChunkKey, Payload, generator_for, make_codec, stable_seed
from adass.codecs.base import seed_for
from adass.codecs.qsgd import QSGD, random_words


def draws(key: ChunkKey, salt: str = "", shared: bool = True) -> torch.Tensor:
    return torch.rand(8, generator=generator_for(key, salt, shared=shared))


def test_stable_seed_is_a_fixed_hash() -> None:
    # a salted hash() would change between interpreter runs; blake2b does not
    assert stable_seed(1, 2, 3, "x") == stable_seed(1, 2, 3, "x")
    assert stable_seed(1, 2, 3) != stable_seed(1, 2, 4)
    assert 0 <= stable_seed("a") < 2**63


def test_shared_and_per_rank_streams() -> None:
    key = ChunkKey(seed=1, step=2, chunk=3)
    other_rank = dataclasses.replace(key, rank=1)
    other_hop = dataclasses.replace(key, hop=1)
    assert torch.equal(draws(key), draws(other_rank))
    assert torch.equal(draws(key), draws(other_hop))
    assert not torch.equal(draws(key, shared=False), draws(other_rank, shared=False))
    assert not torch.equal(draws(key, shared=False), draws(other_hop, shared=False))
    assert not torch.equal(draws(key, "a"), draws(key, "b"))
    assert not torch.equal(draws(key), draws(dataclasses.replace(key, step=3)))


def test_payload_sizes() -> None:
    payload = Payload({"a": torch.zeros(3, dtype=torch.uint8), "b": torch.zeros(2)}, 10, {}, 5)
    assert payload.nbytes == 3 + 8 + 5 and payload.raw_bytes == 40


def test_seed_for_is_the_seed_of_generator_for() -> None:
    key = ChunkKey(seed=1, step=2, chunk=3, rank=4, hop=5)
    for shared in (True, False):
        gen = torch.Generator().manual_seed(seed_for(key, "q", shared=shared))
        assert torch.equal(torch.rand(8, generator=gen), draws(key, "q", shared=shared))


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_decode_into_writes_the_bits_of_decode(spec: str, key: ChunkKey) -> None:
    codec = make_codec(spec)
    x = chunk(1000, seed=5)
    payload = codec.encode(x, key)
    host = torch.full((1200,), float("nan"))
    codec.decode_into(payload, host[100:1100])  # a slice of a larger tensor, like a ring's output
    assert torch.equal(host[100:1100], codec.decode(payload))
    assert torch.isnan(host[:100]).all() and torch.isnan(host[1100:]).all()


def test_decode_into_of_a_summed_and_of_a_tiny_payload() -> None:
    codec = QSGD(bits=4, bucket=64, shared=True)
    xs = [chunk(500, seed=s) for s in range(3)]
    scale = torch.stack([codec.local_scale(x) for x in xs]).amax(0)
    total = None
    for rank, x in enumerate(xs):
        p = codec.encode(x, ChunkKey(seed=0, step=0, chunk=0, rank=rank), scale=scale)
        total = p if total is None else codec.add(total, p)
    tiny = QSGD(bits=8, bucket=50).encode(torch.full((100,), 1e-40), ChunkKey(0, 0, 0))  # float64 path
    for payload, c in ((total, codec), (tiny, QSGD(bits=8, bucket=50))):
        out = torch.empty(payload.numel)
        c.decode_into(payload, out)
        assert torch.equal(out, c.decode(payload))


def test_random_words_repeat_by_seed_and_cover_all_bits() -> None:
    cpu = torch.device("cpu")
    a, b = random_words(4096, 11, cpu), random_words(4096, 12, cpu)
    assert a.dtype == torch.int64 and torch.equal(a, random_words(4096, 11, cpu))
    assert not torch.equal(a, b) and random_words(0, 11, cpu).shape == (0,)
    bits = torch.stack([(a >> i) & 1 for i in range(64)])  # every bit is set about half the time
    assert torch.all((bits.float().mean(1) - 0.5).abs() < 0.04)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_a_template_describes_every_payload_of_its_length(spec: str) -> None:
    expect_one = spec.split("(")[-1].split(":")[0] in {"fp32", "fp16", "bf16"} or (
        spec.startswith("qsgd") and "shared=true" not in spec
    )
    for n in [0, 1, 7, 1000, 4099]:
        codec = make_codec(spec)
        template = codec.template(n)
        assert (template is not None) == expect_one, (spec, n)
        if template is None:
            continue
        for seed, key in [(0, ChunkKey(1, 2, 3)), (1, ChunkKey(4, 5, 6, rank=2, hop=1))]:
            x = chunk(n, seed) * (0.0 if seed else 1.0)  # all-zero chunks too
            payload = codec.encode(x, key)
            assert payload.numel == template.numel == n
            assert payload.header == template.header and payload.header_bytes == template.header_bytes
            layout = {k: (t.dtype, tuple(t.shape)) for k, t in payload.tensors.items()}
            assert layout == {k: (t.dtype, tuple(t.shape)) for k, t in template.tensors.items()}
