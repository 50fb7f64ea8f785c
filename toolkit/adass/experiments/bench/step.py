"""``adass bench step``: where a training step's time goes, per sampler, on a 56k-sample MLP setting.

Each sampler trains the engine in one process (a world of one, as ``adass train`` runs it), with
wrappers that time the model's own work inside the engine's steps: every forward of the model (a
two-pass sampler's probe forward counts), the loss and backward (from the end of a forward with
gradients to the end of the backward), and the optimizer step (torch's, or the engine's own on its
flat buffers, :class:`~adass.engine.FlatSGD`). What is left of the steps' wall time is the
engine's own: the batch gather, zeroing the gradient, the sampler's ``observe``, the step's length
(ADASS), the finiteness check and the step's record. ``between_ms`` is the epochs' time outside the
steps, per step (ADASS's refresh forwards, the sampler's selection bookkeeping, the loop).

The hooks cost a few microseconds a step, most of it inside the phases they time. Torch runs on one
thread; runs take turns sampler by sampler, and every figure is the median over the repeats.
``backprops_vs_full`` and ``time_vs_full`` are a run's backprops and training time over ``full``'s:
where the engine's own share is small, the second follows the first.

The last row, ``plain torch loop``, is the reference every figure is read against: the textbook
loop (gather the batch, ``zero_grad``, forward, mean cross-entropy, backward, ``step``, the loss's
``item``) over the same data, model and optimizer, in the same shuffled batches of 64, timed by the
same wrappers. What its own ``engine_ms`` holds is what any torch loop pays around the timed calls
(the module's call before its forward, zeroing, releasing the graph, reading the loss back, the
timers' wrappers); ``beyond_plain_ms`` is what a sampler's step and its share of the time between
steps take beyond that loop's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import torch
from torch.nn import functional as F

from ...config import RunConfig
from ...data import Dataset, load_dataset
from ...engine import Counters, Engine, ReplicaState, in_order, make_optimizer, set_lr
from ...models import build_model
from ...tables import markdown_table
from . import write_report

__all__ = ["PLAIN", "PlainLoop", "SAMPLERS", "SETTING", "StepTimer", "measure", "run"]

SAMPLERS = ["full", "adass", "random:ratio=0.6", "selective_backprop"]
#: the reference row: a textbook torch loop over the same setting (see :class:`PlainLoop`)
PLAIN = "plain torch loop"
#: the 56k-sample MLP setting (synthetic vectors, 20 features, the default MLP, batch 64) and its quick form
SETTING = {"data": "synthetic:n=56000", "model": "mlp", "epochs": 8}
QUICK = {"data": "synthetic:n=1000,test=200", "model": "mlp:hidden=16", "epochs": 2}
COLUMNS = ["sampler", "steps", "step_ms", "fwd_bwd_ms", "optimizer_ms", "engine_ms", "engine_pct", "between_ms",
           "beyond_plain_ms", "backprops_vs_full", "time_vs_full"]  # fmt: skip


class StepTimer:
    """Times the steps of ``engine`` until :meth:`close`: their wall time (``step_s``), the model's
    forwards, loss and backward (``fwd_bwd_s``) and the optimizer's step (``optimizer_s``) within
    them, in seconds; forwards outside a step (refreshing scores) are not counted.

    Each part is timed around the call itself, by wrappers on the engine's ``step``, the model's
    ``forward``, the optimizer's ``step`` (and :class:`~adass.engine.FlatSGD`'s, which steps it on
    the flat buffers) and ``Tensor.backward``; a forward with gradients is timed
    on to the end of the backward that follows it, so the loss between the two counts as model work.
    """

    def __init__(self, engine: Engine) -> None:
        self.step_s = self.fwd_bwd_s = self.optimizer_s = 0.0
        self.steps = 0
        self._within = False
        self._forward_began: float | None = None  # of a forward whose backward is still to come
        state = engine.state
        self._owners = [(engine, "step"), (state.model, "forward"), (state.optimizer, "step")]
        self._backward = torch.Tensor.backward
        engine.step = self._step(engine.step)
        state.model.forward = self._forward(state.model.forward)
        state.optimizer.step = self._timed(state.optimizer.step, self._add_optimizer)
        flat = getattr(state, "flat_sgd", None)  # the engine's optimizer step on its flat buffers
        if flat is not None:
            self._owners.append((flat, "step"))
            flat.step = self._timed(flat.step, self._add_optimizer)
        torch.Tensor.backward = self._backward_timed()

    def _timed(self, call: Callable, add: Callable[[float], None]) -> Callable:
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                add(time.perf_counter() - began)

        return timed

    def _step(self, step: Callable) -> Callable:
        def timed(*args, **kwargs):
            self._within, began = True, time.perf_counter()
            try:
                return step(*args, **kwargs)
            finally:
                self.step_s += time.perf_counter() - began
                self.steps += 1
                self._within, self._forward_began = False, None

        return timed

    def _add_optimizer(self, seconds: float) -> None:
        self.optimizer_s += seconds if self._within else 0.0

    def _forward(self, forward: Callable) -> Callable:
        def timed(*args, **kwargs):
            began = time.perf_counter()
            out = forward(*args, **kwargs)
            if torch.is_grad_enabled():  # timed on to the end of its backward
                self._forward_began = began
            elif self._within:
                self.fwd_bwd_s += time.perf_counter() - began
            return out

        return timed

    def _backward_timed(self) -> Callable:
        backward = self._backward

        def timed(tensor: torch.Tensor, *args, **kwargs):
            began = self._forward_began if self._forward_began is not None else time.perf_counter()
            try:
                return backward(tensor, *args, **kwargs)
            finally:
                if self._within:
                    self.fwd_bwd_s += time.perf_counter() - began
                self._forward_began = None

        return timed

    def __enter__(self) -> StepTimer:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:
        """Give the engine, model, optimizer and tensors their own methods back."""
        torch.Tensor.backward = self._backward
        for owner, name in self._owners:
            vars(owner).pop(name, None)


class PlainLoop:
    """The textbook torch training loop over ``config``'s model and optimizer (the toolkit's SGD):
    every epoch a fresh shuffle, and per batch of the configured size a gather, ``zero_grad``,
    forward, mean cross-entropy, backward, ``step`` and the loss's ``item``. Shaped like an
    :class:`~adass.engine.Engine` for :class:`StepTimer` and the bench's epochs: ``state.model``,
    ``state.optimizer``, ``step``, ``plan`` and ``run_epoch``."""

    def __init__(self, config: RunConfig, dataset: Dataset) -> None:
        self.config = config
        self.x, self.y = dataset.x_train, dataset.y_train
        model = build_model(
            config.model.model, tuple(self.x.shape[1:]), dataset.classes, seed=config.optim.seed
        )
        self.state = SimpleNamespace(
            model=model, optimizer=make_optimizer(model, config), counters=Counters()
        )

    def step(self, idx: torch.Tensor) -> float:
        x, y = self.x.index_select(0, idx), self.y.index_select(0, idx)
        optimizer = self.state.optimizer
        optimizer.zero_grad()
        loss = F.cross_entropy(self.state.model(x), y)
        loss.backward()
        optimizer.step()
        self.state.counters.backprops += int(idx.numel())
        return loss.item()

    def plan(self, epoch: int) -> int:
        """The epoch itself: the loop has nothing to choose."""
        return epoch

    def run_epoch(self, epoch: int, selection_records: bool = False) -> None:
        set_lr(self.state.optimizer, self.config, epoch)
        batch = self.config.optim.batch_size
        order = torch.randperm(int(self.y.shape[0]), generator=torch.Generator().manual_seed(epoch))
        for start in range(0, int(order.numel()), batch):
            self.step(order[start : start + batch])


def _one_run(config: RunConfig, dataset: Dataset, plain: bool = False) -> dict[str, float]:
    """Train ``config`` in this process with a :class:`StepTimer` on (``plain``: by :class:`PlainLoop`);
    totals in seconds."""
    engine = (
        PlainLoop(config, dataset) if plain else Engine(ReplicaState.whole(config, dataset), split=in_order)
    )
    with StepTimer(engine) as timer:
        start = time.perf_counter()
        for epoch in range(config.optim.epochs):
            engine.run_epoch(engine.plan(epoch), selection_records=False)
        run_s = time.perf_counter() - start
    return {"steps": timer.steps, "step_s": timer.step_s, "run_s": run_s, "fwd_bwd_s": timer.fwd_bwd_s,
            "optimizer_s": timer.optimizer_s, "backprops": engine.state.counters.backprops}  # fmt: skip


def measure(setting: dict, samplers: list[str], repeats: int) -> pd.DataFrame:
    """One row per sampler: per-step milliseconds of each part, medians over ``repeats`` runs that
    take turns."""
    dataset = load_dataset(setting["data"], seed=0)
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in samplers}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(repeats):
            for sampler in samplers:
                config = RunConfig.from_flat(**setting, sampler="full" if sampler == PLAIN else sampler)
                runs[sampler].append(_one_run(config, dataset, plain=sampler == PLAIN))
    finally:
        torch.set_num_threads(threads)
    rows = []
    for sampler, done in runs.items():

        def per_step(key: str, done=done) -> float:
            return statistics.median(r[key] / max(1, r["steps"]) * 1e3 for r in done)

        step_ms, fwd_bwd_ms, optimizer_ms = per_step("step_s"), per_step("fwd_bwd_s"), per_step("optimizer_s")
        engine_ms = step_ms - fwd_bwd_ms - optimizer_ms
        rows.append({"sampler": sampler, "steps": int(statistics.median(r["steps"] for r in done)),
                     "step_ms": step_ms, "fwd_bwd_ms": fwd_bwd_ms, "optimizer_ms": optimizer_ms,
                     "engine_ms": engine_ms, "engine_pct": 100 * engine_ms / step_ms,
                     "between_ms": statistics.median((r["run_s"] - r["step_s"]) / max(1, r["steps"]) * 1e3
                                                     for r in done),
                     "backprops": statistics.median(r["backprops"] for r in done),
                     "run_s": statistics.median(r["run_s"] for r in done)})  # fmt: skip
    table = pd.DataFrame(rows)
    full = table[table["sampler"] == "full"]
    base_backprops, base_s = (full["backprops"].iloc[0], full["run_s"].iloc[0]) if len(full) else (1, 1)
    table["backprops_vs_full"] = table["backprops"] / base_backprops
    table["time_vs_full"] = table["run_s"] / base_s
    plain = table[table["sampler"] == PLAIN]
    if len(plain):  # a step and its share of the time between steps, beyond the textbook loop's
        own = table["engine_ms"] + table["between_ms"]
        table["beyond_plain_ms"] = own - float(own[plain.index[0]])
    else:
        table["beyond_plain_ms"] = float("nan")
    return table[COLUMNS]


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Measure (56k samples, 8 epochs, 3 repeats; quick: 1k samples, 2 epochs, 1 repeat), print and
    write the table."""
    setting, repeats = (QUICK, 1) if quick else (SETTING, 3)
    table = measure(setting, [*SAMPLERS, PLAIN], repeats)
    lines = [f"# adass bench step{' (quick)' if quick else ''}", "",
             f"`{setting['data']}`, `--model {setting['model']}`, {setting['epochs']} epochs, batch 64, one "
             f"process, torch on one thread, median of {repeats} runs taking turns. Per step: fwd_bwd (forwards, "
             "loss and backward), optimizer (its step) and engine (the rest of the step: batch gather, zeroing, "
             "the sampler's observe, the step's length, checks, records); between: the epochs' time outside "
             f"the steps, per step. `{PLAIN}`: the textbook loop (gather, zero_grad, forward, mean loss, backward, "
             "step, item) timed the same way, whose engine part is what any torch loop pays around the timed "
             "calls; beyond_plain: engine and between per step, less that loop's.", "",
             markdown_table(table)]  # fmt: skip
    write_report(out_dir, "step", lines, {"step": table})
    return table
