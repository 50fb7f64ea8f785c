"""Throughput-proportional shares under asynchronous parameter servers: the counts follow the rates and
add up, every selected sample is backpropagated exactly once per epoch across replicas (its owner
hears its loss), a slow replica takes fewer steps, lock-step exchanges keep equal shares, and the
throughput estimate survives a checkpoint."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
import torch

import adass.engine.replica as replica_module
from adass.config import RunConfig
from adass.data import load_dataset
from adass.engine import Engine, ReplicaState
from adass.engine.reshard import reshard_states
from adass.engine.shares import Throughput, handovers, proportional_counts, steps_for
from adass.metrics import StepRecord
from adass.runtime import train

DATA = "synthetic:n=203,d=6,classes=3,test=50"  # an odd size: shards and last batches differ
ASYNC = "ps:servers=1,update=server,mode=async"


def config_for(exchange: str, workers: int, **options) -> RunConfig:
    # replica 1 sleeps 50 ms a step, many times a step of this model even on a loaded host, so it
    # measures slower whatever else runs
    flat = dict(data=DATA, model="mlp:hidden=8", sampler="full", epochs=3, batch_size=16, lr=0.1, momentum=0.9,
                workers=workers, codec="fp32", seed=3, exchange=exchange, straggler="1:0.05")  # fmt: skip
    return RunConfig.from_flat(**{**flat, **options})


@pytest.mark.parametrize("seed", range(20))
def test_counts_follow_the_rates_and_every_position_moves_to_one_replica(seed):
    rng = random.Random(seed)
    world = rng.randint(1, 6)
    kept = [rng.randint(0, 40) for _ in range(world)]
    rates = [rng.uniform(0.1, 5.0) for _ in range(world)]
    targets = proportional_counts(sum(kept), rates)
    assert sum(targets) == sum(kept)
    assert all(abs(t - sum(kept) * r / sum(rates)) < 1 for t, r in zip(targets, rates, strict=True))
    held = Counter()  # (owner, position) -> replicas that train on it
    for owner, k in enumerate(kept):
        for position in range(min(k, targets[owner])):
            held[owner, position] += 1
    for move in handovers(kept, targets):
        assert move.donor != move.receiver and move.start < move.stop
        for position in range(move.start, move.stop):
            held[move.donor, position] += 1
    assert set(held) == {(r, p) for r, k in enumerate(kept) for p in range(k)}
    assert set(held.values()) == {1} or not held
    at = Counter({r: min(k, targets[r]) for r, k in enumerate(kept)})
    for move in handovers(kept, targets):
        at[move.receiver] += move.stop - move.start
    assert [at[r] for r in range(world)] == targets


def test_a_replica_takes_steps_for_its_share_at_the_local_batch():
    assert [steps_for(n, 64, 4) for n in (0, 1, 16, 17, 160)] == [1, 1, 1, 2, 10]


def spy_on_samplers(monkeypatch) -> list[list[tuple]]:
    """Every replica's sampler logs its selections and the positions it observes (refreshes left out)."""
    logs: list[list[tuple]] = []
    build = replica_module.build_sampler

    def spying(spec, **context):
        sampler, log = build(spec, **context), []
        logs.append(log)
        select, observe = sampler.select, sampler.observe

        def selecting(epoch):
            selection = select(epoch)
            log.append(("select", epoch, selection.indices.clone()))
            return selection

        def observing(indices, losses, extras):
            if not extras.get("refresh"):
                log.append(("observe", indices.clone()))
            observe(indices, losses, extras)

        sampler.select, sampler.observe = selecting, observing
        return sampler

    monkeypatch.setattr(replica_module, "build_sampler", spying)
    return logs


@pytest.mark.parametrize("mode", ["mode=async", "mode=ssp,staleness=1"])
def test_every_selected_sample_is_backpropagated_once_per_epoch_and_its_owner_hears_it(monkeypatch, mode):
    logs = spy_on_samplers(monkeypatch)
    config = config_for(
        f"ps:servers=1,update=server,{mode}", 3, sampler="adass:eps=0.4,warmup=1,final=0", epochs=4
    )
    result = train(config, replicas=3)
    steps = result.sink.frame(StepRecord)
    for log in logs:
        selections = [i for i, event in enumerate(log) if event[0] == "select"]
        assert len(selections) == config.optim.epochs
        for at, end in zip(selections, [*selections[1:], len(log)], strict=True):
            epoch, chosen = log[at][1], log[at][2]
            seen = torch.cat([event[1] for event in log[at + 1 : end]])
            # every selected position of this owner observed exactly once, whoever trained on it
            assert sorted(seen.tolist()) == sorted(chosen.tolist()), f"epoch {epoch}"
    for epoch, rows in steps.groupby("epoch"):
        selected = sum(
            int(next(e[2] for e in log if e[0] == "select" and e[1] == epoch).numel()) for log in logs
        )
        assert rows.samples.sum() == selected  # and nothing backpropagated twice
    later = steps[steps.epoch >= 1].groupby(["epoch", "rank"]).samples.sum().unstack()
    assert (later[1] < later[0]).all() and (later[1] < later[2]).all()  # the straggler took less


@pytest.mark.parametrize("exchange", ["ring", "ps:servers=1,update=server"])
def test_lock_step_exchanges_keep_equal_shares(exchange):
    steps = train(config_for(exchange, 3), replicas=3).sink.frame(StepRecord)
    per_rank = steps.groupby(["epoch", "rank"]).size().unstack()
    assert (per_rank.nunique(axis=1) == 1).all()


def test_the_first_epoch_keeps_every_replicas_own_selection():
    steps = train(config_for(ASYNC, 3, epochs=2), replicas=3).sink.frame(StepRecord)
    first = steps[steps.epoch == 0].groupby("rank").size()
    assert first.nunique() == 1
    assert steps[steps.epoch == 1].groupby("rank").size().nunique() > 1


def test_the_throughput_estimate_goes_into_a_checkpoint_and_comes_back():
    config = config_for(ASYNC, 1, straggler="")
    dataset = load_dataset(config.data.data, seed=3)
    engine = Engine(ReplicaState.whole(config, dataset))
    engine.throughput.update(120, 2.0)
    engine.throughput.update(60, 2.0)
    assert engine.throughput.rate == pytest.approx(45.0)  # the past weighs half
    saved = engine.state_dict()
    fresh = Engine(ReplicaState.whole(config, dataset))
    assert fresh.throughput.rate == 0
    fresh.load_state_dict(saved)
    assert fresh.throughput.rate == pytest.approx(45.0)
    older = {k: v for k, v in saved.items() if k != "throughput"}  # a checkpoint from before shares
    Engine(ReplicaState.whole(config, dataset)).load_state_dict(older)


def test_a_resharded_checkpoint_measures_throughput_anew():
    config = config_for(ASYNC, 1, straggler="")
    dataset = load_dataset(config.data.data, seed=3)
    engine = Engine(ReplicaState.whole(config, dataset))
    engine.throughput.update(10, 1.0)
    state = engine.state_dict()
    shard = torch.arange(dataset.n_train)
    out = reshard_states([state], [shard], [shard[:100], shard[100:]], engine.state.sampler.state_layout,
                         dataset.n_train)  # fmt: skip
    assert all("throughput" not in s for s in out)


def test_throughput_ignores_an_epoch_without_work():
    meter = Throughput()
    meter.update(0, 1.0)
    meter.update(5, 0.0)
    assert meter.rate == 0


def test_row_ids_beyond_float32s_24_bits_cross_the_gather_exactly():
    """Handed-over row ids travel through the agreement's float32 gather as two 24-bit halves, so a
    training set of more than 2**24 rows still shares out by throughput (in threads, two replicas)."""
    from adass.engine.agreement import AgreementBoard
    from adass.engine.work import MAX_SHARED_ROWS, floats_to_ids, ids_to_floats

    ids = torch.tensor([0, 1, 2**24 - 1, 2**24, 2**24 + 1, 3 * 2**30 + 7, 2**47 + 12345, MAX_SHARED_ROWS - 1])
    assert not torch.equal(ids.float().long(), ids)  # one float32 each would not carry them
    board = AgreementBoard(2)
    got: dict[int, list[torch.Tensor]] = {}

    def post(rank: int) -> None:
        got[rank] = board.agreement(rank).gather(ids_to_floats(ids + rank))

    threads = [threading.Thread(target=post, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for rank in range(2):
        assert [floats_to_ids(p).tolist() for p in got[rank]] == [ids.tolist(), (ids + 1).tolist()]
