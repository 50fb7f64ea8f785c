"""``ps:colocated=true`` on Dask: server shards inside the replicas' processes, so the run takes no
Dask worker besides the replicas; a served shard goes into its replica's checkpoint file and resumes."""

import pytest
import torch

from adass.config import RunConfig
from adass.runtime import train
from adass.runtime.cluster import read_checkpoint, train_distributed

DATA = "synthetic:n=203,d=6,classes=3,test=50"


def test_colocated_servers_own_their_shards_and_resume_from_the_replicas_files(cluster, tmp_path):
    """Three replicas on the three workers of the cluster serve two shards that own their parameters
    (a dedicated PS would need five workers); the shards' state lives in ``rank0.pt``/``rank1.pt``."""
    config = RunConfig.from_flat(data=DATA, model="mlp:hidden=8", sampler="full", epochs=2, batch_size=16,
                                 lr=0.1, momentum=0.9, weight_decay=1e-3, schedule="constant", workers=3,
                                 exchange="ps:servers=2,update=server,colocated=true", codec="fp32", seed=4)  # fmt: skip
    assert config.servers == 0 and len(cluster.workers()) == 3
    train_distributed(config, handle=cluster, checkpoint_dir=tmp_path)
    folder = read_checkpoint(tmp_path).folder
    assert sorted(p.name for p in folder.glob("*.pt")) == ["rank0.pt", "rank1.pt", "rank2.pt"]
    held = [torch.load(folder / f"rank{r}.pt", weights_only=True)["exchange"] for r in range(3)]
    assert ["shard" in state for state in held] == [True, True, False]
    resumed = train_distributed(
        config.replace(epochs=3), handle=cluster, checkpoint_dir=tmp_path, resume=True
    )
    straight = train(
        config.replace(epochs=3, exchange="ps:servers=2,update=server"), replicas=config.cluster.workers
    )
    for ours, theirs in zip(resumed.parameters, straight.extra["parameters"][0], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)


def test_a_loss_that_leaves_fewer_replicas_than_colocated_shards_is_refused_in_one_line(cluster):
    """Four replicas serving four shards, and the cluster has three workers: once none comes back,
    the run cannot go on with three replicas, and says why."""
    from adass.failures import RunFailure
    from adass.runtime.cluster.runner import _after_loss

    config = RunConfig.from_flat(data=DATA, workers=4, exchange="ps:servers=4,colocated=true", detect_s=1)
    with pytest.raises(RunFailure) as err:
        _after_loss(cluster, config)
    message = str(err.value)
    assert (
        "\n" not in message and "3 replicas remain" in message and "servers must be <= workers (3)" in message
    )
