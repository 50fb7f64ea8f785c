"""A step nobody backpropagated in is exchanged but not applied: error feedback keeps its residuals."""

import torch

from adass.config import RunConfig
from adass.data import load_dataset
from adass.engine import Engine, ReplicaState
from adass.engine.agreement import AgreementBoard
from adass.exchange import InProcHub, make_exchange
from adass.runtime import on_threads

CONFIG = RunConfig.from_flat(data="synthetic:n=64,d=5,classes=3,test=16", model="mlp:hidden=8", batch_size=16,
                             workers=2, codec="ef(randk:ratio=0.1,scale=false)", seed=3)  # fmt: skip


def test_an_empty_step_leaves_the_error_feedback_memory_as_it_was():
    ds = load_dataset(CONFIG.data.data, seed=3)
    hub, board = InProcHub(2), AgreementBoard(2)
    engines = [Engine(ReplicaState.shard(CONFIG, ds, r, 2), board.agreement(r),
                      make_exchange("ring", hub.transport(r), CONFIG.codec.codec, seed=3)) for r in range(2)]  # fmt: skip

    def one_step(rank: int, samples: int) -> None:
        e = engines[rank]
        idx = torch.arange(samples)
        e.step(0, idx, torch.ones(samples), 2 * samples)

    on_threads(2, lambda r: one_step(r, 8))  # a real step leaves residuals behind
    before = [e.exchange.state_dict()["memory"]["residuals"] for e in engines]
    assert all(len(b) and any(bool(t.abs().sum()) for t in b.values()) for b in before)
    params = [[p.detach().clone() for p in e.state.model.parameters()] for e in engines]
    on_threads(2, lambda r: one_step(r, 0))  # nobody has a sample: exchanged, not applied
    for engine, residuals, weights in zip(engines, before, params, strict=True):
        after = engine.exchange.state_dict()["memory"]["residuals"]
        assert after.keys() == residuals.keys()
        assert all(torch.equal(after[c], residuals[c]) for c in residuals)
        assert all(torch.equal(p, w) for p, w in zip(engine.state.model.parameters(), weights, strict=True))
