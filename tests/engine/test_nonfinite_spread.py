"""Exchanges that spread non-finite values (a dense fp32 ring) skip the step's agreement; a NaN on one
replica is still caught on every replica, with or without that shortcut."""

import dataclasses

import pytest
import torch

from adass.codecs import make_codec
from adass.config import RunConfig
from adass.data import load_dataset
from adass.exchange import make_exchange
from adass.exchange.transport import InProcHub
from adass.metrics import StepRecord, TrafficRecord
from adass.runtime import train

BASE = dict(data="synthetic:n=256,d=6,classes=3,test=64", model="mlp:hidden=8", epochs=2, batch_size=32,
            lr=0.05, schedule="constant", seed=3, workers=2)  # fmt: skip


def _poisoned(samples: list[int]):
    data = load_dataset(BASE["data"], seed=BASE["seed"])
    x = data.x_train.clone()
    x[samples, 0] = float("nan")
    return dataclasses.replace(data, x_train=x)


@pytest.mark.parametrize(
    ("exchange", "codec", "spreads"),
    [("ring", "fp32", True), ("ring", "qsgd:bits=8", False), ("ps", "fp32", False)],
)
def test_a_nan_on_one_replica_is_caught_on_every_replica(exchange, codec, spreads):
    config = RunConfig.from_flat(**BASE, exchange=exchange, codec=codec)
    result = train(
        config, dataset=_poisoned([0]), replicas=config.cluster.workers
    )  # sample 0 lives on one replica's shard
    first, second = result.extra["parameters"]
    for a, b in zip(first, second, strict=True):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    steps = result.sink.frame(StepRecord)
    skipped = steps[steps["loss"].isna()]
    assert len(skipped) == 2  # one replica's step holding sample 0, once per epoch
    # an agreement of its own costs each step an int64 per peer, beside the epoch's plan
    agree = result.sink.frame(TrafficRecord).query("phase == 'agree' and src == 0")
    per_epoch = agree.groupby("epoch")["raw_bytes"].sum()
    steps_per_epoch = len(steps.query("rank == 0 and epoch == 0"))
    assert (per_epoch < 8 * steps_per_epoch).all() == spreads, per_epoch.tolist()
    assert result.final.test_acc > 0.5


def test_the_dense_ring_declares_it_spreads_and_coded_rings_do_not():
    hub = InProcHub(2)
    spreads = {
        spec: make_exchange("ring", hub.transport(0), make_codec(spec)).spreads_nonfinite
        for spec in ("fp32", "qsgd:bits=8", "randk:ratio=0.1", "fp16", "topk:ratio=0.1")
    }
    assert spreads == {"fp32": True, "qsgd:bits=8": False, "randk:ratio=0.1": False, "fp16": False,
                       "topk:ratio=0.1": False}  # fmt: skip
    assert not make_exchange("ps", hub.transport(0), make_codec("fp32")).spreads_nonfinite


def test_a_dense_ring_carries_one_rank_s_nan_and_inf_into_every_result():
    import threading

    world, n = 3, 10
    hub = InProcHub(world)
    grads = [torch.ones(n) for _ in range(world)]
    grads[1][2], grads[2][7] = float("nan"), float("inf")
    outs: list[torch.Tensor | None] = [None] * world

    def run(r: int) -> None:
        ex = make_exchange("ring", hub.transport(r), make_codec("fp32"))
        outs[r] = ex.reduce(grads[r], count=float(r + 1))

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in outs:
        assert out is not None and torch.isnan(out[2]) and torch.isinf(out[7])
        assert torch.isfinite(out[[0, 1, 3, 4, 5, 6, 8, 9]]).all()
