"""Divergence with finite numbers: a training loss far past the run's first step, or test accuracy at
chance epoch after epoch, stops the run in one line, alike for every backend and across a resume."""

import json

import pandas as pd
import pytest
import torch

from adass.config import RunConfig
from adass.engine.divergence import CHANCE_MARGIN, CHANCE_WARMUP, Divergence, chance_accuracy, start_loss
from adass.failures import Diverged
from adass.metrics import EvalRecord, ParquetSink
from adass.runtime import run, train

BLOWS_UP = dict(data="synthetic:n=600,d=8,classes=3,test=300", model="mlp:hidden=16", lr=30.0, epochs=3,
                seed=1)  # fmt: skip
HEALTHY = dict(data="synthetic:n=256,d=6,classes=3,test=64", model="mlp:hidden=8", epochs=3, batch_size=32,
               seed=3)  # fmt: skip


def _row(rank: int, step: int, samples: int, loss: float) -> dict:
    return {"rank": rank, "step": step, "samples": samples, "loss": loss}


def _record(epoch: int, train_loss: float = 1.0, test_acc: float = 0.9) -> EvalRecord:
    return EvalRecord(run="run", epoch=epoch, train_s=0.0, backprops=0, forwards=0, wire_bytes=0,
                      train_loss=train_loss, test_loss=1.0, test_acc=test_acc)  # fmt: skip


def test_the_start_is_every_ranks_first_step_with_samples_and_a_finite_loss():
    rows = [_row(0, 1, 10, 9.0), _row(0, 0, 10, 2.0), _row(1, 0, 0, 0.0), _row(1, 1, 30, float("nan")),
            _row(1, 2, 30, 3.0), _row(1, 3, 30, 99.0)]  # fmt: skip
    assert start_loss(rows) == pytest.approx((2.0 * 10 + 3.0 * 30) / 40)
    assert start_loss([_row(0, 0, 0, 0.0), _row(0, 1, 5, float("inf"))]) is None


def test_chance_is_the_largest_test_class_share_and_at_least_one_over_the_classes():
    assert chance_accuracy(torch.tensor([0, 0, 0, 1, 2, 2]), 3) == pytest.approx(0.5)
    assert chance_accuracy(torch.tensor([0, 1]), 4) == pytest.approx(0.5)
    assert chance_accuracy(torch.tensor([0, 1, 2, 3]), 8) == pytest.approx(0.25)
    assert chance_accuracy(torch.tensor([], dtype=torch.long), 3) is None


def test_the_loss_check_trips_past_the_factor_of_the_first_step():
    check, totals = Divergence(factor=10.0, chance_epochs=0, chance=None), {}
    check.check(0, [_row(0, 0, 8, 2.0)], _record(0, train_loss=20.0), totals)  # at the bound: goes on
    assert totals["start_loss"] == 2.0
    with pytest.raises(Diverged) as caught:
        check.check(1, [], _record(1, train_loss=20.5), totals)
    message = str(caught.value)
    assert message.startswith("epoch 1: the training loss grew to 20.5, over 10x its first step's 2")
    assert "--diverge-factor 10" in message and len(message.splitlines()) == 1


@pytest.mark.parametrize("factor", [0.0, 1e6])
def test_a_factor_of_zero_or_far_above_lets_the_run_go_on(factor):
    check, totals = Divergence(factor=factor, chance_epochs=0, chance=None), {}
    for epoch, loss in enumerate([2.0, 1e5, 1e5]):
        check.check(epoch, [_row(0, 0, 8, 2.0)], _record(epoch, train_loss=loss), totals)


def test_accuracy_at_chance_counts_after_the_warm_up_and_only_in_a_row():
    chance = 0.4
    at, above = chance + CHANCE_MARGIN, chance + CHANCE_MARGIN + 0.01
    check, totals = Divergence(factor=0.0, chance_epochs=3, chance=chance), {}
    accuracies = [at] * CHANCE_WARMUP + [at, at, above, at, at]  # the warm-up and a break do not count
    for epoch, acc in enumerate(accuracies):
        check.check(epoch, [], _record(epoch, test_acc=acc), totals)
    with pytest.raises(Diverged) as caught:
        check.check(len(accuracies), [], _record(len(accuracies), test_acc=0.0), totals)
    message = str(caught.value)
    last = len(accuracies)
    assert message.startswith(f"epoch {last}: test accuracy 0.000 has been at chance (at most 0.400")
    assert "3 epochs in a row (--chance-epochs 3)" in message and len(message.splitlines()) == 1
    Divergence(factor=0.0, chance_epochs=0, chance=chance).check(99, [], _record(99, test_acc=0.0), {})


@pytest.mark.parametrize("replicas", [0, 2])
def test_a_run_that_blows_up_stops_alike_in_one_process_and_on_threads(replicas):
    with pytest.raises(Diverged, match="^epoch 0: the training loss grew to .* over 1000x its first step's"):
        train(RunConfig.from_flat(**BLOWS_UP), replicas=replicas)


def test_healthy_runs_do_not_trip_the_defaults():
    for replicas in (0, 2):
        result = train(RunConfig.from_flat(**HEALTHY), replicas=replicas)
        assert result.final.epoch == HEALTHY["epochs"] - 1


def test_a_resumed_run_knows_its_first_step_from_the_checkpoint_or_else_from_the_records(tmp_path):
    config = RunConfig.from_flat(**{**HEALTHY, "epochs": 2})
    run(config, sink=ParquetSink(tmp_path), checkpoint_dir=tmp_path)
    first = pd.read_parquet(tmp_path / "steps.parquet")
    expected = start_loss(first[first["epoch"] == 0].to_dict("records"))
    pointer = json.loads((tmp_path / "checkpoints" / "latest.json").read_text())
    state_path = tmp_path / "checkpoints" / pointer["folder"] / "state.json"
    state = json.loads(state_path.read_text())
    assert state["totals"]["start_loss"] == pytest.approx(expected)
    # a checkpoint written before the totals kept it: the resumed run reads it from its step records
    del state["totals"]["start_loss"]
    state_path.write_text(json.dumps(state))
    result = run(config.replace(epochs=3), sink=ParquetSink(tmp_path), checkpoint_dir=tmp_path, resume=True)
    assert result.extra["totals"]["start_loss"] == pytest.approx(expected)
