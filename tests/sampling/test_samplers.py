"""Sampler invariants: what each policy keeps, and how ADASS bounds behave."""

import doctest
import math

import pytest
import torch
from torch.nn import functional as F

from adass.engine import AgreementBoard, LocalAgreement
from adass.models import build_model
from adass.registry import SpecError
from adass.sampling import SAMPLERS, Sampler, build_sampler, draw_chances, drop_within_budget
from adass.sampling import adass as adass_module
from adass.sampling import base as base_module
from adass.sampling.adass import keep_at_least


def feed(sampler, indices, losses, path):
    sampler.observe(indices, losses, {"path": path})


def adass(spec="adass", n=200, **context):
    return build_sampler(spec, n=n, seed=0, epochs=50, **context)


def test_every_policy_is_registered():
    assert SAMPLERS.names() == ["adass", "full", "infobatch", "random", "selective_backprop"]


def test_full_visits_every_sample_in_a_seeded_order():
    a = build_sampler("full", n=50, seed=1, epochs=2)
    b = build_sampler("full", n=50, seed=1, epochs=2)
    s0, s1 = a.select(0), a.select(1)
    assert sorted(s0.indices.tolist()) == list(range(50))
    assert torch.equal(s0.indices, b.select(0).indices)
    assert not torch.equal(s0.indices, s1.indices)


def test_random_keeps_the_ratio_and_changes_each_epoch():
    s = build_sampler("random:ratio=0.3", n=101, seed=0, epochs=2)
    a, b = s.select(0), s.select(1)
    assert len(a) == len(b) == math.ceil(0.3 * 101)
    assert len(set(a.indices.tolist())) == len(a)
    assert set(a.indices.tolist()) != set(b.indices.tolist())


def test_drop_within_budget_is_the_longest_prefix_within_eps():
    bounds = torch.tensor([5.0, 1.0, 2.0, 0.5, 3.0, float("inf")])
    drop = drop_within_budget(bounds, eps=0.3, max_drop=10)  # finite total 11.5, budget 3.45
    assert drop.tolist() == [False, True, False, True, False, False]  # 0.5 + 1; adding 2 exceeds
    assert drop_within_budget(bounds, eps=0.3, max_drop=1).tolist() == [False] * 3 + [True] + [False] * 2


def test_drop_within_budget_prefix_property():
    gen = torch.Generator().manual_seed(0)
    bounds = torch.rand(1000, generator=gen) ** 3
    for eps in (0.0, 0.05, 0.2, 0.5, 0.9):
        drop = drop_within_budget(bounds, eps, max_drop=1000)
        dropped, total = float(bounds[drop].sum()), float(bounds.sum())
        assert dropped <= eps * total + 1e-6
        if (~drop).any():  # adding the smallest kept bound would break the budget
            assert dropped + float(bounds[~drop].min()) > eps * total
            assert (float(bounds[drop].max()) if drop.any() else 0.0) <= float(bounds[~drop].min())


@pytest.mark.parametrize("module", [adass_module, base_module])
def test_the_sampling_doctests_hold(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def _stable_smallest(values: torch.Tensor, count: int) -> torch.Tensor:
    """The first ``count`` of a stable ascending argsort: the rule the cuts follow, equal values in index order."""
    mask = torch.zeros(values.numel(), dtype=torch.bool)
    mask[torch.argsort(values, stable=True)[:count]] = True
    return mask


def test_the_budget_and_min_keep_cuts_are_a_stable_sort_s_prefix_with_ties_and_infinities():
    gen = torch.Generator().manual_seed(5)
    for trial in range(300):
        n = int(torch.randint(1, 200, (1,), generator=gen))
        bounds = (
            torch.randint(0, 4, (n,), generator=gen).float() if trial % 2 else torch.rand(n, generator=gen)
        )
        bounds[torch.rand(n, generator=gen) < 0.1] = math.inf  # never visited
        eps, max_drop = float(torch.rand(1, generator=gen)), int(torch.randint(0, n + 1, (1,), generator=gen))
        ranked = bounds[torch.argsort(bounds, stable=True)].double()
        finite = ranked[torch.isfinite(ranked)]
        count = int((torch.cumsum(finite, 0) <= eps * finite.sum()).sum())
        expected = (
            _stable_smallest(bounds, min(count, max_drop))
            if max_drop and eps
            else torch.zeros(n, dtype=torch.bool)
        )
        assert torch.equal(drop_within_budget(bounds, eps, max_drop), expected)
        drop, keep = torch.rand(n, generator=gen) < 0.8, int(torch.randint(0, n + 1, (1,), generator=gen))
        kept_back = keep_at_least(bounds, drop, keep)
        if int(drop.sum()) <= n - keep:
            assert torch.equal(kept_back, drop)
        else:
            assert torch.equal(kept_back, _stable_smallest(torch.where(drop, bounds, math.inf), n - keep))


def test_observations_fold_in_as_each_sample_s_last_visit():
    s = adass("adass:warmup=0,final=0", n=12)
    visits = [(torch.tensor([3, 1, 4]), torch.tensor([0.5, 1.5, 2.5]), 1.0),
              (torch.tensor([1, 5, 9]), torch.tensor([9.0, 3.0, 0.0]), 2.0),  # sample 1 again: its later visit wins
              (torch.tensor([3]), torch.tensor([4.0]), 3.0)]  # fmt: skip
    last: dict[int, tuple[float, float]] = {}
    for idx, losses, path in visits:
        feed(s, idx, losses, path)
        last.update({int(i): (float(f), p) for i, f, p in zip(idx, losses, [path] * len(idx), strict=True)})
    s.settle()
    for i in range(12):
        if i in last:
            loss, path = last[i]
            assert (float(s.last_loss[i]), float(s.sqrt_f[i]), float(s.path_at[i])) == (
                loss,
                float(torch.tensor(loss).sqrt()),
                path,
            )
            assert float(s.growth[i]) == 0.0 and not bool(s.dropped[i])
        else:
            assert math.isnan(float(s.sqrt_f[i])) and math.isnan(float(s.last_loss[i]))


def test_eps_zero_keeps_every_sample():
    s = adass("adass:eps=0,warmup=0,final=0", n=100)
    feed(s, torch.arange(100), torch.rand(100), 1.0)
    for epoch in range(3):
        assert len(s.select(epoch)) == 100


def test_kept_fraction_never_falls_below_min_keep():
    s = adass("adass:eps=1,warmup=0,final=0,min_keep=0.3", n=100)
    gen = torch.Generator().manual_seed(1)
    path = 0.0
    for epoch in range(6):
        sel = s.select(epoch)
        assert len(sel) >= 30
        path += 0.1
        feed(s, sel.indices, torch.rand(len(sel), generator=gen) * 0.01, path)


def test_resample_trains_a_random_share_of_the_budget_weighted_up_and_keeps_the_rest_as_without_it():
    """``resample=0.5``: the samples the budget drops without it are the candidates; about half of
    them come back each epoch with loss weight 2 (the expected gradient is the full one), every other
    kept sample keeps weight 1, and the draw changes from epoch to epoch."""
    losses = torch.rand(400, generator=torch.Generator().manual_seed(3))
    plain, resampled = (
        adass("adass:eps=0.5,warmup=0,final=0,resample=0", n=400),
        adass("adass:eps=0.5,warmup=0,final=0,resample=0.5", n=400),
    )
    for s in (plain, resampled):
        feed(s, torch.arange(400), losses, 1.0)
    without = set(plain.select(0).indices.tolist())
    drawn = []
    for epoch in range(2):
        sel = resampled.select(epoch)
        weight = dict(zip(sel.indices.tolist(), sel.weights.tolist(), strict=True))
        assert without <= set(weight)  # the budget's own choice stays kept, at weight 1
        assert all(weight[i] == 1.0 for i in without)
        extra = set(weight) - without
        assert all(weight[i] == 2.0 for i in extra)
        candidates = 400 - len(without)
        assert 0.3 * candidates < len(extra) < 0.7 * candidates
        drawn.append(extra)
        feed(resampled, torch.arange(400), losses, 1.0)
    assert drawn[0] != drawn[1]


def test_draw_chances_follow_the_bounds_capped_at_one_with_the_asked_mean():
    """Chances in proportion to the bounds where none reaches 1; the largest bounds get 1 and the rest
    share what is left where some would; an even share ``mix`` sets a floor; no bound at all: even."""
    bounds = torch.tensor([4.0, 1.0, 1.0, 2.0])
    assert torch.allclose(draw_chances(bounds, 0.25), bounds / 8)  # mean 0.25: 1 of 4 expected
    capped = draw_chances(torch.tensor([10.0, 1.0, 1.0, 0.0]), 0.5)  # 2 expected: the 10 certain
    assert torch.allclose(capped, torch.tensor([1.0, 0.5, 0.5, 0.0]))
    gen = torch.Generator().manual_seed(1)
    many = torch.rand(5000, generator=gen) ** 4
    for mean in (0.1, 0.5, 0.9):
        for mix in (0.0, 0.2, 1.0):
            c = draw_chances(many, mean, mix)
            assert abs(float(c.mean()) - mean) < 1e-5
            assert float(c.max()) <= 1.0 + 1e-6 and float(c.min()) >= mix * mean - 1e-6
            below = c < 1.0 - 1e-6  # uncapped chances keep the bounds' order
            order = torch.argsort(many[below])
            assert bool((c[below][order].diff() >= -1e-7).all())
    assert torch.allclose(draw_chances(many, 0.3, 1.0), torch.full((5000,), 0.3))
    assert torch.allclose(draw_chances(torch.zeros(6), 0.5), torch.full((6,), 0.5))


def test_draw_by_bound_weights_each_drawn_sample_by_its_chance_and_is_unbiased():
    """``draw=bound``: the budget's samples come back with chances that grow with their bounds and
    weight one over the chance, so over many epochs every sample's mean weight is 1 (the expected
    gradient is the full one), and small bounds come back less often than large ones."""
    n, epochs = 300, 400
    losses = torch.rand(n, generator=torch.Generator().manual_seed(4)) ** 2
    s = build_sampler(
        "adass:eps=0.9,warmup=0,final=0,resample=0.5,draw=bound,min_keep=0", n=n, seed=0, epochs=epochs
    )
    weight_sum, visits = torch.zeros(n), torch.zeros(n)
    for epoch in range(epochs):
        feed(s, torch.arange(n), losses, 1.0)  # the same losses and no travel: the same bounds every epoch
        sel = s.select(epoch)
        weight_sum[sel.indices] += sel.weights
        visits[sel.indices] += 1
        bounds = s.bounds()
        if epoch == 0:
            budget = drop_within_budget(bounds, 0.9, n)
            assert set(sel.indices.tolist()) >= set(torch.nonzero(~budget).flatten().tolist())
            assert float(sel.weights.max()) > 2.0  # small chances, large weights
    mean_weight = weight_sum / epochs
    assert abs(float(mean_weight.mean()) - 1.0) < 0.02
    assert float((mean_weight - 1.0).abs().max()) < 0.6
    share = visits / epochs
    small, large = losses < torch.quantile(losses, 0.2), (losses > torch.quantile(losses, 0.5)) & budget
    assert float(share[small].mean()) < float(share[large].mean())


def test_drop_keeps_the_smallest_bounds_out_and_resamples_the_rest_of_the_budget():
    """``drop=d``: the samples of the smallest bounds, ``d`` of the total, are never trained on; the
    rest of the budget comes back at random at weight 1/p; samples outside the budget keep weight 1.
    Only once a drift rate is measured: before any sample was seen twice, all the budget is resampled."""
    n = 600
    gen = torch.Generator().manual_seed(5)
    losses = torch.rand(n, generator=gen) ** 3
    s = build_sampler(
        "adass:eps=0.8,drop=0.2,resample=0.5,warmup=0,final=0,min_keep=0", n=n, seed=0, epochs=4
    )
    feed(s, torch.arange(n), losses, 1.0)
    first = s.select(0)  # no drift rate yet: nothing dropped outright, every budget sample at chance 1/2
    budget0 = drop_within_budget(s.bounds(), 0.8, n)
    assert 0.3 * int(budget0.sum()) < int((first.weights == 2.0).sum()) < 0.7 * int(budget0.sum())
    losses = losses * (1 + 0.1 * torch.rand(n, generator=gen))
    feed(s, torch.arange(n), losses, 2.0)  # every sample seen twice: a slope to measure
    bounds = s.bounds()
    outright, budget = drop_within_budget(bounds, 0.2, n), drop_within_budget(bounds, 0.8, n)
    assert 0 < int(outright.sum()) < int(budget.sum()) and bool((budget | ~outright).all())  # a prefix of it
    sel = s.select(1)
    assert s.slope > 0
    weight = dict(zip(sel.indices.tolist(), sel.weights.tolist(), strict=True))
    assert not set(weight) & set(torch.nonzero(outright).flatten().tolist())
    assert all(weight[i] == 1.0 for i in torch.nonzero(~budget).flatten().tolist())
    middle = torch.nonzero(budget & ~outright).flatten().tolist()
    drawn = [i for i in middle if i in weight]
    assert all(weight[i] == 2.0 for i in drawn) and 0.3 * len(middle) < len(drawn) < 0.7 * len(middle)


def test_drop_above_the_budget_is_refused_naming_both():
    with pytest.raises(SpecError, match=r"drop=0.5 is more than eps=0.3"):
        build_sampler("adass:eps=0.3,drop=0.5", n=10, seed=0, epochs=2)


def test_the_default_drop_shrinks_to_a_smaller_budget():
    assert build_sampler("adass", n=10, seed=0, epochs=2).drop == adass_module.DROP > 0
    assert build_sampler("adass:eps=0.01", n=10, seed=0, epochs=2).drop == 0.01
    assert build_sampler("adass:eps=0.01,drop=0", n=10, seed=0, epochs=2).drop == 0


def test_warmup_and_final_epochs_use_full_data():
    s = build_sampler("adass:eps=0.5,warmup=2,final=1", n=80, seed=0, epochs=6)
    feed(s, torch.arange(80), torch.rand(80) ** 4, 0.5)
    sizes = [len(s.select(e)) for e in range(6)]
    assert sizes[0] == sizes[1] == sizes[5] == 80
    assert min(sizes[2:5]) < 80


@pytest.mark.parametrize(
    "schedule, epochs, last_full",
    [
        ("constant", 8, True),
        ("cosine", 4, True),
        ("cosine", 5, False),
        ("cosine", 30, False),
        ("step", 8, False),
    ],
)
def test_final_auto_keeps_a_full_last_epoch_only_where_the_learning_rate_has_not_decayed(
    tiny_config, schedule, epochs, last_full
):
    from adass.data import load_dataset
    from adass.engine import ReplicaState

    config = tiny_config.replace(sampler="adass", schedule=schedule, epochs=epochs)
    data = load_dataset(config.data.data)
    state = ReplicaState.whole(config, data)  # the run's own path to the sampler
    s = state.sampler
    feed(s, torch.arange(s.n), torch.rand(s.n, generator=torch.Generator().manual_seed(0)) ** 4, 0.5)
    for epoch in range(epochs - 1):
        s.select(epoch)
    assert (len(s.select(epochs - 1)) == s.n) is last_full
    # a count given names the epochs whatever the schedule
    fixed = ReplicaState.whole(config.replace(sampler="adass:final=2"), data).sampler
    assert fixed.full_epoch(epochs - 2) and fixed.full_epoch(epochs - 1)


@pytest.mark.parametrize("raw", ["x", "-1", "1.5", "autos"])
def test_final_takes_a_count_or_auto_and_names_both_when_refused(raw):
    with pytest.raises(SpecError, match=rf"^sampler 'adass:final={raw}': final=.* is not allowed; expected auto or an "
                                        r"integer in \[0, 100000\]$"):  # fmt: skip
        build_sampler(f"adass:final={raw}", n=10, seed=0, epochs=2)


@pytest.mark.parametrize("lipschitz", ["empirical", "const", "exact"])
def test_dropped_bounds_never_shrink_until_visited(lipschitz):
    n = 300
    norms = torch.rand(n) * 4
    s = adass(
        f"adass:eps=0.4,warmup=1,final=0,lipschitz={lipschitz}", n=n, feature_sq_norms=norms, linear=True
    )
    gen = torch.Generator().manual_seed(2)
    path = 0.0
    last_visit_bound = {}
    for epoch in range(8):
        sel = s.select(epoch)
        bounds = s.bounds()
        kept = set(sel.indices.tolist())
        for i in range(n):
            if i in last_visit_bound:
                assert bounds[i] >= last_visit_bound[i] - 1e-6, (epoch, i)
        # the kept samples are visited: their bounds may change; the dropped ones must not shrink
        path += float(torch.rand(1, generator=gen)) + 0.1
        feed(s, sel.indices, torch.rand(len(sel), generator=gen) ** 2, path)
        bounds = s.bounds()
        last_visit_bound = {i: float(bounds[i]) for i in range(n) if i not in kept}
        for i in list(last_visit_bound):
            if i in kept:
                del last_visit_bound[i]


def test_dropped_samples_come_back_as_the_model_moves():
    s = adass("adass:eps=0.3,warmup=0,final=0,lipschitz=const", n=100)
    feed(s, torch.arange(100), torch.linspace(0.01, 1, 100), 0.0)
    first = s.select(0)
    dropped = set(range(100)) - set(first.indices.tolist())
    assert dropped
    feed(s, first.indices, torch.full((len(first),), 0.5), 50.0)  # a long way travelled
    bounds = s.bounds()
    was_dropped = torch.tensor(sorted(dropped))
    assert float(bounds[was_dropped].min()) > float(bounds[first.indices].max())
    back = set(s.select(1).indices.tolist())
    assert len(dropped & back) > 0.5 * len(dropped)


def test_exact_bound_covers_the_true_gradient_norm_of_logistic_regression():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 5, generator=gen) * 2
    y = torch.randint(0, 4, (64,), generator=gen)
    model = build_model("logreg", (5,), 4, seed=1)
    s = build_sampler(
        "adass:lipschitz=exact", n=64, seed=0, epochs=5, feature_sq_norms=x.pow(2).sum(1), linear=True
    )
    losses = F.cross_entropy(model(x), y, reduction="none")
    feed(s, torch.arange(64), losses.detach(), 0.0)
    bounds = s.bounds()
    for i in range(64):
        model.zero_grad()
        F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
        grad_sq = sum(float(p.grad.pow(2).sum()) for p in model.parameters())
        assert math.sqrt(grad_sq) <= float(bounds[i]) + 1e-5


def test_adass_state_dict_round_trip():
    s = adass("adass:warmup=0,final=0", n=50)
    feed(s, torch.arange(50), torch.rand(50), 1.0)
    s.select(0)
    t = adass("adass:warmup=0,final=0", n=50)
    t.load_state_dict(s.state_dict())
    assert torch.equal(s.bounds(), t.bounds())
    assert torch.equal(s.select(1).indices, t.select(1).indices)


def test_infobatch_prunes_only_below_mean_and_rescales():
    s = build_sampler("infobatch:ratio=0.5,anneal=0.25", n=400, seed=0, epochs=8)
    losses = torch.linspace(0, 2, 400)
    feed(s, torch.arange(400), losses, 0.0)
    sel = s.select(1)
    kept = set(sel.indices.tolist())
    assert all(i in kept for i in range(400) if losses[i] >= losses.mean())
    assert 60 < 400 - len(sel) < 140  # about half of the ~200 well-learned samples pruned
    well = losses[sel.indices] < losses.mean()
    assert torch.allclose(sel.weights[well], torch.full((int(well.sum()),), 2.0))
    assert torch.all(sel.weights[~well] == 1.0)
    assert len(s.select(6)) == 400  # the final quarter of epochs is on full data


def test_selective_backprop_prefers_high_losses():
    s = build_sampler("selective_backprop:beta=2", n=1000, seed=0, epochs=1)
    losses = torch.rand(1000, generator=torch.Generator().manual_seed(0))
    chosen = torch.zeros(1000)
    for _ in range(20):
        chosen += s.backprop_weights(torch.arange(1000), losses)
    high, low = losses > 0.8, losses < 0.2
    assert chosen[high].mean() > 10 * chosen[low].mean()


def test_empirical_slope_comes_from_the_pooled_observations():
    """The drift rate is a quantile of what ``pooler`` returns (in a distributed run: every
    replica's slopes), and the pooler is asked even by a sampler that observed nothing."""
    s = adass("adass:eps=0.3,warmup=0,final=0,lipschitz=empirical,quantile=0.5,decay=0", n=4)
    feed(s, torch.arange(4), torch.tensor([1.0, 4.0, 9.0, 16.0]), 0.0)  # sqrt-losses 1, 2, 3, 4
    s.bounds()  # folds in the first visits
    feed(s, torch.arange(4), torch.tensor([4.0, 9.0, 16.0, 25.0]), 2.0)  # each moved by 1 over path 2
    asked = []
    elsewhere = torch.tensor([3.0, 3.0, 3.0, 3.0, 3.0])  # another replica's slopes

    def pool(local, limit):
        asked.append(local.clone())
        return torch.cat([local, elsewhere])

    s.pooler = pool
    s.select(0)
    assert torch.allclose(asked[0], torch.full((4,), 0.5))
    assert s.slope == pytest.approx(3.0)  # the median of 4 x 0.5 and 5 x 3.0
    s.select(1)  # nothing observed since: the pooler is still asked (a collective in a real run)
    assert len(asked) == 2 and asked[1].numel() == 0
    assert s.slope == pytest.approx(3.0)

    alone = adass("adass:eps=0.3,warmup=0,final=0,lipschitz=empirical,quantile=0.5,decay=0", n=4)
    feed(alone, torch.arange(4), torch.tensor([1.0, 4.0, 9.0, 16.0]), 0.0)
    alone.bounds()
    feed(alone, torch.arange(4), torch.tensor([4.0, 9.0, 16.0, 25.0]), 2.0)
    alone.select(0)
    assert alone.slope == pytest.approx(0.5)  # one process: its own observations only


@pytest.mark.parametrize("name", SAMPLERS.names())
def test_every_sampler_takes_the_share_hook(name):
    """``share(agreement)`` is part of the protocol; local policies ignore it."""
    s = build_sampler(name, n=20, seed=1, epochs=3, feature_sq_norms=torch.ones(20), linear=True)
    assert isinstance(s, Sampler)
    before = s.select(0).indices
    s.share(AgreementBoard(3).agreement(1))  # a world of three, never asked: only ADASS would use it
    if name != "adass":
        assert torch.equal(build_sampler(name, n=20, seed=1, epochs=3).select(0).indices, before)


def test_adass_shares_its_budget_only_with_other_replicas():
    alone = adass("adass:eps=0.3,warmup=0,final=0", n=4)
    alone.share(LocalAgreement())
    assert alone.dropper == alone.local_drop  # a world of one: its own budget, no collectives
    shared = adass("adass:eps=0.3,warmup=0,final=0", n=4)
    shared.share(AgreementBoard(2).agreement(0))
    assert shared.dropper != shared.local_drop
