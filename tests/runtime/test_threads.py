"""In-process virtual replicas against single-process references, and one global ADASS budget."""

import math

import pytest
import torch
from torch.nn import functional as F

from adass.config import RunConfig
from adass.data import load_dataset, shard_indices
from adass.engine import AgreementBoard, Engine, ReplicaState, replica_seed, spread_evenly
from adass.engine.step import lr_at
from adass.metrics import SelectionRecord, StepRecord
from adass.models import build_model
from adass.runtime import on_threads, train
from adass.sampling import drop_within_budget, shuffled

DATA = "synthetic:n=203,d=6,classes=3,test=50"  # an odd size: shards and last batches differ


def reference_weights(config: RunConfig, workers: int) -> list[torch.Tensor]:
    """Single-process SGD whose every step uses the union of the replicas' local batches; a step
    with no samples anywhere is no step at all."""
    o = config.optim
    ds = load_dataset(config.data.data, seed=o.seed)
    shards = shard_indices(ds.y_train, workers, config.data.shard, seed=o.seed)
    model = build_model(config.model.model, ds.shape, ds.classes, seed=o.seed)
    opt = torch.optim.SGD(model.parameters(), lr=o.lr, momentum=o.momentum)
    for epoch in range(o.epochs):
        for g in opt.param_groups:
            g["lr"] = lr_at(o.lr, o.schedule, epoch, o.epochs)
        orders = [shard[shuffled(torch.arange(shard.numel()), replica_seed(o.seed, r), epoch)]
                  for r, shard in enumerate(shards)]  # fmt: skip
        steps = math.ceil(sum(order.numel() for order in orders) / o.batch_size)
        for s in range(steps):
            idx = torch.cat([order[spread_evenly(order.numel(), steps, o.batch_size)[s]] for order in orders])
            if idx.numel() == 0:
                continue
            loss = F.cross_entropy(model(ds.x_train[idx]), ds.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [p.detach() for p in model.parameters()]


def assert_replicas_equal_reference(result, config: RunConfig, workers: int) -> None:
    parameters = result.extra["parameters"]
    assert len(parameters) == workers
    for rank in range(1, workers):  # bit-identical replicas
        assert all(torch.equal(a, b) for a, b in zip(parameters[0], parameters[rank], strict=True)), rank
    for ours, ref in zip(parameters[0], reference_weights(config, workers), strict=True):
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("exchange", ["ring", "ps:servers=2"])
def test_virtual_replicas_match_single_process_training(exchange):
    config = RunConfig.from_flat(data=DATA, model="mlp:hidden=8", sampler="full", epochs=2, batch_size=16,
                                 lr=0.1, workers=3, exchange=exchange, codec="fp32", seed=4)  # fmt: skip
    result = train(config, replicas=3)
    assert_replicas_equal_reference(result, config, 3)
    steps = result.sink.frame(StepRecord)
    assert set(steps["rank"]) == {0, 1, 2} and int(steps["samples"].sum()) == 2 * 203
    assert result.final.wire_bytes > 0 and result.counters.backprops == 2 * 203


def test_a_step_nobody_has_samples_for_changes_nothing_and_one_with_an_empty_local_batch_steps():
    """5 samples on 2 replicas (3 + 2), global batch 1: 5 steps a epoch, spread evenly, so step 0 is
    empty everywhere and in steps 1-3 one replica's batch is empty. Momentum makes any extra or
    missing optimizer step visible."""
    config = RunConfig.from_flat(data="synthetic:n=5,d=4,classes=2,test=10", model="mlp:hidden=4", sampler="full",
                                 epochs=2, batch_size=1, lr=0.1, momentum=0.9, workers=2, exchange="ring",
                                 codec="fp32", seed=2)  # fmt: skip
    result = train(config, replicas=config.cluster.workers)
    steps = result.sink.frame(StepRecord)
    first = steps[steps["epoch"] == 0].pivot(index="step", columns="rank", values="samples")
    assert first.to_dict("list") == {0: [0, 1, 0, 1, 1], 1: [0, 0, 1, 0, 1]}
    assert_replicas_equal_reference(result, config, 2)


def test_two_pass_samplers_count_their_backprops_across_replicas():
    """Selective backprop with a high beta skips most samples: some steps backprop nothing on any
    replica (those take no optimizer step), and the replicas stay identical."""
    config = RunConfig.from_flat(data=DATA, model="mlp:hidden=8", sampler="selective_backprop:beta=10",
                                 epochs=2, batch_size=8, lr=0.1, workers=2, exchange="ring", codec="fp32",
                                 seed=1)  # fmt: skip
    result = train(config, replicas=config.cluster.workers)
    steps = result.sink.frame(StepRecord)
    per_step = steps.groupby("step")["samples"].sum()
    assert (per_step == 0).any() and (per_step > 0).any()
    parameters = result.extra["parameters"]
    assert all(torch.equal(a, b) for a, b in zip(parameters[0], parameters[1], strict=True))


def test_refresh_passes_run_on_every_replica():
    """``adass:refresh=k``: every k-th epoch each replica passes forward, before selecting, the samples
    its last selection dropped."""
    config = RunConfig.from_flat(data="synthetic:n=600,d=8,classes=3,noise=0.0,test=100", model="mlp:hidden=16",
                                 sampler="adass:eps=0.4,warmup=1,final=0,refresh=2", epochs=5, batch_size=32,
                                 lr=0.1, workers=3, exchange="ring", codec="fp32", seed=1)  # fmt: skip
    result = train(config, replicas=config.cluster.workers)
    c = result.counters
    selection = result.sink.frame(SelectionRecord)
    dropped = (~selection["kept"].astype(bool)).groupby(selection["epoch"]).sum()
    assert dropped[1] > 0 and dropped[3] > 0
    assert c.forwards - c.backprops == dropped[1] + dropped[3]  # refreshes in epochs 2 and 4 only


def test_replicas_keep_one_global_budget():
    """Each replica keeps its samples above one threshold: the drop mask over all replicas' bounds
    together is what ``drop_within_budget`` gives for the whole data set."""
    config = RunConfig.from_flat(data="synthetic:n=300,d=6,classes=3,test=50", model="mlp:hidden=8",
                                 sampler="adass:eps=0.3,warmup=1,final=0,lipschitz=const,min_keep=0.05,resample=0",
                                 epochs=3, batch_size=32, lr=0.1, seed=5)  # fmt: skip
    ds = load_dataset(config.data.data, seed=5)
    board = AgreementBoard(3)
    engines = [Engine(ReplicaState.shard(config, ds, r, 3), board.agreement(r)) for r in range(3)]
    for e in engines:
        e.exchange = None  # plans only: no step is taken below
    on_threads(3, lambda r: engines[r].plan(0))
    for e in engines:  # one visit of every sample, so every bound is finite
        e.state.sampler.observe(torch.arange(e.state.n), torch.rand(e.state.n, generator=torch.Generator().manual_seed(e.rank)),
                                {"path": 0.0})  # fmt: skip
    bounds = [e.state.sampler.bounds() for e in engines]
    plans = on_threads(3, lambda r: engines[r].plan(1))
    everyone = torch.cat(bounds)
    expected_drop = drop_within_budget(everyone, 0.3, everyone.numel() - math.ceil(0.05 * everyone.numel()))
    kept = torch.cat([e.state.sampler.kept for e in engines])
    assert torch.equal(kept, ~expected_drop)
    alone = [drop_within_budget(b, 0.3, b.numel() - math.ceil(0.05 * b.numel())) for b in bounds]
    assert not torch.equal(~torch.cat(alone), kept)  # the local budgets would keep other samples
    assert [p.kept for p in plans] == [[int(k.sum()) for k in kept.split([e.state.n for e in engines])]] * 3
