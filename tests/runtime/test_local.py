"""The single-process trainer against a plain torch loop, and its records and counters."""

import math

import torch
from torch import nn
from torch.nn import functional as F

from adass.codecs.base import stable_seed
from adass.data import load_dataset
from adass.engine import lr_at
from adass.metrics import EvalRecord, SelectionRecord, StepRecord
from adass.runtime import train


def plain_loop(config):
    """Epoch-SGD written out by hand: same init, same documented visiting order."""
    o = config.optim
    ds = load_dataset(config.data.data, seed=o.seed)
    torch.manual_seed(o.seed)
    model = nn.Sequential(nn.Flatten(), nn.Linear(ds.shape[0], 16), nn.ReLU(), nn.Linear(16, ds.classes))
    opt = torch.optim.SGD(model.parameters(), lr=o.lr, momentum=o.momentum)
    for epoch in range(o.epochs):
        for group in opt.param_groups:
            group["lr"] = o.lr * 0.5 * (1 + math.cos(math.pi * epoch / o.epochs))
        gen = torch.Generator().manual_seed(stable_seed(o.seed, "order", epoch))
        order = torch.randperm(ds.n_train, generator=gen)
        for start in range(0, ds.n_train, o.batch_size):
            idx = order[start : start + o.batch_size]
            loss = F.cross_entropy(model(ds.x_train[idx]), ds.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model


def test_full_sampler_matches_a_plain_torch_loop(tiny_config):
    result = train(tiny_config)
    reference = plain_loop(tiny_config)
    for ours, theirs in zip(result.model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_records_and_counters(tiny_config):
    result = train(tiny_config)
    evals = result.sink.frame(EvalRecord)
    steps = result.sink.frame(StepRecord)
    selection = result.sink.frame(SelectionRecord)
    n, epochs = result.dataset.n_train, tiny_config.optim.epochs
    assert list(evals["epoch"]) == list(range(epochs))
    assert result.counters.backprops == result.counters.forwards == n * epochs
    assert evals["backprops"].is_monotonic_increasing
    assert len(steps) == epochs * math.ceil(n / tiny_config.optim.batch_size)
    assert int(steps["samples"].sum()) == n * epochs
    assert len(selection) == n * epochs and selection["kept"].all()
    assert evals["test_acc"].iloc[-1] > 0.6  # 3 well-separated classes


def test_adass_saves_backprops_and_counts_refresh_forwards(tiny_config):
    config = tiny_config.replace(sampler="adass:eps=0.4,warmup=1,final=0,refresh=2", epochs=6)
    result = train(config)
    n = result.dataset.n_train
    c = result.counters
    assert c.backprops < n * 6
    assert c.forwards > c.backprops  # the refresh passes are counted
    selection = result.sink.frame(SelectionRecord)
    kept_per_epoch = selection.groupby("epoch")["kept"].mean()
    assert kept_per_epoch.iloc[0] == 1.0 and kept_per_epoch.iloc[1:].min() < 1.0


def test_selective_backprop_counts_forwards_of_every_batch(tiny_config):
    result = train(tiny_config.replace(sampler="selective_backprop:beta=3"))
    n = result.dataset.n_train * tiny_config.optim.epochs
    assert result.counters.backprops < n
    assert result.counters.forwards == n + result.counters.backprops


def test_lr_schedules():
    assert lr_at(0.1, "constant", 7, 10) == 0.1
    assert lr_at(0.1, "step", 4, 10) == 0.1 and abs(lr_at(0.1, "step", 5, 10) - 0.01) < 1e-12
    assert abs(lr_at(0.1, "step", 8, 10) - 0.001) < 1e-12
    assert lr_at(0.1, "cosine", 0, 10) == 0.1 and lr_at(0.1, "cosine", 5, 10) < 0.051
