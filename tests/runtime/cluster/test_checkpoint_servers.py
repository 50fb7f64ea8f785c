"""PS server shards' files in checkpoints: a resume on another number of replicas keeps them."""

import torch

from adass.config import RunConfig
from adass.data import load_dataset
from adass.engine import Checkpoint, ReplicaState, reshard_checkpoint


def test_resharding_the_replicas_keeps_the_server_shards_files(tmp_path):
    config = RunConfig.from_flat(data="synthetic:n=60,d=4,classes=3,test=10", model="mlp:hidden=4", workers=2,
                                 exchange="ps:servers=2,update=server", codec="fp32", seed=1)  # fmt: skip
    dataset = load_dataset(config.data.data, seed=1)
    folder = tmp_path / "checkpoints" / "epoch-000000"
    folder.mkdir(parents=True)
    for rank in range(2):
        torch.save(ReplicaState.shard(config, dataset, rank, 2).state_dict(), folder / f"rank{rank}.pt")
    for shard in range(2):
        torch.save({"shard": {"params": torch.full((3,), float(shard))}}, folder / f"server{shard}.pt")
    checkpoint = Checkpoint(0, folder, {}, {"workers": 2})
    resharded = reshard_checkpoint(checkpoint, config.replace(workers=3), dataset)
    assert sorted(p.name for p in resharded.folder.glob("*.pt")) == [
        "rank0.pt",
        "rank1.pt",
        "rank2.pt",
        "server0.pt",
        "server1.pt",
    ]
    for shard in range(2):
        name = f"server{shard}.pt"
        assert (resharded.folder / name).read_bytes() == (folder / name).read_bytes()
