"""``ps:update=server``: server shards own their parameter slice and SGD state; the run equals the
one whose replicas step their own optimizers, and a shard's state survives a checkpoint."""

import io

import pytest
import torch
from engine_cases import on_threads

from adass.config import RunConfig
from adass.engine import ShardOptimizer
from adass.exchange import InProcHub, make_exchange
from adass.runtime import train

DATA = "synthetic:n=203,d=6,classes=3,test=50"  # an odd size: shards and last batches differ
EMPTY_STEPS = "synthetic:n=5,d=4,classes=2,test=10"  # 2 replicas, global batch 1: the first step is empty


def final_parameters(update: str, **options) -> list[list[torch.Tensor]]:
    flat = dict(data=DATA, model="mlp:hidden=8", sampler="full", epochs=3, batch_size=16, lr=0.1, momentum=0.9,
                weight_decay=1e-3, schedule="cosine", workers=3, codec="fp32", seed=4)  # fmt: skip
    flat.update(options)
    flat["exchange"] = f"{flat.get('exchange', 'ps:servers=2')},update={update}"
    config = RunConfig.from_flat(**flat)
    return train(config, replicas=config.cluster.workers).extra["parameters"]


@pytest.mark.parametrize("options", [
    {},  # momentum, weight decay and the cosine schedule across epochs, over two shards
    {"exchange": "ps:servers=3", "workers": 2, "sampler": "adass:eps=0.4,warmup=1,final=0"},
    {"sampler": "selective_backprop", "codec": "qsgd:bits=4"},  # two-pass: counts known step by step
    {"data": EMPTY_STEPS, "model": "mlp:hidden=4", "batch_size": 1, "workers": 2, "epochs": 2},
])  # fmt: skip
def test_server_step_equals_the_replicas_own_step(options):
    replicas_step = final_parameters("replica", **options)
    servers_step = final_parameters("server", **options)
    for rank, (ours, theirs) in enumerate(zip(servers_step, replicas_step, strict=True)):
        for a, b in zip(ours, theirs, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=0.0, msg=f"replica {rank}")
        assert all(torch.equal(a, b) for a, b in zip(ours, servers_step[0], strict=True))  # replicas agree


def serve(
    steps: int, saved: bytes | None = None, grads_seed: int = 0, first: int = 0
) -> tuple[bytes, torch.Tensor]:
    """Two workers and one server owning a 10-value shard (update=server), ``steps`` steps from step
    ``first``, the server's state loaded from ``saved`` first; return its state and the last pull."""
    config = RunConfig.from_flat(lr=0.1, momentum=0.9, weight_decay=0.01, schedule="step", epochs=4)
    hub = InProcHub(3, timeout_s=30)
    exchanges = [make_exchange("ps:servers=1,update=server", hub.transport(r), "fp32") for r in range(3)]
    exchanges[2].own(ShardOptimizer(torch.linspace(-1, 1, 10), config))
    if saved is not None:
        exchanges[2].load_state_dict(torch.load(io.BytesIO(saved), weights_only=True))
    gen = torch.Generator().manual_seed(grads_seed)
    grads = [[torch.randn(10, generator=gen) for _ in range(2)] for _ in range(first + steps)][first:]

    def work(rank: int) -> torch.Tensor | None:
        pulled = None
        for step, pair in enumerate(grads):
            exchanges[rank].epoch = first + step  # the learning rate steps down at epochs 2 and 3
            if rank == 2:
                exchanges[rank].serve_step()
            else:  # the second step has no samples anywhere: the shard must not move
                pulled = exchanges[rank].reduce(pair[rank], 0.0 if first + step == 1 else float(rank + 1))
        return pulled

    pulls = on_threads(3, work, [hub.abort])
    assert torch.equal(pulls[0], pulls[1])
    buffer = io.BytesIO()
    torch.save(exchanges[2].state_dict(), buffer)
    return buffer.getvalue(), pulls[0]


def test_a_server_shard_round_trips_through_a_checkpoint():
    _, straight = serve(4)
    saved, _ = serve(2)
    _, resumed = serve(2, saved, first=2)
    assert torch.equal(resumed, straight)
    _, fresh = serve(2, None, first=2)  # without the saved state the shard would start over
    assert not torch.equal(fresh, straight)


def test_a_step_without_samples_leaves_the_shard_as_it_is():
    config = RunConfig.from_flat(lr=0.1, momentum=0.9, weight_decay=0.1)
    shard = ShardOptimizer(torch.ones(4), config)
    moved = shard(torch.ones(4), 0)
    assert torch.equal(shard(None, 0), moved)
    assert not torch.equal(moved, torch.ones(4))


def test_a_shard_of_another_size_is_refused():
    config = RunConfig.from_flat(lr=0.1)
    with pytest.raises(ValueError, match="does not fit"):
        ShardOptimizer(torch.ones(4), config).load_state_dict(
            ShardOptimizer(torch.ones(5), config).state_dict()
        )
