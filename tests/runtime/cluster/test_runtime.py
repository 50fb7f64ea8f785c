"""Distributed training on a real LocalCluster against single-process references."""

import math

import pytest
import torch
from torch.nn import functional as F

from adass.config import RunConfig
from adass.data import load_dataset, shard_indices
from adass.engine import lr_at, replica_seed
from adass.metrics import EvalRecord, SelectionRecord, StepRecord, TrafficRecord
from adass.models import build_model
from adass.runtime import train
from adass.runtime.cluster import RunStore, read_checkpoint, train_distributed
from adass.sampling import shuffled

DATA = "synthetic:n=203,d=6,classes=3,test=50"  # an odd size: shards and last batches differ


def reference_weights(config: RunConfig, workers: int) -> list[torch.Tensor]:
    """Single-process SGD whose every step uses the union of the replicas' local batches."""
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
        for s in range(steps):  # every replica's order split evenly over the steps
            idx = torch.cat(
                [order[s * order.numel() // steps : (s + 1) * order.numel() // steps] for order in orders]
            )
            if idx.numel() == 0:  # no samples anywhere: no step
                continue
            loss = F.cross_entropy(model(ds.x_train[idx]), ds.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("exchange", ["ring", "ps:servers=1"])
def test_two_workers_match_single_process_training(cluster, exchange):
    config = RunConfig.from_flat(data=DATA, model="mlp:hidden=8", sampler="full", epochs=2, batch_size=16,
                                 lr=0.1, workers=2, exchange=exchange, codec="fp32", seed=4)  # fmt: skip
    result = train_distributed(config, handle=cluster)
    for ours, ref in zip(result.parameters, reference_weights(config, 2), strict=True):
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    steps = result.sink.frame(StepRecord)
    assert set(steps["rank"]) == {0, 1}
    assert int(steps["samples"].sum()) == 2 * 203
    traffic = result.sink.frame(TrafficRecord)
    phases = set(traffic["phase"])
    assert (
        ({"push", "pull"} <= phases)
        if exchange.startswith("ps")
        else ({"reduce_scatter", "all_gather"} <= phases)
    )


def test_qsgd_ring_learns_and_adass_keeps_one_global_budget(cluster, tmp_path):
    base = dict(data="synthetic:n=600,d=8,classes=3,noise=0.0,test=200", model="mlp:hidden=16", epochs=6,
                batch_size=32, lr=0.1, workers=3, seed=1)  # fmt: skip
    exact = train_distributed(RunConfig.from_flat(**base, codec="fp32"), handle=cluster)
    store = RunStore()
    seen_during_run = []

    def progress(record: EvalRecord) -> None:
        seen_during_run.append(store.count("steps"))

    config = RunConfig.from_flat(**base, codec="qsgd:bits=8", exchange="ring:strategy=shared_scale",
                                 sampler="adass:eps=0.3,warmup=1,final=1,resample=0")  # fmt: skip
    result = train_distributed(
        config, handle=cluster, store=store, progress=progress, checkpoint_dir=tmp_path
    )
    assert result.final.test_acc >= exact.final.test_acc - 0.03

    def gradient_bytes(run) -> int:  # the codec's share: without the budget agreement's bytes
        traffic = run.sink.frame(TrafficRecord)
        return int(traffic.loc[traffic["phase"] != "agree", "wire_bytes"].sum())

    assert gradient_bytes(result) < 0.3 * gradient_bytes(exact)
    # live records reach the client while the run goes on, not only at its end
    assert seen_during_run[0] > 0 and seen_during_run == sorted(seen_during_run)
    selection = result.sink.frame(SelectionRecord)
    assert sorted(selection.loc[selection["epoch"] == 0, "sample_id"]) == list(range(600))
    kept = selection[selection["epoch"].between(1, 4)].groupby("epoch")["kept"].mean()
    assert (kept < 1.0).all()
    assert result.totals["backprops"] < 6 * 600
    # the drift rate is estimated from every replica's observations: one rate, so bounds compare
    folder = read_checkpoint(tmp_path, 3).folder
    states = [torch.load(folder / f"rank{r}.pt", weights_only=True)["sampler"] for r in range(3)]
    assert states[0]["slope"] > 0 and all(st["slope"] == states[0]["slope"] for st in states)
    # every replica's samples are spread evenly over the agreed steps, as many as one process takes
    steps = result.sink.frame(StepRecord)
    for epoch, group in steps.groupby("epoch"):
        per_step = group.groupby("step")["samples"].sum()
        assert len(per_step) == math.ceil(per_step.sum() / 32), epoch
        sizes = group.groupby("rank")["samples"]
        assert (sizes.max() - sizes.min()).max() <= 1


def test_dask_replicas_match_in_process_replicas_with_adass_refreshes(cluster):
    """The same engine on Dask (torch.distributed agreement, gloo ring) and on threads (in-process
    agreement and transport): the same parameters, and ``refresh=k`` passes run on every replica."""
    config = RunConfig.from_flat(data="synthetic:n=300,d=6,classes=3,noise=0.0,test=60", model="mlp:hidden=8",
                                 sampler="adass:eps=0.4,warmup=1,final=0,refresh=2", epochs=4, batch_size=32,
                                 lr=0.1, workers=3, exchange="ring", codec="fp32", seed=2)  # fmt: skip
    on_dask = train_distributed(config, handle=cluster)
    in_process = train(config, replicas=config.cluster.workers)
    for ours, theirs in zip(on_dask.parameters, in_process.extra["parameters"][0], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    assert on_dask.totals["forwards"] > on_dask.totals["backprops"]  # the refresh forwards
    assert on_dask.totals["forwards"] == in_process.counters.forwards


def test_a_step_without_samples_on_any_replica_is_skipped_on_dask(cluster):
    """5 samples, 2 replicas, global batch 1: the first step of every epoch is empty everywhere."""
    config = RunConfig.from_flat(data="synthetic:n=5,d=4,classes=2,test=10", model="mlp:hidden=4", sampler="full",
                                 epochs=2, batch_size=1, lr=0.1, momentum=0.9, workers=2, exchange="ring",
                                 codec="fp32", seed=2)  # fmt: skip
    result = train_distributed(config, handle=cluster)
    for ours, ref in zip(result.parameters, reference_weights(config, 2), strict=True):
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)


def test_ps_servers_owning_their_shard_resume_from_a_checkpoint(cluster, tmp_path):
    """``ps:update=server`` on Dask: the servers' parameters and momentum go into every checkpoint
    (``server<s>.pt``), and a resumed run ends where the uninterrupted in-process run does."""
    config = RunConfig.from_flat(data=DATA, model="mlp:hidden=8", sampler="full", epochs=2, batch_size=16,
                                 lr=0.1, momentum=0.9, weight_decay=1e-3, schedule="constant", workers=2,
                                 exchange="ps:servers=1,update=server", codec="fp32", seed=4)  # fmt: skip
    train_distributed(config, handle=cluster, checkpoint_dir=tmp_path)
    assert (read_checkpoint(tmp_path).folder / "server0.pt").exists()
    resumed = train_distributed(
        config.replace(epochs=3), handle=cluster, checkpoint_dir=tmp_path, resume=True
    )
    straight = train(config.replace(epochs=3), replicas=config.cluster.workers).extra["parameters"][0]
    for ours, theirs in zip(resumed.parameters, straight, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
