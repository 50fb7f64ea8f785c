"""The step bench runs in quick mode, its parts add up to each step, and its timers leave nothing behind."""

import math

import pandas as pd
import torch

from adass.cli import main
from adass.config import RunConfig
from adass.data import load_dataset
from adass.engine import Engine, ReplicaState, in_order
from adass.experiments.bench import step


def test_quick_step_bench_writes_one_row_per_sampler(tmp_path, capsys):
    assert main(["bench", "step", "--quick", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("# adass bench step (quick)")
    assert (tmp_path / "step.md").exists()
    table = pd.read_csv(tmp_path / "step.csv")
    assert list(table.columns) == step.COLUMNS
    assert list(table["sampler"]) == [*step.SAMPLERS, step.PLAIN]
    parts = table["fwd_bwd_ms"] + table["optimizer_ms"] + table["engine_ms"]
    assert ((parts - table["step_ms"]).abs() < 1e-9).all()
    assert (
        (table["fwd_bwd_ms"] > 0).all() and (table["optimizer_ms"] > 0).all() and (table["step_ms"] > 0).all()
    )
    assert ((table["engine_pct"] - 100 * table["engine_ms"] / table["step_ms"]).abs() < 1e-9).all()
    n, epochs = 1000, step.QUICK["epochs"]
    rows = table.set_index("sampler")
    assert rows.loc["full", "steps"] == epochs * math.ceil(n / 64)
    assert rows.loc["full", "backprops_vs_full"] == 1.0 and rows.loc["full", "time_vs_full"] == 1.0
    assert rows.loc["random:ratio=0.6", "backprops_vs_full"] == 0.6
    # the textbook loop: every sample once an epoch, in as many steps as full, and nothing beyond itself
    assert rows.loc[step.PLAIN, "steps"] == rows.loc["full", "steps"]
    assert rows.loc[step.PLAIN, "backprops_vs_full"] == 1.0 and rows.loc[step.PLAIN, "beyond_plain_ms"] == 0.0
    own = table["engine_ms"] + table["between_ms"]
    assert ((table["beyond_plain_ms"] - (own - float(own.iloc[-1]))).abs() < 1e-9).all()


def test_the_plain_loop_trains_as_the_textbook_loop_does():
    config = RunConfig.from_flat(data="synthetic:n=200,d=5,test=50", model="mlp:hidden=8", sampler="full",
                                 epochs=2, lr=0.1)  # fmt: skip
    dataset = load_dataset(config.data.data)
    loop = step.PlainLoop(config, dataset)
    before = [p.detach().clone() for p in loop.state.model.parameters()]
    with step.StepTimer(loop) as timer:
        for epoch in range(2):
            loop.run_epoch(epoch)
    assert timer.steps == 2 * math.ceil(200 / config.optim.batch_size)
    assert loop.state.counters.backprops == 400 and timer.fwd_bwd_s > 0 and timer.optimizer_s > 0
    after = list(loop.state.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))


def test_step_timer_counts_only_the_steps_and_gives_everything_back():
    config = RunConfig.from_flat(
        data="synthetic:n=200,d=5,test=50", model="mlp:hidden=8", sampler="full", epochs=1
    )
    engine = Engine(ReplicaState.whole(config, load_dataset(config.data.data)), split=in_order)
    backward, model, optimizer = torch.Tensor.backward, engine.state.model, engine.state.optimizer
    with step.StepTimer(engine) as timer:
        model(engine.state.x)  # a forward outside any step (as a refresh would be) is not counted
        assert timer.fwd_bwd_s == 0.0
        report = engine.run_epoch(engine.plan(0), selection_records=False)
    assert timer.steps == len(report.steps) == 4
    assert 0 < timer.fwd_bwd_s + timer.optimizer_s < timer.step_s
    assert timer.optimizer_s > 0  # the engine steps on its flat buffers, timed as the optimizer's
    assert torch.Tensor.backward is backward
    assert "step" not in vars(engine) and "forward" not in vars(model) and "step" not in vars(optimizer)
    assert "step" not in vars(engine.state.flat_sgd)
