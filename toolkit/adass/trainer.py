"""Single-process Epoch-SGD with a sample-selection policy; writes Eval/Selection/Step records.

Run it from the command line with ``adass train --data mnist5k --sampler adass:eps=0.2``, or call
``train(RunConfig.from_flat(...))``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

from .config import RunConfig
from .data import Dataset, load_dataset
from .metrics import EvalRecord, MemorySink, SelectionRecord, StepRecord
from .models import build_model, is_linear
from .sampling import Sampler, Selection, build_sampler

__all__ = ["Counters", "RunResult", "backprop_batch", "evaluate", "flat_params", "lr_at", "make_optimizer",
           "optimizer_step", "train"]  # fmt: skip


@dataclass
class Counters:
    """Cost so far, in sample passes: ``backprops`` (forward + backward) and ``forwards`` (all forwards)."""

    backprops: int = 0
    forwards: int = 0
    train_s: float = 0.0
    path: float = 0.0  # cumulative ||w_{t+1} - w_t||


@dataclass
class RunResult:
    """What a finished run hands back: the trained model, the sink with its records, the counters."""

    model: nn.Module
    sink: MemorySink
    counters: Counters
    config: RunConfig
    dataset: Dataset
    final: EvalRecord | None = None
    extra: dict = field(default_factory=dict)


def lr_at(base_lr: float, schedule: str, epoch: int, epochs: int) -> float:
    """Learning rate for ``epoch`` (0-based): constant, step (x0.1 at 50% and 75%) or cosine."""
    if schedule == "constant":
        return base_lr
    if schedule == "step":
        return base_lr * (0.1 ** sum(epoch >= m * epochs for m in (0.5, 0.75)))
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))


def make_optimizer(model: nn.Module, config: RunConfig) -> torch.optim.Optimizer:
    o = config.optim
    return torch.optim.SGD(model.parameters(), lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 2048) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on ``(x, y)``."""
    was_training = model.training
    model.eval()
    loss_sum, correct = 0.0, 0
    for start in range(0, int(y.shape[0]), batch):
        logits = model(x[start : start + batch])
        target = y[start : start + batch]
        loss_sum += float(F.cross_entropy(logits, target, reduction="sum"))
        correct += int((logits.argmax(1) == target).sum())
    model.train(was_training)
    n = max(1, int(y.shape[0]))
    return loss_sum / n, correct / n


@torch.no_grad()
def _refresh(model: nn.Module, sampler: Sampler, ds: Dataset, idx: torch.Tensor, c: Counters, batch: int) -> None:
    """Forward-only pass over ``idx`` so the sampler sees fresh losses (counted as forwards)."""
    for start in range(0, int(idx.numel()), batch):
        part = idx[start : start + batch]
        losses = F.cross_entropy(model(ds.x_train[part]), ds.y_train[part], reduction="none")
        sampler.observe(part, losses, {"path": c.path, "refresh": True})
        c.forwards += int(part.numel())


def backprop_batch(
    model: nn.Module, sampler: Sampler, x_all: torch.Tensor, y_all: torch.Tensor,
    idx: torch.Tensor, weights: torch.Tensor, c: Counters,
) -> tuple[float, int]:  # fmt: skip
    """Forward and backward on the batch ``idx`` of ``(x_all, y_all)``; gradients are left in ``.grad``.

    Two-pass samplers first see a no-grad forward and choose whom to backprop. Returns the mean loss
    and how many samples were backpropagated (their forwards and backprops are added to ``c``).
    """
    model.zero_grad(set_to_none=False)
    if idx.numel() == 0:
        return 0.0, 0
    x, y = x_all[idx], y_all[idx]
    if sampler.two_pass:
        with torch.no_grad():
            probe = F.cross_entropy(model(x), y, reduction="none")
        c.forwards += int(idx.numel())
        sampler.observe(idx, probe, {"path": c.path})
        weights = weights * sampler.backprop_weights(idx, probe)
        keep = weights > 0
        idx, x, y, weights = idx[keep], x[keep], y[keep], weights[keep]
        if idx.numel() == 0:
            return float(probe.mean()), 0
    losses = F.cross_entropy(model(x), y, reduction="none")
    if not sampler.two_pass:
        sampler.observe(idx, losses.detach(), {"path": c.path})
    (losses * weights).sum().div(idx.numel()).backward()
    c.backprops += int(idx.numel())
    c.forwards += int(idx.numel())
    return float(losses.detach().mean()), int(idx.numel())


def flat_params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def optimizer_step(model: nn.Module, opt: torch.optim.Optimizer, c: Counters, measure_path: bool = True) -> None:
    """``opt.step()``; with ``measure_path``, add the step's length ``||w_{t+1} - w_t||`` to ``c.path``."""
    before = flat_params(model) if measure_path else None
    opt.step()
    if measure_path:
        c.path += float(torch.linalg.vector_norm(flat_params(model) - before))


def _step(
    model: nn.Module, opt: torch.optim.Optimizer, sampler: Sampler, ds: Dataset,
    idx: torch.Tensor, weights: torch.Tensor, c: Counters,
) -> tuple[float, int]:  # fmt: skip
    """One SGD step on the batch ``idx``; returns (mean loss, samples backpropagated)."""
    loss, used = backprop_batch(model, sampler, ds.x_train, ds.y_train, idx, weights, c)
    if used:
        optimizer_step(model, opt, c)
    return loss, used


def train(
    config: RunConfig,
    sink: MemorySink | None = None,
    progress: Callable[[EvalRecord], None] | None = None,
    dataset: Dataset | None = None,
    run_id: str = "run",
    selection_records: bool = True,
) -> RunResult:
    """Train one model on one process with the configured sampler.

    Parameters
    ----------
    config : RunConfig
        Data, model, sampler and optimiser settings.
    sink : MemorySink, optional
        Where records go (``ParquetSink`` writes them under a folder); a new MemorySink if omitted.
    progress : callable, optional
        Called with each epoch's EvalRecord.
    dataset : Dataset, optional
        Use these tensors instead of loading ``config.data.data`` (saves reloading in comparisons).
    selection_records : bool
        Write one SelectionRecord per sample and epoch.

    Returns
    -------
    RunResult
        ``wall_s`` in records is training time only (evaluation excluded), so policies compare fairly.
    """
    sink = sink if sink is not None else MemorySink()
    o = config.optim
    ds = dataset if dataset is not None else load_dataset(config.data.data, seed=o.seed)
    model = build_model(config.model.model, ds.shape, ds.classes, seed=o.seed)
    sampler = build_sampler(
        config.sampler.sampler, n=ds.n_train, seed=o.seed, epochs=o.epochs,
        feature_sq_norms=ds.x_train.reshape(ds.n_train, -1).pow(2).sum(1), linear=is_linear(model),
    )  # fmt: skip
    opt = make_optimizer(model, config)
    c = Counters()
    record = None
    step = 0
    for epoch in range(o.epochs):
        for group in opt.param_groups:
            group["lr"] = lr_at(o.lr, o.schedule, epoch, o.epochs)
        start = time.perf_counter()
        selection = sampler.select(epoch)
        if selection.refresh is not None and selection.refresh.numel():
            _refresh(model, sampler, ds, selection.refresh, c, 1024)
        losses = []
        for first in range(0, len(selection), o.batch_size):
            t0 = time.perf_counter()
            part = slice(first, first + o.batch_size)
            loss, used = _step(model, opt, sampler, ds, selection.indices[part], selection.weights[part], c)
            losses.append(loss)
            sink.write(StepRecord(run_id, epoch, step, 0, used, loss, time.perf_counter() - t0))
            step += 1
        c.train_s += time.perf_counter() - start
        if selection_records:
            _write_selection(sink, run_id, epoch, sampler, selection, ds.n_train)
        test_loss, test_acc = evaluate(model, ds.x_test, ds.y_test)
        record = EvalRecord(
            run_id, epoch, c.train_s, c.backprops, c.forwards, 0,
            float(sum(losses) / max(1, len(losses))), test_loss, test_acc, len(selection) / max(1, ds.n_train),
        )  # fmt: skip
        sink.write(record)
        if progress is not None:
            progress(record)
    sink.close()
    return RunResult(model, sink, c, config, ds, record)


def _write_selection(
    sink: MemorySink, run_id: str, epoch: int, sampler: Sampler, selection: Selection, n: int
) -> None:
    kept = torch.zeros(n, dtype=torch.bool)
    kept[selection.indices] = True
    frame = pd.DataFrame({
        "run": run_id, "epoch": epoch, "rank": 0, "sample_id": range(n),
        "bound": sampler.bounds().numpy().astype("float64"), "kept": kept.numpy(),
    })  # fmt: skip
    sink.write_frame(SelectionRecord, frame)
