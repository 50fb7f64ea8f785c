"""Shared-knowledge selection (``sharedk``): workers that observed the same averaged results pick the
same coordinates; the scores choose the top share, the seed the rest; state round-trips; error
feedback's residual stays bounded around it."""

from __future__ import annotations

import struct

import pytest
import torch
from codec_cases import chunk, reference_and_fused

from adass.codecs import ChunkKey, SharedK, kernels, make_codec
from adass.codecs.shared import GROWTH, ChunkState, top_sorted
from adass.memory import ErrorFeedback, build_pair, encode_own
from adass.registry import SpecError


def _observed(codec: SharedK, n: int, steps: int, chunk_id: int = 0) -> SharedK:
    """``codec`` after ``steps`` steps of encoding and observing seeded 'averaged' chunks."""
    for step in range(steps):
        key = ChunkKey(7, step, chunk_id)
        codec.encode(chunk(n, seed=step), key)
        codec.observe(chunk(n, seed=100 + step), key)
    return codec


def test_spec_round_trips_and_bad_values_fail_in_one_line() -> None:
    codec = make_codec("sharedk:ratio=0.05,growth=linear,warmup=2")
    assert isinstance(codec, SharedK) and make_codec(codec.name) == codec
    assert codec.traits.contractive and codec.traits.summable and codec.keyed_values() is not None
    with pytest.raises(SpecError, match="growth"):
        make_codec("sharedk:growth=cubic")
    with pytest.raises(SpecError, match="top"):
        make_codec("sharedk:top=1.5")


def test_without_state_it_is_shared_seed_random_k() -> None:
    n, key = 500, ChunkKey(3, 4, 1)
    shared = make_codec("sharedk:ratio=0.1")
    plain = make_codec("randk:ratio=0.1,scale=false")
    assert torch.equal(shared.indices(n, key), plain.indices(n, key))
    x = chunk(n)
    assert torch.equal(shared.decode(shared.encode(x, key)), plain.decode(plain.encode(x, key)))


def test_ranks_that_observed_the_same_results_pick_the_same_coordinates() -> None:
    n = 400
    a = _observed(make_codec("sharedk:ratio=0.05"), n, 6)
    b = _observed(make_codec("sharedk:ratio=0.05"), n, 6)
    key = ChunkKey(7, 6, 0)
    assert torch.equal(a.indices(n, key), b.indices(n, key))
    # a different history gives a different choice: the state, not only the seed, decides
    c = make_codec("sharedk:ratio=0.05")
    for step in range(6):
        k = ChunkKey(7, step, 0)
        c.encode(chunk(n, seed=step), k)
        c.observe(chunk(n, seed=200 + step), k)
    assert not torch.equal(a.indices(n, key), c.indices(n, key))


def test_the_top_share_follows_the_scores() -> None:
    n, k = 1000, 50
    codec = _observed(make_codec("sharedk:ratio=0.05,top=0.8"), n, 4)
    state = codec.states[0]
    chosen = set(codec.indices(n, ChunkKey(7, 4, 0)).tolist())
    assert len(chosen) == k
    scores = codec.scores(state)
    threshold = float(torch.topk(scores, round(0.8 * k)).values.min())
    assert set((scores > threshold).nonzero().flatten().tolist()) <= chosen  # every score above it
    assert sum(float(scores[i]) >= threshold for i in chosen) >= round(0.8 * k)  # ties fill the rest


def test_top_one_is_the_scores_alone_and_top_zero_is_random() -> None:
    n = 300
    greedy = _observed(make_codec("sharedk:ratio=0.1,top=1.0"), n, 3)
    scores = greedy.scores(greedy.states[0])
    chosen = greedy.indices(n, ChunkKey(7, 3, 0))
    assert float(scores[chosen].min()) >= float(torch.topk(scores, 30).values.min())
    random = _observed(make_codec("sharedk:ratio=0.1,top=0.0"), n, 3)
    again = _observed(make_codec("sharedk:ratio=0.1,top=0.0"), n, 3)
    assert torch.equal(random.indices(n, ChunkKey(7, 3, 0)), again.indices(n, ChunkKey(7, 3, 0)))


def test_observe_updates_rates_of_the_sent_and_waits_of_the_rest() -> None:
    n, key = 200, ChunkKey(1, 0, 0)
    codec = make_codec("sharedk:ratio=0.1,growth=linear")
    codec.encode(chunk(n), key)
    sent = codec.indices(n, key)
    averaged = chunk(n, seed=9)
    codec.observe(averaged, key)
    state = codec.states[0]
    assert torch.equal(state.rate[sent], averaged[sent].abs())  # first send, wait 1: rate = |value|
    assert bool(state.seen[sent].all()) and int(state.seen.sum()) == sent.numel()
    others = torch.ones(n, dtype=torch.bool)
    others[sent] = False
    assert bool((state.wait[sent] == 1).all()) and bool((state.wait[others] == 2).all())


def test_the_random_share_reaches_every_coordinate_over_time() -> None:
    n, steps = 200, 400  # 5 random slots out of 195 a step: each coordinate missed with odds e**-10
    codec = make_codec("sharedk:ratio=0.05,top=0.5")
    ever = torch.zeros(n, dtype=torch.bool)
    spike = torch.zeros(n)
    spike[:5] = 100.0  # five coordinates that dominate the scores
    for step in range(steps):
        key = ChunkKey(0, step, 0)
        codec.encode(spike, key)
        ever[codec.indices(n, key)] = True
        codec.observe(spike + 0.01, key)
    assert bool(ever.all())


@pytest.mark.parametrize("growth", sorted(GROWTH))
def test_error_feedback_residual_stays_bounded(growth: str) -> None:
    """Stich et al.: with a contractive selection the residual stays within a constant of the gradients."""
    n = 400
    codec, memory = build_pair(f"sharedk:ratio=0.05,growth={growth}", "ef")
    assert isinstance(memory, ErrorFeedback)
    norms = []
    for step in range(300):
        key = ChunkKey(2, step, 0)
        g = chunk(n, seed=step)
        payload = encode_own(codec, memory, g, key)
        codec.observe(codec.decode(payload), key)
        norms.append(float(memory.residuals[0].norm() / g.norm()))
    assert max(norms[150:]) < 2.0 * max(norms[:150]) + 1.0
    assert max(norms) < 60.0  # sqrt(n / k) = sqrt(20) times a few: bounded, not growing with the steps


def test_codec_state_round_trips_and_restores_the_choice() -> None:
    n = 300
    codec = _observed(make_codec("sharedk:ratio=0.1"), n, 5)
    restored = make_codec("sharedk:ratio=0.1")
    restored.load_codec_state(codec.codec_state())
    key = ChunkKey(7, 5, 0)
    assert torch.equal(codec.indices(n, key), restored.indices(n, key))
    stacked = make_codec("sharedk:ratio=0.1+qsgd:bits=8", for_memory=True)
    stacked.load_codec_state(codec.codec_state())
    assert torch.equal(stacked.codec_state()[0]["rate"], codec.states[0].rate)


def test_unseen_first_sends_every_coordinate_once_before_the_scores_take_over() -> None:
    n, k = 100, 10
    codec = make_codec("sharedk:ratio=0.1,top=1.0,unseen=first")
    counts = torch.zeros(n)
    for step in range(n // k):
        key = ChunkKey(0, step, 0)
        codec.encode(chunk(n, seed=step), key)
        counts[codec.indices(n, key)] += 1
        codec.observe(chunk(n, seed=50 + step), key)
    assert bool((counts == 1).all())
    mean = make_codec("sharedk:ratio=0.1,top=1.0")  # the mean rate instead: the largest are sent again
    counts.zero_()
    for step in range(n // k):
        key = ChunkKey(0, step, 0)
        mean.encode(chunk(n, seed=step), key)
        counts[mean.indices(n, key)] += 1
        mean.observe(chunk(n, seed=50 + step), key)
    assert int((counts > 1).sum()) > 0


def _state_of(n: int, kind: str) -> ChunkState:
    """A chunk state of ``n`` coordinates: random, with runs of equal scores, or odd values."""
    gen = torch.Generator().manual_seed(n)
    rate = torch.rand(n, generator=gen) * torch.rand(n, generator=gen).mul(8).exp()
    wait = torch.randint(1, 20, (n,), generator=gen).float()
    seen = torch.rand(n, generator=gen) < 0.6
    if kind == "ties":  # few distinct rates and waits: many equal scores
        rate = torch.randint(0, 3, (n,), generator=gen).float()
        wait = torch.randint(1, 3, (n,), generator=gen).float()
    elif kind == "all seen":
        seen = torch.ones(n, dtype=torch.bool)
    elif kind == "odd":  # NaN, infinite, zero and signed-zero rates
        rate[::7], rate[1::11], rate[2::5], rate[3::13] = float("nan"), float("inf"), 0.0, -0.0
    rate = torch.where(seen, rate, 0.0)  # as observe leaves it: no rate where never sent
    return ChunkState(rate, wait, seen)


def test_top_sorted_takes_every_score_above_the_threshold_and_picked_ties() -> None:
    scores = torch.tensor([1.0, 3.0, 2.0, 3.0, 2.0, 2.0, 0.0, 2.0])
    asked = []

    def pick(m: int, r: int) -> torch.Tensor:
        asked.append((m, r))
        return torch.arange(m - r, m)  # the last r of the m tied scores

    assert top_sorted(scores, 1, pick).tolist() == [3] and asked == [(2, 1)]
    assert top_sorted(scores, 3, pick).tolist() == [1, 3, 7]  # both 3s, then the last 2
    assert asked[-1] == (4, 1)
    assert top_sorted(scores, 2, pick).tolist() == [1, 3]  # no tie to break: pick not asked
    assert len(asked) == 2
    assert top_sorted(scores, 8, pick).tolist() == list(range(8))
    assert top_sorted(scores, 0, pick).numel() == 0
    distinct = torch.randperm(500, generator=torch.Generator().manual_seed(0)).float()
    assert torch.equal(top_sorted(distinct, 40, pick), torch.sort(torch.topk(distinct, 40).indices).values)


def test_tied_scores_are_chosen_by_the_shared_seed_not_by_position() -> None:
    n, k = 1000, 100
    codec = make_codec("sharedk:ratio=0.1,top=1.0")
    state = ChunkState(torch.ones(n), torch.ones(n), torch.ones(n, dtype=torch.bool))  # all tied
    picks = [codec._choose(state, n, k, ChunkKey(1, step, 0)) for step in range(2)]
    again = make_codec("sharedk:ratio=0.1,top=1.0")._choose(state, n, k, ChunkKey(1, 0, 0))
    assert torch.equal(picks[0], again)  # the same key, the same choice on every worker
    assert not torch.equal(picks[0], picks[1])  # another step, another draw
    assert float(picks[0].float().mean()) > 300  # spread over the chunk, not its first k


@pytest.mark.skipif(not kernels.available(), reason="numba does not import")
@pytest.mark.parametrize("kind", ["random", "ties", "all seen", "odd"])
@pytest.mark.parametrize("spec", ["sharedk:ratio=0.1", "sharedk:ratio=0.3,top=0.5,growth=linear",
                                  "sharedk:ratio=0.05,unseen=first", "sharedk:ratio=0.2,top=1.0",
                                  "sharedk:ratio=0.2,top=0.0"])  # fmt: skip
def test_fused_selection_chooses_the_reference_coordinates(spec: str, kind: str) -> None:
    for n in (1, 2, 7, 61, 1000, 40_001):
        both = {kernel: make_codec(spec, kernel) for kernel in kernels.KERNELS}
        codec = both["reference"]
        state = _state_of(n, kind)
        k = codec.k_for(n)
        ref, fused = reference_and_fused(
            lambda kernel, b=both, s=state, n=n, k=k: b[kernel]._choose(s, n, k, ChunkKey(5, 9, 0))
        )
        assert torch.equal(ref, fused), (spec, kind, n)
        assert ref.numel() == k and bool((ref[1:] > ref[:-1]).all())
        top_k = min(k, round(codec.top * k))
        if top_k:  # the top share holds the highest scores (NaN counted highest)
            scores = codec.scores(state)
            threshold = float(torch.topk(scores, top_k).values.min())
            chosen = set(ref.tolist())
            assert set((scores > threshold).nonzero().flatten().tolist()) <= chosen
            assert sum(float(scores[i]) >= threshold for i in chosen) >= top_k
            assert not torch.isnan(scores).any() and bool((scores >= 0).all())


@pytest.mark.skipif(not kernels.available(), reason="numba does not import")
@pytest.mark.parametrize("kind", ["random", "ties", "all seen", "odd", "none seen"])
def test_the_unseen_rate_is_the_mean_rate_of_the_seen_on_both_paths_bit_for_bit(kind: str) -> None:
    for n in (1, 2, 61, 1000, 300_001):
        state = _state_of(n, "random" if kind == "none seen" else kind)
        if kind == "none seen":
            state = ChunkState(torch.zeros(n), state.wait, torch.zeros(n, dtype=torch.bool))
        ref, fused = reference_and_fused(
            lambda kernel, s=state: make_codec("sharedk:ratio=0.1", kernel)._fill(s)
        )
        assert struct.pack("<d", ref) == struct.pack("<d", fused), (kind, n)
        seen = state.seen
        if kind == "all seen" or bool(seen.all()):
            assert ref == 0.0  # no coordinate is scored with it
        elif not bool(seen.any()):
            assert ref == 1.0
        elif kind != "odd":
            assert ref == pytest.approx(float(state.rate[seen].double().mean()), rel=1e-12)
        first = make_codec("sharedk:ratio=0.1,unseen=first")._fill(state)
        assert first == (0.0 if bool(seen.all()) else float("inf"))


@pytest.mark.skipif(not kernels.available(), reason="numba does not import")
@pytest.mark.parametrize("growth", sorted(GROWTH))
def test_fused_scores_are_the_reference_scores_bit_for_bit(growth: str) -> None:
    from adass.codecs.kernels import select

    n = 300_000
    gen = torch.Generator().manual_seed(3)
    rate = torch.rand(n, generator=gen) * torch.rand(n, generator=gen).mul(20).exp()
    wait = torch.randint(1, 1 << 20, (n,), generator=gen).float()  # long waits too
    seen = torch.rand(n, generator=gen) < 0.7
    state = ChunkState(torch.where(seen, rate, 0.0), wait, seen)
    codec = make_codec(f"sharedk:ratio=0.01,growth={growth}")
    fused = select.scores(
        *(t.numpy() for t in (state.rate, wait, seen)), codec._fill(state), growth == "linear"
    )
    assert torch.equal(codec.scores(state).view(torch.int32), torch.from_numpy(fused).view(torch.int32))


@pytest.mark.skipif(not kernels.available(), reason="numba does not import")
@pytest.mark.parametrize("spec", ["sharedk:ratio=0.1", "sharedk:ratio=0.3,growth=linear,decay=0.3",
                                  "sharedk:ratio=0.2,decay=0.0", "sharedk:ratio=0.05,decay=1.0,unseen=first"])  # fmt: skip
def test_fused_observe_learns_the_reference_state_bit_for_bit(spec: str) -> None:
    n, steps = 5_003, 6
    states = {}
    for kernel in ("reference", "fused"):
        codec = make_codec(spec, kernel)  # one codec per kernel family
        for step in range(steps):
            key = ChunkKey(3, step, 0)
            codec.encode(chunk(n, seed=step), key)
            spread = torch.rand(n, generator=torch.Generator().manual_seed(step))
            averaged = chunk(n, seed=50 + step) * spread
            averaged[:: 97 + step] = float("nan")  # NaN, infinities, signed and unsigned zeros, tiny
            averaged[1::89] = float("inf")
            averaged[2::83] = -float("inf")
            averaged[3::79] = -0.0
            averaged[4::73] = 1e-40
            codec.observe(averaged, key)
        states[kernel] = codec.states[0]
    ref, fused = states["reference"], states["fused"]
    for name in ("rate", "wait"):
        a, b = getattr(ref, name), getattr(fused, name)
        assert torch.equal(a.view(torch.int32), b.view(torch.int32)), name
    assert torch.equal(ref.seen, fused.seen)
    assert bool(ref.seen.any()) and float(ref.wait.max()) > 1.0  # sent and waiting coordinates both
