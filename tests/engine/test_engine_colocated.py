"""Training with ``ps:colocated=true``: the same run, bit for bit, as with dedicated server ranks,
and a shard a replica serves stays with that replica's state (checkpoints, re-sharding)."""

import pytest
import torch

from adass.config import RunConfig
from adass.data import load_dataset
from adass.engine import ReplicaState
from adass.engine.reshard import reshard_states
from adass.metrics import StepRecord, TrafficRecord
from adass.runtime import train

DATA = "synthetic:n=203,d=6,classes=3,test=50"  # an odd size: shards and last batches differ


def run(exchange: str, **options):
    flat = dict(data=DATA, model="mlp:hidden=8", sampler="adass:eps=0.3,warmup=1,final=0", epochs=3,
                batch_size=16, lr=0.1, momentum=0.9, weight_decay=1e-3, schedule="cosine", workers=3,
                codec="qsgd:bits=4", seed=4)  # fmt: skip
    flat.update(options)
    return train(RunConfig.from_flat(exchange=exchange, **flat), replicas=flat["workers"])


@pytest.mark.parametrize("update", ["replica", "server"])
@pytest.mark.parametrize("servers", [1, 3])
def test_colocated_training_equals_dedicated_servers_bit_for_bit(update, servers):
    spec = f"ps:servers={servers},update={update},pull=qsgd:bits=8"
    dedicated, colocated = run(spec), run(spec + ",colocated=true")
    for ours, theirs in zip(colocated.extra["parameters"], dedicated.extra["parameters"], strict=True):
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    steps = [r.sink.frame(StepRecord).sort_values(["epoch", "step", "rank"]).reset_index(drop=True)
             for r in (colocated, dedicated)]  # fmt: skip
    assert steps[0].loss.tolist() == steps[1].loss.tolist()
    traffic = [r.sink.frame(TrafficRecord) for r in (colocated, dedicated)]
    per_step = [len(t[t.phase.isin(["push", "pull"])]) / len(steps[0].drop_duplicates(["epoch", "step"]))
                for t in traffic]  # fmt: skip
    assert per_step == [2 * (3 - 1) * servers, 2 * 3 * servers]


def test_a_served_shard_stays_with_its_rank_when_replicas_are_resharded():
    config = RunConfig.from_flat(data="synthetic:n=60,d=4,classes=3,test=10", model="mlp:hidden=4", workers=3,
                                 exchange="ps:servers=2,update=server,colocated=true", codec="fp32", seed=1)  # fmt: skip
    dataset = load_dataset(config.data.data, seed=1)
    old = [ReplicaState.shard(config, dataset, r, 3) for r in range(3)]
    states = [dict(s.state_dict(), exchange={"shard": {"params": torch.full((3,), float(r))}} if r < 2 else {})
              for r, s in enumerate(old)]  # fmt: skip
    new = [ReplicaState.shard(config, dataset, r, 2).indices for r in range(2)]
    out = reshard_states(states, [s.indices for s in old], new, old[0].sampler.state_layout, dataset.n_train)
    assert [
        torch.equal(s["exchange"]["shard"]["params"], torch.full((3,), float(r))) for r, s in enumerate(out)
    ] == [
        True,
        True,
    ]
