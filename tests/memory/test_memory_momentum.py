"""Momentum correction (``--memory mc``, DGC, and the delay-aware ``--memory dmc``): the local velocity,
the accumulation that error feedback keeps, momentum-factor masking at what a sparsifier sent, and
the reduction to SGD with momentum."""

from __future__ import annotations

import io

import pytest
import torch
from memory_cases import Paired, chunk

from adass.codecs import ChunkKey, make_codec
from adass.memory import DelayAwareMomentumCorrection, MomentumCorrection, build_pair
from adass.registry import SpecError


def _mc(spec: str, momentum: float, wrapper: str = "mc", kernels: str | None = None) -> Paired:
    codec = Paired.of(spec, wrapper, kernels)
    assert isinstance(codec.memory, MomentumCorrection)
    assert codec.memory.take_momentum(momentum)
    return codec


def test_one_step_follows_the_formula() -> None:
    m, n = 0.9, 40
    codec = _mc("randk:ratio=0.25,scale=false", m)
    u, residual = torch.zeros(n), torch.zeros(n)  # velocity and error-feedback residual, by hand
    for step in range(6):
        g, key = chunk(n, seed=step), ChunkKey(0, step, 0)
        u = m * u + g
        v = residual + u  # the accumulation that is encoded
        sent = codec.decode(codec.encode(g, key))
        kept = codec.inner.indices(n, key)
        expected = torch.zeros(n)
        expected[kept] = v[kept]
        assert torch.allclose(sent, expected, atol=1e-5)
        delayed = kept[residual[kept] != 0] if step else kept[:0]  # held values of earlier steps
        residual = v.clone()
        residual[kept] = 0.0  # unscaled random-k sends the kept values as they are
        u[delayed] = 0.0
        assert torch.allclose(codec.memory.residual(key), residual, atol=1e-5)
        assert torch.allclose(codec.memory.velocities[0], u, atol=1e-5)


def test_masking_zeroes_exactly_the_sent_coordinates_that_held_delayed_values() -> None:
    m, n = 0.5, 200
    codec = _mc("randk:ratio=0.1,scale=false", m)
    codec.encode(chunk(n, seed=1), ChunkKey(0, 0, 0))  # the first step holds nothing delayed
    assert int((codec.memory.velocities[0] == 0).sum()) == 0
    before = codec.memory.residual(ChunkKey(0, 0, 0)).clone()
    key = ChunkKey(0, 1, 0)
    codec.encode(chunk(n, seed=2), key)
    sent = codec.inner.indices(n, key)
    zero = (codec.memory.velocities[0] == 0).nonzero().flatten()
    assert torch.equal(zero, sent[before[sent] != 0].sort().values)
    assert 0 < zero.numel() <= sent.numel()


def test_codecs_that_are_not_sparsifiers_mask_nothing() -> None:
    codec = _mc("qsgd:bits=4", 0.9)
    for step in range(3):
        codec.encode(chunk(64, seed=step), ChunkKey(0, step, 0))
    assert int((codec.memory.velocities[0] == 0).sum()) == 0


def test_delay_aware_step_follows_the_formula() -> None:
    m, n = 0.9, 40
    codec = _mc("randk:ratio=0.25,scale=false", m, "dmc")
    assert isinstance(codec.memory, DelayAwareMomentumCorrection)
    u, residual = torch.zeros(n), torch.zeros(n)  # velocity and error-feedback residual, by hand
    for step in range(6):
        g, key = chunk(n, seed=step), ChunkKey(0, step, 0)
        v = residual + g  # accumulated gradients
        y = v + m * u  # what is encoded
        sent = codec.decode(codec.encode(g, key))
        kept = codec.inner.indices(n, key)
        expected = torch.zeros(n)
        expected[kept] = y[kept]
        assert torch.allclose(sent, expected, atol=1e-5)
        residual = v.clone()
        residual[kept] = 0.0  # unscaled random-k sends the kept values as they are
        u = m * u
        u[kept] = y[kept]  # the velocity is renewed where values were sent, decays elsewhere
        assert torch.allclose(codec.memory.residual(key), residual, atol=1e-5)
        assert torch.allclose(codec.memory.velocities[0], u, atol=1e-5)


def test_delay_aware_settle_restates_residual_and_velocity_by_the_steps_factor() -> None:
    """An exchange that scaled the step's sum by ``factor`` calls ``settle(factor)``: where sent, the
    velocity is what arrived (``factor`` times what was sent) and the residual keeps
    ``factor * (y - sent) + (1 - factor) * (r + m u)``; elsewhere the residual is ``r + factor * g``."""
    m, n = 0.9, 40
    codec = _mc("randk:ratio=0.25,scale=false+qsgd:bits=4", m, "dmc")
    u, residual = torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    for step, factor in enumerate([1.0, 0.5, 1.7, 1.0, 0.8, 1.3]):
        g, key = chunk(n, seed=step), ChunkKey(0, step, 0)
        decayed = m * u
        y = residual + g.double() + decayed
        sent = codec.decode(codec.encode(g, key)).double()  # 4-bit values: what arrives is not y
        kept = codec.inner.outer.indices(n, key)
        codec.memory.settle(factor)
        wanted = residual + factor * g.double()  # the accumulation in the step's true units
        wanted[kept] = factor * (y[kept] - sent[kept]) + (1 - factor) * (residual[kept] + decayed[kept])
        u = decayed.clone()
        u[kept] = factor * sent[kept]
        residual = wanted
        assert torch.allclose(codec.memory.residual(key).double(), residual, atol=1e-5), step
        assert torch.allclose(codec.memory.velocities[0].double(), u, atol=1e-5), step


@pytest.mark.parametrize("wrapper", ["mc", "dmc"])
@pytest.mark.parametrize("spec", ["fp32", "randk:ratio=1.0,scale=false", "topk:ratio=1.0"])
def test_every_coordinate_sent_is_sgd_with_momentum(spec: str, wrapper: str) -> None:
    """w <- w - lr * decode(encode(g)) with mc(SPEC) is torch's SGD with momentum, on a quadratic."""
    m, lr, n = 0.9, 0.05, 16
    gen = torch.Generator().manual_seed(0)
    a, b = torch.rand(n, generator=gen) + 0.5, torch.randn(n, generator=gen)
    ours = torch.zeros(n)
    theirs = torch.zeros(n, requires_grad=True)
    opt = torch.optim.SGD([theirs], lr=lr, momentum=m)
    codec = _mc(spec, m, wrapper)
    for step in range(30):
        ours -= lr * codec.decode(codec.encode(a * ours - b, ChunkKey(0, step, 0)))
        opt.zero_grad()
        theirs.grad = (a * theirs - b).detach()
        opt.step()
        assert torch.allclose(ours, theirs.detach(), rtol=1e-5, atol=1e-6), step


@pytest.mark.parametrize("wrapper", ["ef", "mc", "dmc"])
def test_residual_stays_bounded_for_unscaled_random_k(wrapper: str) -> None:
    """Contractive random-k: the residual levels off (a coordinate waits 1/ratio steps on average)."""
    codec = Paired.of(f"{wrapper}(randk:ratio=0.05,scale=false)")
    assert codec.memory.take_momentum(0.9) == (wrapper != "ef")
    g, norms = chunk(500, seed=3), []
    for step in range(1, 1201):
        codec.encode(g + 0.1 * chunk(500, seed=step), ChunkKey(0, step, 0))
        norms.append(float(codec.memory.residual(ChunkKey(0, step, 0)).norm()))
    early, late = sum(norms[400:800]) / 400, sum(norms[800:]) / 400  # both past a few times 1/ratio
    assert abs(late / early - 1) < 0.1


@pytest.mark.parametrize("wrapper", ["mc", "dmc"])
def test_state_dict_round_trip_keeps_the_velocities(wrapper: str) -> None:
    codec = _mc("randk:ratio=0.2,scale=false", 0.9, wrapper)
    for step in range(3):
        codec.encode(chunk(50, seed=step), ChunkKey(0, step, 0))
    buffer = io.BytesIO()
    torch.save(codec.memory.state_dict(), buffer)
    buffer.seek(0)
    restored = type(codec.memory)(0.9)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert torch.equal(restored.velocities[0], codec.memory.velocities[0])
    assert torch.equal(restored.residuals[0], codec.memory.residuals[0])
    again = Paired(codec.inner, restored)
    key, x = ChunkKey(0, 3, 0), chunk(50, seed=3)
    assert torch.equal(again.decode(again.encode(x, key)), codec.decode(codec.encode(x, key)))


@pytest.mark.parametrize("memory", [MomentumCorrection, DelayAwareMomentumCorrection])
def test_update_without_compensate_fails(memory: type) -> None:
    with pytest.raises(RuntimeError, match="without being compensated"):
        memory(0.9).update(torch.zeros(3), torch.zeros(3), ChunkKey(0, 0, 0))


def test_spec_forms_name_the_memory_apart_from_the_codec() -> None:
    codec, memory = build_pair("mc(randk:ratio=0.01,scale=false)")
    assert codec == make_codec("randk:ratio=0.01,scale=false") and memory.name == "mc"
    flagged, flagged_memory = build_pair("randk:ratio=0.01,scale=false,mc=true")
    assert flagged == codec and type(flagged_memory) is type(memory)
    stack, _ = build_pair("randk:ratio=0.01,scale=false,warmup=2,mc=true+qsgd:bits=8")
    assert stack.name.startswith("randk:ratio=0.01,scale=false,warmup=2+qsgd:bits=8")
    assert stack.name.endswith("rounding=nearest")  # a codec built for a memory rounds to nearest
    assert memory.owns_momentum
    delay_aware, dmc = build_pair("randk:ratio=0.01,scale=false,dmc=true")
    assert delay_aware == codec and isinstance(dmc, DelayAwareMomentumCorrection) and dmc.owns_momentum
    assert not build_pair("ef(fp32)")[1].owns_momentum


@pytest.mark.parametrize(
    "spec,message",
    [
        ("mc(ef(topk:ratio=0.1))", "one of dmc(...), ef(...) and mc(...)"),
        ("dmc(dmc(fp32))", "dmc(...) is given twice"),
        ("topk:ratio=0.1,ef=true,mc=true", "one of dmc=true, ef=true and mc=true"),
        ("dmc(randk:ratio=0.1)", "not contractive"),
        ("mc(topk:ratio=0.1)+fp16", "must wrap the whole spec"),
        ("topk:mc=maybe", "mc='maybe' is not allowed"),
        ("mc(randk:ratio=0.1)", "not contractive"),
        ("ef(randk:ratio=0.1+qsgd:bits=8)", "use scale=false"),
        ("randk:ratio=0.1,warmup=-1", "warmup=-1 is not allowed"),
        ("topk:warmup=0.5", "warmup='0.5' is not allowed"),
        ("randk:ratio=0.1,block=0", "block=0 is not allowed"),
        ("randk:block=8.5", "block='8.5' is not allowed"),
    ],
)
def test_bad_specs_fail_in_one_line(spec: str, message: str) -> None:
    with pytest.raises(
        SpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
    ) as err:
        build_pair(spec)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("spec", ["randk:ratio=0.25,scale=false", "sharedk:ratio=0.2",
                                  "randk:ratio=0.25,scale=false+qsgd:bits=4", "topk:ratio=0.1",
                                  "randk:ratio=0.25,scale=false,block=32"])  # fmt: skip
def test_fused_delay_aware_update_keeps_the_reference_memory_bit_for_bit(spec: str) -> None:
    from adass.codecs import kernels

    if not kernels.available():
        pytest.skip("numba does not import")
    n, kept = 1_001, {}
    for kernel in ("reference", "fused"):
        codec = _mc(spec, 0.9, "dmc", kernel)  # one codec per kernel family
        payloads = []
        for step, factor in enumerate([1.0, 0.5, 1.7, 1.0, 0.8]):
            key = ChunkKey(0, step, 0)
            payloads.append(codec.encode(chunk(n, seed=step), key))
            codec.memory.settle(factor)
            codec.observe(chunk(n, seed=40 + step), key)  # sharedk learns; the others ignore it
        memory = codec.memory
        kept[kernel] = (memory.residuals[0], memory.velocities[0], [codec.decode(p) for p in payloads])
    (r_ref, u_ref, sent_ref), (r_fused, u_fused, sent_fused) = kept["reference"], kept["fused"]
    assert torch.equal(r_ref.view(torch.int32), r_fused.view(torch.int32))
    assert torch.equal(u_ref.view(torch.int32), u_fused.view(torch.int32))
    assert all(torch.equal(a, b) for a, b in zip(sent_ref, sent_fused, strict=True))
    assert bool((u_ref != 0).any()) and bool((r_ref != 0).any())


@pytest.mark.parametrize("spec", ["randk:ratio=0.25,scale=false", "sharedk:ratio=0.2", "randk:ratio=0.1,scale=false+fp16",
                                  "randk:ratio=0.25,scale=false+qsgd:bits=4", "topk:ratio=0.1"])  # fmt: skip
@pytest.mark.parametrize("kernel", ["reference", "fused"])
def test_the_delay_aware_memory_learns_alike_from_the_sent_values_alone(spec: str, kernel: str) -> None:
    from adass.codecs import kernels

    if kernel == "fused" and not kernels.available():
        pytest.skip("numba does not import")

    class Dense(DelayAwareMomentumCorrection):  # the same memory, always handed the whole decoded chunk
        reads_sent_only = False

    n, kept = 1_001, {}
    for name in ("sparse", "dense"):
        codec = _mc(spec, 0.9, "dmc", kernel)
        if name == "dense":
            codec.memory = Dense(0.9, kernel)
        for step, factor in enumerate([1.0, 0.5, 1.7, 1.0]):
            key = ChunkKey(0, step, 0)
            payload = codec.encode(chunk(n, seed=step), key)
            sent, arrived = codec.sparse.sent_coordinates(payload), codec.sparse.decode_sent(payload)
            if arrived is not None:  # the values decode writes there, and zeros elsewhere
                dense = codec.decode(payload)
                assert torch.equal(dense[sent], arrived) and int((dense != 0).sum()) <= sent.numel()
            codec.memory.settle(factor)
            codec.observe(chunk(n, seed=40 + step), key)
        kept[name] = (codec.memory.residuals[0], codec.memory.velocities[0])
    for a, b in zip(kept["sparse"], kept["dense"], strict=True):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    # only unscaled random-k (sharedk too) and the stacks on it give the sent values alone
    for name in (spec, spec.replace("scale=false", "scale=true"), "qsgd:bits=8"):
        codec = make_codec(name)
        sparse = codec.sparse
        gives = (
            sparse is not None and sparse.decode_sent(codec.encode(chunk(n), ChunkKey(0, 0, 0))) is not None
        )
        assert gives == ("scale=false" in name or name.startswith("sharedk")), name
