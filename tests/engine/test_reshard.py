"""A checkpoint of P replicas re-sharded to P' replicas: every sample keeps its own history."""

import torch

from adass.config import RunConfig
from adass.data import load_dataset, shard_indices
from adass.engine import ReplicaState
from adass.engine.reshard import reshard_states

CONFIG = RunConfig.from_flat(data="synthetic:n=300,d=6,classes=3,test=60", model="mlp:hidden=8",
                             sampler="adass", epochs=6, workers=3, seed=4)  # fmt: skip
SAMPLE_KEYS = [k for k, kind in ReplicaState.shard(CONFIG, load_dataset(CONFIG.data.data, seed=4), 0, 3)
               .sampler.state_layout.items() if kind == "sample"]  # fmt: skip


def _states(world: int, ds) -> tuple[list[dict], list[torch.Tensor]]:
    """Replica states whose per-sample entries are the samples' training-set indices (so they can be traced)."""
    shards = shard_indices(ds.y_train, world, CONFIG.data.shard, seed=CONFIG.optim.seed)
    states = []
    for rank in range(world):
        replica = ReplicaState.shard(CONFIG, ds, rank, world)
        s = replica.sampler
        where = shards[rank]
        s.last_loss = where.float()
        s.sqrt_f, s.growth = where.float() * 2, where.float() * 3
        s.path_at = where.double()
        s.kept = where % 2 == 0
        s.dropped = where % 3 == 0
        s.pending = [(torch.arange(0, s.n, 2), where[0 : s.n : 2].float(), 1.5)]
        s.slopes = [torch.full((rank + 1,), float(rank))]
        s.returned, s.exceeded = 10 + rank, rank
        states.append(replica.state_dict())
    return states, shards


def test_every_per_sample_entry_follows_its_sample_to_the_new_shard():
    ds = load_dataset(CONFIG.data.data, seed=4)
    states, old = _states(3, ds)
    new = shard_indices(ds.y_train, 2, CONFIG.data.shard, seed=CONFIG.optim.seed)
    layout = ReplicaState.shard(CONFIG, ds, 0, 2).sampler.state_layout
    out = reshard_states(states, old, new, layout, ds.n_train)
    assert len(out) == 2
    for rank, state in enumerate(out):
        where, sampler = new[rank], state["sampler"]
        assert torch.equal(sampler["last_loss"], where.float())
        assert torch.equal(sampler["sqrt_f"], where.float() * 2)
        assert torch.equal(sampler["path_at"], where.double())
        assert torch.equal(sampler["kept"], where % 2 == 0)
        assert torch.equal(sampler["dropped"], where % 3 == 0)
        # pending observations: re-addressed to this shard's positions, each with its own loss
        idx = torch.cat([p[0] for p in sampler["pending"]])
        loss = torch.cat([p[1] for p in sampler["pending"]])
        assert torch.equal(where[idx].float(), loss)
        replica = ReplicaState.shard(CONFIG.replace(workers=2), ds, rank, 2)
        replica.load_state_dict(state)  # loads into a replica of the new shard
        assert replica.sampler.kept.numel() == replica.n
    # every pending observation of the old replicas lands on exactly one new replica
    assert sum(p[0].numel() for s in out for p in s["sampler"]["pending"]) == sum(
        p[0].numel() for s in states for p in s["sampler"]["pending"]
    )
    # pooled slopes and summed counts are kept once, on the new replica 0
    assert sorted(torch.cat(out[0]["sampler"]["slopes"]).tolist()) == [0.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    assert out[1]["sampler"]["slopes"] == []
    assert out[0]["sampler"]["returned"] == 33 and out[1]["sampler"]["returned"] == 0
    # model and optimizer come from replica 0; the exchange's per-chunk memory does not carry over
    assert all("exchange" not in s for s in out)
    for key, value in states[0]["model"].items():
        assert torch.equal(out[1]["model"][key], value)


def test_three_to_two_to_three_gives_back_every_per_sample_entry():
    ds = load_dataset(CONFIG.data.data, seed=4)
    states, three = _states(3, ds)
    two = shard_indices(ds.y_train, 2, CONFIG.data.shard, seed=CONFIG.optim.seed)
    layout = ReplicaState.shard(CONFIG, ds, 0, 3).sampler.state_layout
    back = reshard_states(
        reshard_states(states, three, two, layout, ds.n_train), two, three, layout, ds.n_train
    )
    for before, after in zip(states, back, strict=True):
        for key in SAMPLE_KEYS:
            assert torch.equal(before["sampler"][key], after["sampler"][key]), key
