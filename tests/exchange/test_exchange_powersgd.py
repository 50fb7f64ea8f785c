"""PowerSGD through the ring and the parameter server: the result against a plain computation of its
math, bit-identical ranks, wire bytes to the byte, the warm-up, checkpoints, and what is refused."""

from __future__ import annotations

import pytest
import torch
from exchange_cases import grads
from powersgd_cases import ring_against_torch_hook

from adass.codecs import ChunkKey, generator_for
from adass.codecs.powersgd import plan_layers
from adass.exchange import InProcHub, make_exchange
from adass.registry import SpecError
from adass.runtime import on_threads
from adass.runtime.launch import run_processes

SHAPES = [(12, 20), (12,), (5, 2, 3, 3), (5,), (3, 4)]
N = sum(torch.Size(s).numel() for s in SHAPES)
COUNTS = [1.0, 2.0, 4.0]
EXCHANGES = ["ring", "ps:servers=2"]


def _build(spec: str, codec: str, memory: str | None = "ef", world: int = 3) -> tuple[InProcHub, list]:
    servers = 2 if spec.startswith("ps") else 0
    hub = InProcHub(world + servers)
    exchanges = [
        make_exchange(spec, hub.transport(r), codec, memory=memory, seed=5) for r in range(world + servers)
    ]
    for e in exchanges[:world]:
        e.set_layers(SHAPES)
    return hub, exchanges


def _run(hub: InProcHub, exchanges: list, steps: range, world: int = 3, counts=COUNTS) -> list[list]:
    """Every rank's result of each step (gradients ``grads(.., seed=step)``); servers serve."""

    def work(rank: int) -> list:
        out = []
        for s in steps:
            if rank >= world:
                exchanges[rank].serve_step()
                continue
            x = grads(world, N, seed=s)[rank]
            out.append(exchanges[rank].reduce(x, count=None if counts is None else counts[rank]).clone())
        return out

    per_rank = on_threads(len(exchanges), work, [hub.abort])
    return [[per_rank[r][i] for r in range(world)] for i in range(len(steps))]


def _orthonormal(m: torch.Tensor) -> torch.Tensor:
    return torch.linalg.qr(m.double()).Q  # another algorithm than the codec's Gram-Schmidt: signs may differ


def reference(steps: range, rank: int, world: int = 3, counts=COUNTS, feedback: bool = True) -> list:
    """PowerSGD written out plainly, in float64: the weighted mean of compensated shares, one power
    step per layer from the kept Q, and residuals ``share - a_i * result`` (torch's hook keeps
    ``input - output`` on every worker, which is this in units of the mean)."""
    plan = plan_layers(SHAPES, rank, 2.0)
    a = [c / sum(counts) for c in counts]
    residuals = [torch.zeros(N, dtype=torch.float64) for _ in range(world)]
    qs = []
    for i, layer in enumerate(plan.compressed):  # the first Q as the codec draws it
        gen = generator_for(ChunkKey(5, 1, i), "powersgd")
        qs.append(_orthonormal(torch.randn(layer.cols, layer.rank, generator=gen)))
    results = []
    for s in steps:
        xs = grads(world, N, seed=s)
        comp = [a[r] * xs[r].double() + residuals[r] for r in range(world)]
        result = sum(comp)  # the whole layers: their weighted mean
        new_qs = []
        for layer, q in zip(plan.compressed, qs, strict=True):
            ms = [c[layer.lo : layer.hi].view(layer.rows, layer.cols) for c in comp]
            p = _orthonormal(sum(m @ _orthonormal(q) for m in ms))
            q_new = sum(m.t() @ p for m in ms)
            result[layer.lo : layer.hi] = (p @ q_new.t()).reshape(-1)
            new_qs.append(q_new)
        qs = new_qs
        if feedback:
            residuals = [comp[r] - a[r] * result for r in range(world)]
        results.append(result.float())
    return results


@pytest.mark.parametrize("spec", EXCHANGES)
@pytest.mark.parametrize("rank", [1, 2])
def test_result_is_powersgd_of_the_weighted_mean_with_error_feedback(spec: str, rank: int) -> None:
    hub, exchanges = _build(spec, f"powersgd:rank={rank}")
    got = _run(hub, exchanges, range(4))
    for step, (ours, ref) in enumerate(zip(got, reference(range(4), rank), strict=True)):
        assert all(torch.equal(ours[0], other) for other in ours[1:]), step  # bit-identical ranks
        torch.testing.assert_close(ours[0], ref, rtol=1e-4, atol=1e-4, msg=f"step {step}")


def test_without_memory_nothing_is_carried_over() -> None:
    hub, exchanges = _build("ring", "powersgd:rank=1", memory=None)
    got = _run(hub, exchanges, range(3), counts=None)
    for ours, ref in zip(got, reference(range(3), 1, counts=[1.0, 1.0, 1.0], feedback=False), strict=True):
        torch.testing.assert_close(ours[0], ref, rtol=1e-4, atol=1e-4)


def test_ring_and_ps_agree() -> None:
    ring = _run(*_build("ring", "powersgd:rank=2"), range(3))
    ps = _run(*_build("ps:servers=2", "powersgd:rank=2"), range(3))
    for a, b in zip(ring, ps, strict=True):
        torch.testing.assert_close(a[0], b[0], rtol=1e-5, atol=1e-5)


def _ring_bytes(numel: int, world: int, counted: bool) -> int:
    """What every rank together sends in one fp32 ring all-reduce of ``numel`` values: each chunk
    travels P-1 hops in each phase, and in reduce-scatter with the count's 8 bytes."""
    return (world - 1) * (2 * 4 * numel + (8 * world if counted else 0))


@pytest.mark.parametrize("world", [2, 3])
def test_ring_wire_bytes_are_the_factors_and_whole_layers(world: int) -> None:
    hub, exchanges = _build("ring", "powersgd:rank=2,warmup=1", world=world)
    plan = exchanges[0].codec.plan
    counts = [float(r + 1) for r in range(world)]
    _run(hub, exchanges, range(2), world=world, counts=counts)
    records = [r for e in exchanges for r in e.report().traffic]
    by_phase: dict[str, int] = {}
    for r in records:
        key = (r.step, r.phase)
        by_phase[key] = by_phase.get(key, 0) + r.wire_bytes
    # the warm-up step is the fp32 ring; then a P round (factors and whole layers) and a Q round
    warm = by_phase[(0, "reduce_scatter")] + by_phase[(0, "all_gather")]
    assert warm == _ring_bytes(N, world, True)
    p = by_phase[(1, "p.reduce_scatter")] + by_phase[(1, "p.all_gather")]
    q = by_phase[(1, "q.reduce_scatter")] + by_phase[(1, "q.all_gather")]
    assert p == _ring_bytes(plan.p_numel + plan.dense_numel, world, True)
    assert q == _ring_bytes(plan.q_numel, world, True)
    assert {phase for step, phase in by_phase if step == 1} == {
        "p.reduce_scatter", "p.all_gather", "q.reduce_scatter", "q.all_gather"}  # fmt: skip


def test_ps_wire_bytes_are_the_factors_and_whole_layers() -> None:
    hub, exchanges = _build("ps:servers=2", "powersgd:rank=2")
    plan = exchanges[0].codec.plan
    _run(hub, exchanges, range(1))
    records = [r for e in exchanges for r in e.report().traffic]
    total = {
        phase: sum(r.wire_bytes for r in records if r.phase == phase) for phase in {r.phase for r in records}
    }
    head = 8 + 5  # each push: its count (float64), the round's name (a byte) and its raw bytes (uint32)
    assert total["p.push"] == 3 * (4 * (plan.p_numel + plan.dense_numel) + 2 * head)
    assert total["p.pull"] == 3 * 4 * (plan.p_numel + plan.dense_numel)
    assert total["q.push"] == 3 * (4 * plan.q_numel + 2 * head)
    assert total["q.pull"] == 3 * 4 * plan.q_numel


@pytest.mark.parametrize("spec", EXCHANGES)
def test_raw_bytes_of_a_step_are_fp32s_so_wire_over_raw_is_the_saving(spec: str) -> None:
    hub, exchanges = _build(spec, "powersgd:rank=2")
    _run(hub, exchanges, range(1))
    ours = [r for e in exchanges for r in e.report().traffic]
    hub, exchanges = _build(spec, "fp32", memory=None)
    _run(hub, exchanges, range(1))
    fp32 = [r for e in exchanges for r in e.report().traffic]
    assert sum(r.raw_bytes for r in ours) == sum(r.raw_bytes for r in fp32)
    assert sum(r.raw_bytes for r in ours if r.phase.startswith("q.")) == 0
    for phase in {r.phase for r in fp32}:  # the p round stands for fp32's transfers one for one
        assert sorted(
            (r.src, r.dst, r.chunk, r.raw_bytes) for r in ours if r.phase == f"p.{phase}"
        ) == sorted((r.src, r.dst, r.chunk, r.raw_bytes) for r in fp32 if r.phase == phase)


@pytest.mark.parametrize("spec", EXCHANGES)
def test_warmup_steps_equal_the_fp32_exchange(spec: str) -> None:
    psgd = _run(*_build(spec, "powersgd:rank=1,warmup=2"), range(3))
    fp32 = _run(*_build(spec, "fp32", memory=None), range(3))
    for step in range(2):
        assert torch.equal(psgd[step][0], fp32[step][0]), step
    assert not torch.allclose(psgd[2][0], fp32[2][0], atol=1e-3)


def _two_directions(plan, seed: int = 0) -> torch.Tensor:
    """A flat gradient whose compressed layers are each ``10 u1 v1^T + u2 v2^T`` (orthonormal u, v)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, generator=gen)
    for layer in plan.compressed:
        u = torch.linalg.qr(torch.randn(layer.rows, 2, generator=gen)).Q
        v = torch.linalg.qr(torch.randn(layer.cols, 2, generator=gen)).Q
        x[layer.lo : layer.hi] = (10 * u[:, :1] @ v[:, :1].t() + u[:, 1:] @ v[:, 1:].t()).reshape(-1)
    return x


@pytest.mark.parametrize("spec", EXCHANGES)
def test_first_q_after_the_warmup_follows_the_mean_gradient(spec: str) -> None:
    # every worker sends the same gradient twice: a warm-up step, then the first compressed one. With
    # start=warmup its rank-1 result is each layer's best (the error is the second singular value,
    # 1); a first Q drawn at random mixes in the second direction and misses it
    plan = plan_layers(SHAPES, 1, 2.0)
    x = _two_directions(plan)

    def first_compressed(start: str) -> torch.Tensor:
        hub, exchanges = _build(spec, f"powersgd:rank=1,warmup=1,start={start}", memory=None)

        def work(rank: int) -> list:
            if rank >= 3:
                return [exchanges[rank].serve_step() for _ in range(2)]
            return [exchanges[rank].reduce(x.clone()).clone() for _ in range(2)]

        return on_threads(len(exchanges), work, [hub.abort])[0][1]

    for start, close in (("warmup", True), ("draw", False)):
        result = first_compressed(start)
        for layer in plan.compressed:
            err = torch.linalg.matrix_norm((x - result)[layer.lo : layer.hi].view(layer.rows, layer.cols))
            assert (abs(float(err) - 1.0) < 1e-3) is close, (start, layer, float(err))


@pytest.mark.parametrize("spec", EXCHANGES)
def test_resume_from_state_equals_an_uninterrupted_run(spec: str) -> None:
    # equal weights: the ring's count hint (the last step's total) is not part of its state, so a
    # weighted first step after a resume rounds its shares differently (as it does for fp32)
    whole = _run(*_build(spec, "powersgd:rank=2,warmup=1"), range(5), counts=None)
    hub, first = _build(spec, "powersgd:rank=2,warmup=1")
    _run(hub, first, range(3), counts=None)
    states = [e.state_dict() for e in first]
    assert "codec" in states[0] and "memory" in states[0]
    hub, second = _build(spec, "powersgd:rank=2,warmup=1")
    for e, state in zip(second, states, strict=True):
        e.load_state_dict(state)
    resumed = _run(hub, second, range(3, 5), counts=None)
    for a, b in zip(whole[3:], resumed, strict=True):
        assert torch.equal(a[0], b[0])


@pytest.mark.parametrize(
    "spec,memory,match",
    [("ps:update=server", "ef", "update=replica"), ("ps:colocated=true", "ef", "colocated"),
     ("ring", "mc", "error feedback"), ("ps", "mc", "error feedback")],
)  # fmt: skip
def test_impossible_pairs_fail_before_anything_runs(spec: str, memory: str, match: str) -> None:
    hub = InProcHub(3)
    with pytest.raises(SpecError, match=match):
        make_exchange(spec, hub.transport(0), "powersgd:rank=2", memory=memory)


def test_a_gradient_without_layer_shapes_is_refused() -> None:
    hub = InProcHub(1)
    ring = make_exchange("ring", hub.transport(0), "powersgd")
    with pytest.raises(ValueError, match="set_layers"):
        ring.reduce(torch.zeros(10))


@pytest.mark.parametrize("exchange", ["ring", "ps"])
def test_training_with_powersgd_comes_near_fp32(exchange: str) -> None:
    from adass.config import RunConfig
    from adass.runtime import train

    def accuracy(codec: str, memory: str) -> tuple[float, list]:
        config = RunConfig.from_flat(data="synthetic:n=600,d=20,classes=4,test=300", model="mlp:hidden=32",
                                     sampler="full", epochs=4, batch_size=32, lr=0.1, exchange=exchange,
                                     codec=codec, memory=memory, seed=2, workers=0, replicas=3)  # fmt: skip
        result = train(config, replicas=3)
        return result.final.test_acc, result.extra["parameters"]

    fp32, _ = accuracy("fp32", "none")
    psgd, parameters = accuracy("powersgd:rank=2", "ef")
    assert all(torch.equal(a, b) for a, b in zip(parameters[0], parameters[2], strict=True))
    assert psgd > 0.5 and abs(psgd - fp32) < 0.05, (psgd, fp32)


@pytest.mark.parametrize("rank", [1, 2, 4])
def test_ring_equals_torch_powersgd_hook_from_the_same_first_q(rank: int) -> None:
    """torch's hook (its warm-up, warm start and error feedback) on the same gradients over gloo;
    distinct layer shapes, so its batching by shape keeps our layer order."""
    shapes = [(32, 40), (32,), (16, 4, 3, 3), (16,), (3, 4)]  # both matrices compressed at rank 4
    results = run_processes(ring_against_torch_hook, 2, (shapes, rank, 2, 6), timeout_s=120)
    for per_rank in results:
        for step, (ours, theirs) in enumerate(per_rank):
            ours, theirs = torch.as_tensor(ours), torch.as_tensor(theirs)
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4, msg=f"step {step}")
    assert not torch.allclose(torch.as_tensor(results[0][5][0]), torch.as_tensor(results[0][1][0]))
