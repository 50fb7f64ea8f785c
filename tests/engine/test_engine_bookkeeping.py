"""ADASS bookkeeping in the engine: refresh before selecting, exact resumes, timed selection work,
``min_keep`` per replica, the agreement's bytes as ``agree`` traffic, pinned torch threads."""

import io

import pytest
import torch
from engine_cases import on_threads

from adass.config import RunConfig
from adass.engine import AgreementBoard, Engine, ReplicaState
from adass.metrics import EvalRecord, TrafficRecord
from adass.options import SpecError
from adass.runtime import train
from adass.sampling import global_dropper

DATA = "synthetic:n=400,d=8,classes=3,noise=0.0,hard=0.3,test=80"


def adass_config(sampler: str, epochs: int = 8, **changes) -> RunConfig:
    return RunConfig.from_flat(data=DATA, model="mlp:hidden=16", sampler=sampler, epochs=epochs, batch_size=32,
                               lr=0.1, seed=2, **changes)  # fmt: skip


def engine_for(config: RunConfig) -> Engine:
    from adass.data import load_dataset

    return Engine(ReplicaState.whole(config, load_dataset(config.data.data, seed=config.optim.seed)))


def test_refresh_runs_before_the_selection_it_informs():
    """With ``refresh=1`` the samples an epoch dropped are passed forward before the next selection,
    so that selection ranks them by their loss now (their last visit is the current path length)."""
    engine = engine_for(adass_config("adass:eps=0.4,warmup=1,final=0,refresh=1"))
    sampler, counters = engine.state.sampler, engine.state.counters
    refreshed_epochs = 0
    for epoch in range(6):
        dropped_before = torch.nonzero(~sampler.kept).flatten()
        plan = engine.plan(epoch)
        if epoch >= 2 and dropped_before.numel():
            refreshed_epochs += 1
            assert plan.refreshed == dropped_before.numel()
            assert torch.all(sampler.path_at[dropped_before] == counters.path)  # fresh at selection time
        engine.run_epoch(plan)
    assert refreshed_epochs >= 3


def test_refresh_forwards_are_counted_in_the_epoch():
    result = train(
        adass_config("adass:eps=0.4,warmup=1,final=0,refresh=1", epochs=5), selection_records=False
    )
    evals = result.sink.frame(EvalRecord)
    assert result.counters.forwards > result.counters.backprops
    assert int(evals["forwards"].iloc[-1]) == result.counters.forwards


def _selections(engine: Engine, epochs: range) -> list[list[int]]:
    out = []
    for epoch in epochs:
        plan = engine.plan(epoch)
        out.append(engine.selection.indices.tolist())
        engine.run_epoch(plan)
    return out


@pytest.mark.parametrize(
    "sampler", ["adass:eps=0.4,warmup=1,final=0", "adass:eps=0.4,warmup=1,final=0,refresh=2"]
)
def test_a_resumed_run_selects_what_the_uninterrupted_run_selects(sampler):
    config = adass_config(sampler, epochs=9)
    whole = _selections(engine_for(config), range(9))
    first = engine_for(config)
    _selections(first, range(4))
    saved = io.BytesIO()
    torch.save(first.state_dict(), saved)
    saved.seek(0)
    resumed = engine_for(config)
    resumed.load_state_dict(torch.load(saved, weights_only=True))  # as checkpoints are read
    assert _selections(resumed, range(4, 9)) == whole[4:]


def test_the_epoch_timer_covers_every_selection_update():
    """When ``run_epoch`` returns (and its timer stops), the sampler has no buffered work left, also
    where no selection records are written (which used to fold the buffers in after the timer)."""
    engine = engine_for(adass_config("adass:eps=0.4,warmup=1,final=0"))
    for epoch in range(3):
        engine.run_epoch(engine.plan(epoch), selection_records=False)
        assert engine.state.sampler.pending == []


def test_min_keep_holds_on_every_replica():
    """One replica whose bounds are all small must not drop its whole shard under the global budget."""
    board = AgreementBoard(2)
    bounds = [torch.full((100,), 1e-3), torch.linspace(1.0, 2.0, 100)]

    def drop(rank: int) -> torch.Tensor:
        return global_dropper(board.agreement(rank))(bounds[rank], 0.5, 0.2)

    masks = on_threads(2, drop)
    assert int((~masks[0]).sum()) >= 20 and int((~masks[1]).sum()) >= 20
    total = torch.cat(bounds)
    assert float(torch.cat(bounds)[torch.cat(masks)].sum()) <= 0.5 * float(total.sum())  # budget holds


def test_the_budget_agreement_is_recorded_as_agree_traffic():
    config = adass_config(
        "adass:eps=0.4,warmup=1,final=0", epochs=3, workers=2, exchange="ring", codec="fp32"
    )
    result = train(config, replicas=config.cluster.workers)
    traffic = result.sink.frame(TrafficRecord)
    agree = traffic[traffic["phase"] == "agree"]
    epoch1 = agree[(agree["epoch"] == 1) & (agree["src"] == 0)]
    n0 = 200  # replica 0's shard: its bounds as float32, once to its one peer
    assert int(epoch1["raw_bytes"].sum()) >= 4 * n0
    final = result.sink.frame(EvalRecord)["wire_bytes"].iloc[-1]
    assert final == int(traffic["wire_bytes"].sum())  # counted in the run's wire bytes


@pytest.mark.parametrize("mode", ["feature", "exact"])
def test_feature_norm_bounds_are_refused_for_deep_models(mode):
    with pytest.raises(SpecError, match=f"lipschitz={mode}") as info:
        engine_for(adass_config(f"adass:lipschitz={mode}"))
    assert "\n" not in str(info.value)


def test_feature_norm_bounds_are_accepted_for_linear_models():
    engine = engine_for(adass_config("adass:lipschitz=feature").replace(model="logreg"))
    assert engine.state.sampler.lipschitz == "feature"


@pytest.mark.parametrize("threads", [1, 2])
def test_every_run_pins_its_torch_threads(threads):
    train(adass_config("full", epochs=1, threads=threads), selection_records=False)
    assert torch.get_num_threads() == threads


def test_the_exact_bound_of_a_linear_model_is_never_exceeded_by_a_returning_sample():
    config = adass_config("adass:eps=0.4,warmup=1,final=0,lipschitz=exact", epochs=8).replace(model="logreg")
    engine = engine_for(config)
    for epoch in range(8):
        engine.run_epoch(engine.plan(epoch), selection_records=False)
    sampler = engine.state.sampler
    assert sampler.returned > 0 and sampler.exceeded == 0


def test_per_step_agreements_of_two_pass_samplers_are_recorded_in_their_epoch():
    config = adass_config("selective_backprop", epochs=2, workers=2, exchange="ring", codec="fp32")
    traffic = train(config, replicas=config.cluster.workers).sink.frame(TrafficRecord)
    agree = traffic[(traffic["phase"] == "agree") & (traffic["src"] == 0)]
    steps = 13  # per epoch: 400 samples, global batch 32, an int64 sum each step
    plan = 8 + 4  # per epoch: the kept counts' gather (a size, then one float32)
    assert int(agree["raw_bytes"].sum()) == 2 * (plan + 8 * steps)  # the last epoch's steps included
