"""An asynchronous parameter server on Dask, over gloo: servers take pushes from whichever worker
sends first, keep their shard and version in checkpoints, and a resumed one-replica run ends where
the synchronous in-process run does (one worker runs asynchronously as in lock-step)."""

import torch
from ssp_clocks import ahead_at_each_push

from adass.config import RunConfig
from adass.metrics import StepRecord, TrafficRecord
from adass.runtime import train
from adass.runtime.cluster import read_checkpoint, train_distributed

DATA = "synthetic:n=203,d=6,classes=3,test=50"


def config_for(exchange: str, workers: int, **options) -> RunConfig:
    flat = dict(data=DATA, model="mlp:hidden=8", sampler="full", epochs=2, batch_size=16, lr=0.1, momentum=0.9,
                weight_decay=1e-3, schedule="cosine", workers=workers, exchange=exchange, codec="fp32", seed=4)  # fmt: skip
    return RunConfig.from_flat(**{**flat, **options})


def test_an_async_server_resumes_from_its_checkpoint_on_dask(cluster, tmp_path):
    config = config_for(
        "ps:servers=1,update=server,mode=async", 1, schedule="constant"
    )  # the same rates at 2 and 3 epochs
    first = train_distributed(config, handle=cluster, checkpoint_dir=tmp_path)
    saved = torch.load(read_checkpoint(tmp_path).folder / "server0.pt", weights_only=True)
    assert saved["versions"] == [len(first.sink.frame(StepRecord))]  # every step applied, once
    resumed = train_distributed(
        config.replace(epochs=3), handle=cluster, checkpoint_dir=tmp_path, resume=True
    )
    straight = train(
        config_for("ps:servers=1,update=server", 1, schedule="constant", epochs=3), replicas=1
    ).extra["parameters"][0]
    for ours, theirs in zip(resumed.parameters, straight, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)


def test_ssp_on_dask_keeps_its_bound_with_a_straggler(cluster):
    config = config_for("ps:servers=1,update=server,mode=ssp,staleness=1", 2, straggler="0:0.05")
    result = train_distributed(config, handle=cluster)
    traffic, steps = result.sink.frame(TrafficRecord), result.sink.frame(StepRecord)
    gaps = ahead_at_each_push(traffic, steps, [2], 16)  # progress clocks, in the order the server received
    assert len(gaps) == len(steps) and max(gaps) <= 1 and steps.staleness.max() >= 1
    second = steps[steps.epoch == 1].groupby("rank").size()
    assert second[0] < second[1]  # the straggler's share of the second epoch is the smaller


def test_a_resumed_async_run_shares_its_first_epoch_out_by_the_saved_throughput(cluster, tmp_path):
    config = config_for("ps:servers=1,update=server,mode=async", 2, epochs=1, straggler="0:0.05")
    train_distributed(config, handle=cluster, checkpoint_dir=tmp_path)
    folder = read_checkpoint(tmp_path).folder
    rates = [torch.load(folder / f"rank{r}.pt", weights_only=True)["throughput"]["rate"] for r in range(2)]
    assert 0 < rates[0] < rates[1]  # the straggler measured slower
    resumed = train_distributed(
        config.replace(epochs=2), handle=cluster, checkpoint_dir=tmp_path, resume=True
    )
    steps = resumed.sink.frame(StepRecord)
    per_rank = steps[steps.epoch == 1].groupby("rank").size()
    assert per_rank[0] < per_rank[1]  # without the saved estimates the epoch would keep equal shares
