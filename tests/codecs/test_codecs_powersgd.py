"""PowerSGD's math on one worker: the layer plan, orthonormalization, exact recovery of low-rank
layers, error falling with rank, the warm start and the state a checkpoint keeps."""

from __future__ import annotations

import pytest
import torch

from adass.codecs import ChunkKey, PowerSGD, make_codec
from adass.codecs.powersgd import orthogonalize, plan_layers
from adass.registry import SpecError

SHAPES = [(24, 30), (24,), (6, 3, 3, 3), (6,), (4, 5)]  # a matrix, biases, a conv kernel, a small matrix


def _low_rank_grad(rank: int, seed: int = 0) -> torch.Tensor:
    """A flat gradient for SHAPES whose every matrix has rank ``rank`` (exactly, up to rounding)."""
    gen = torch.Generator().manual_seed(seed)
    parts = []
    for shape in SHAPES:
        rows, cols = shape[0], torch.Size(shape[1:]).numel()
        if len(shape) == 1:
            parts.append(torch.randn(rows, generator=gen))
        else:
            a, b = torch.randn(rows, rank, generator=gen), torch.randn(cols, rank, generator=gen)
            parts.append((a @ b.t()).reshape(-1))
    return torch.cat(parts)


def _codec(spec: str) -> PowerSGD:
    codec = make_codec(spec)
    assert isinstance(codec, PowerSGD)
    codec.set_layers(SHAPES)
    return codec


def test_plan_shapes_layers_as_torch_does_and_sends_small_ones_whole() -> None:
    plan = plan_layers(SHAPES, rank=2, min_rate=2.0)
    got = [(layer.rows, layer.cols, layer.rank) for layer in plan.layers]
    # biases travel whole; the conv kernel is (out, in*kh*kw); (4, 5) at rank 2 saves 20 / 18 < 2
    assert got == [(24, 30, 2), (24, 1, 0), (6, 27, 2), (6, 1, 0), (4, 5, 0)]
    assert (plan.p_numel, plan.q_numel, plan.dense_numel) == (24 * 2 + 6 * 2, 30 * 2 + 27 * 2, 24 + 6 + 20)
    assert plan.numel == sum(torch.Size(s).numel() for s in SHAPES)
    # a lower bar compresses the small matrix too
    assert plan_layers(SHAPES, rank=2, min_rate=1.0).layers[4].rank == 2


def test_orthogonalize_gives_orthonormal_columns_and_keeps_zero_columns_zero() -> None:
    m = torch.randn(50, 4, generator=torch.Generator().manual_seed(1))
    q = orthogonalize(m.clone())
    torch.testing.assert_close(q.t() @ q, torch.eye(4), atol=1e-5, rtol=0)
    # the same span: projecting m onto q's columns leaves it unchanged
    torch.testing.assert_close(q @ (q.t() @ m), m, atol=1e-4, rtol=1e-4)
    zeros = orthogonalize(torch.zeros(10, 2))
    assert torch.equal(zeros, torch.zeros(10, 2))


@pytest.mark.parametrize("rank", [1, 2, 4])
def test_round_trip_recovers_a_gradient_of_that_rank(rank: int) -> None:
    codec = _codec(f"powersgd:rank={rank},min_rate=1.0")
    x = _low_rank_grad(rank, seed=rank)
    payload = codec.encode(x, ChunkKey(3, 0, 0))
    plan = codec.plan
    assert plan is not None
    assert payload.nbytes == 4 * (plan.p_numel + plan.q_numel + plan.dense_numel)
    torch.testing.assert_close(codec.decode(payload), x, atol=2e-4, rtol=1e-4)


def test_round_trip_misses_a_gradient_of_higher_rank() -> None:
    codec = _codec("powersgd:rank=1,min_rate=1.0")
    x = _low_rank_grad(3)
    assert (codec.decode(codec.encode(x, ChunkKey(3, 0, 0))) - x).norm() > 0.1 * x.norm()


def test_error_falls_with_rank() -> None:
    x = torch.randn(sum(torch.Size(s).numel() for s in SHAPES), generator=torch.Generator().manual_seed(5))
    errors = []
    for rank in (1, 2, 4, 6):
        codec = _codec(f"powersgd:rank={rank},min_rate=0.5")
        errors.append((codec.decode(codec.encode(x, ChunkKey(0, 0, 0))) - x).norm().item())
    assert errors == sorted(errors, reverse=True) and errors[-1] < 0.9 * errors[0]


def test_whole_layers_travel_exactly() -> None:
    codec = _codec("powersgd:rank=1")
    x = torch.randn(codec.plan.numel, generator=torch.Generator().manual_seed(2))  # type: ignore[union-attr]
    out = codec.decode(codec.encode(x, ChunkKey(0, 0, 0)))
    for layer in codec.plan.whole:  # type: ignore[union-attr]
        assert torch.equal(out[layer.lo : layer.hi], x[layer.lo : layer.hi])


def test_warm_start_converges_to_the_best_rank_r_approximation() -> None:
    """Power iteration: repeated steps on one matrix from the kept Q approach its truncated SVD."""
    codec = _codec("powersgd:rank=2")
    # a spectral gap (rank 2 plus noise), as gradients have, so that the iteration settles fast
    noise = torch.randn(codec.plan.numel, generator=torch.Generator().manual_seed(4))  # type: ignore[union-attr]
    x = _low_rank_grad(2, seed=4) + 0.05 * noise
    layer = codec.plan.layers[0]  # type: ignore[union-attr]
    m = x[layer.lo : layer.hi].view(layer.rows, layer.cols)
    u, s, vh = torch.linalg.svd(m)
    best = (u[:, :2] * s[:2]) @ vh[:2]
    errors = []
    for _ in range(10):
        assert codec.begin_step()
        step = codec.factorize(x, ChunkKey(1, 0, 0))
        out = torch.empty_like(x)
        codec.keep(step.expand(step.second(step.first), out))
        errors.append((out[layer.lo : layer.hi].view_as(m) - best).norm().item())
    assert errors[-1] < 1e-4 * best.norm() < errors[0]


def test_first_q_follows_the_run_seed_and_state_round_trips() -> None:
    x = _low_rank_grad(4)
    a, b, c = _codec("powersgd:rank=2"), _codec("powersgd:rank=2"), _codec("powersgd:rank=2")
    assert torch.equal(
        a.encode(x, ChunkKey(9, 0, 0)).tensors["q"], b.encode(x, ChunkKey(9, 0, 0)).tensors["q"]
    )
    assert not torch.equal(
        a.encode(x, ChunkKey(9, 0, 0)).tensors["q"], c.encode(x, ChunkKey(8, 0, 0)).tensors["q"]
    )
    for codec in (a, b):
        codec.begin_step()
        step = codec.factorize(x, ChunkKey(9, 0, 0))
        codec.keep(step.expand(step.second(step.first), torch.empty_like(x)))
    state = a.codec_state()
    assert state["steps"] == 1 and len(state["qs"]) == 2
    c.load_codec_state(state)
    assert torch.equal(
        c.encode(x, ChunkKey(1, 5, 0)).tensors["p"], b.encode(x, ChunkKey(2, 6, 0)).tensors["p"]
    )


def test_warmup_counts_steps() -> None:
    codec = _codec("powersgd:rank=1,warmup=2")
    assert [codec.begin_step() for _ in range(4)] == [False, False, True, True]


def test_spec_is_canonical_and_checked() -> None:
    codec = make_codec("powersgd:rank=4")
    assert codec.name == "powersgd:rank=4,warmup=0,min_rate=2.0,eps=0.0,start=warmup"
    assert make_codec(codec.name) == codec
    with pytest.raises(SpecError, match="rank"):
        make_codec("powersgd:rank=0")
    with pytest.raises(SpecError, match="start.*warmup"):
        make_codec("powersgd:start=svd")
    with pytest.raises(ValueError, match="set_layers"):
        make_codec("powersgd").encode(torch.zeros(10), ChunkKey(0, 0, 0))
