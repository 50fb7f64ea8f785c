"""Error feedback (``--memory ef``): the residual carries over, so the decoded values add up to the
inputs."""

from __future__ import annotations

import dataclasses
import io

import pytest
import torch
from memory_cases import Paired, chunk

from adass.codecs import ChunkKey
from adass.memory import ErrorFeedback


# Error feedback needs a contractive codec (||C(x) - x|| < ||x||): top-k, unscaled random-k, QSGD
# with enough bits. With 1-bit QSGD or n/k-scaled random-k the residual grows without bound.
@pytest.mark.parametrize(
    "spec", ["ef(topk:ratio=0.05)", "ef(qsgd:bits=6)", "ef(randk:ratio=0.1,scale=false)"]
)
def test_decoded_sum_tracks_input_sum(spec: str) -> None:
    codec = Paired.of(spec)
    assert isinstance(codec.memory, ErrorFeedback)
    steps, n = 200, 400
    g = chunk(n, seed=1)  # a steady gradient plus noise
    sent = torch.zeros(n, dtype=torch.float64)
    given = torch.zeros(n, dtype=torch.float64)
    for step in range(steps):
        x = g + 0.1 * chunk(n, seed=100 + step)
        key = ChunkKey(seed=0, step=step, chunk=0)
        sent += codec.decode(codec.encode(x, key)).double()
        given += x.double()
    residual = codec.memory.residual(ChunkKey(0, steps, 0)).double()
    # telescoping: sum of decoded = sum of inputs - final residual (fp32 rounding aside)
    assert torch.allclose(sent, given - residual, rtol=1e-4, atol=1e-3)
    # the residual stays bounded, so the relative gap shrinks with the number of steps
    assert float((sent - given).norm() / given.norm()) < 0.1


def test_without_feedback_topk_loses_the_small_coordinates() -> None:
    g = chunk(400, seed=1)
    plain, ef = Paired.of("topk:ratio=0.05"), Paired.of("topk:ratio=0.05", "ef")
    sums = [torch.zeros(400), torch.zeros(400)]
    for step in range(100):
        key = ChunkKey(0, step, 0)
        sums[0] += plain.decode(plain.encode(g, key))
        sums[1] += ef.decode(ef.encode(g, key))
    target = 100 * g
    assert (sums[1] - target).norm() < 0.2 * (sums[0] - target).norm()


def test_memory_per_chunk_and_state_dict() -> None:
    memory = ErrorFeedback()
    k0, k1 = ChunkKey(0, 0, 0), ChunkKey(0, 0, 1)
    x0, x1 = torch.ones(3), torch.arange(5.0)
    assert torch.equal(memory.compensate(x0, k0), x0)
    memory.update(x0, torch.zeros(3), k0)
    memory.update(x1, x1 / 2, k1)
    later = dataclasses.replace(k0, step=5)
    assert torch.equal(memory.compensate(x0, later), 2 * x0)
    assert len(memory) == 2
    buffer = io.BytesIO()
    torch.save(memory.state_dict(), buffer)
    buffer.seek(0)
    restored = ErrorFeedback()
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert torch.equal(restored.compensate(x1, k1), x1 * 1.5)
    with pytest.raises(ValueError, match="chunk 0 has 4 values"):
        restored.compensate(torch.ones(4), k0)


def test_the_shared_scale_variant_is_the_memory_variants() -> None:
    codec, memory = Paired.of("ef(qsgd:bits=4)").inner, Paired.of("ef(qsgd:bits=4)").memory
    shared = codec.with_shared_scale()
    assert isinstance(memory, ErrorFeedback) and shared.traits.summable and shared.traits.needs_shared_scale
    assert shared.name == "qsgd:bits=4,bucket=512,norm=max,shared=true,rounding=nearest"
    key = ChunkKey(0, 0, 0)
    assert torch.equal(shared.local_scale(memory.compensate(torch.ones(3), key), key), torch.ones(1))
