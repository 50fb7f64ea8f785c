"""The step kernel: counters, learning rate, backprop of one batch, forward-only refresh, optimizer
step and evaluation. Every training loop of the toolkit is built from these pieces.

Samples, indices and the sampler's scores stay on the host; each batch goes to the model's device
(``model_device``) and its losses come back for the sampler, so one code path serves CPU and CUDA
(on the CPU the moves are no-ops).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..config import RunConfig
from ..sampling import Sampler

__all__ = ["Counters", "FlatSGD", "StepLength", "backprop_batch", "evaluate", "flat_params", "flatten_into", "lr_at",
           "make_optimizer", "make_sgd", "model_device", "optimizer_step", "refresh_scores", "set_lr",
           "write_flat_params"]  # fmt: skip


@dataclass
class Counters:
    """Cost so far, in sample passes: ``backprops`` (forward + backward) and ``forwards`` (all forwards)."""

    backprops: int = 0
    forwards: int = 0
    train_s: float = 0.0
    path: float = 0.0  # cumulative ||w_{t+1} - w_t||


def lr_at(base_lr: float, schedule: str, epoch: int, epochs: int) -> float:
    """Learning rate for ``epoch`` (0-based): constant, step (x0.1 at 50% and 75%) or cosine."""
    if schedule == "constant":
        return base_lr
    if schedule == "step":
        return base_lr * (0.1 ** sum(epoch >= m * epochs for m in (0.5, 0.75)))
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))


def set_lr(optimizer: torch.optim.Optimizer, config: RunConfig, epoch: int) -> None:
    """Set every parameter group's learning rate to the schedule's value for ``epoch``."""
    o = config.optim
    for group in optimizer.param_groups:
        group["lr"] = lr_at(o.lr, o.schedule, epoch, o.epochs)


def make_sgd(
    params: Iterable[torch.Tensor], config: RunConfig, momentum: float | None = None
) -> torch.optim.SGD:
    """SGD over ``params`` with the configured learning rate, momentum and weight decay: the one
    optimizer of the toolkit, whether a replica or a parameter-server shard owns the parameters.
    ``momentum`` overrides the configured one (0 where the exchange applies the momentum itself,
    ``mc(SPEC)``/``dmc(SPEC)``)."""
    o = config.optim
    momentum = o.momentum if momentum is None else momentum
    return torch.optim.SGD(params, lr=o.lr, momentum=momentum, weight_decay=o.weight_decay)


def make_optimizer(
    model: nn.Module, config: RunConfig, momentum: float | None = None
) -> torch.optim.Optimizer:
    """SGD over the model's parameters (see :func:`make_sgd`)."""
    return make_sgd(model.parameters(), config, momentum)


def model_device(model: nn.Module) -> torch.device:
    """The device ``model``'s parameters live on (the CPU for a model without any)."""
    first = next(model.parameters(), None)
    return torch.device("cpu") if first is None else first.device


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 2048) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on ``(x, y)``."""
    was_training = model.training
    model.eval()
    device = model_device(model)
    loss_sum, correct = 0.0, 0
    for start in range(0, int(y.shape[0]), batch):
        logits = model(x[start : start + batch].to(device))
        target = y[start : start + batch].to(device)
        loss_sum += float(F.cross_entropy(logits, target, reduction="sum"))
        correct += int((logits.argmax(1) == target).sum())
    model.train(was_training)
    n = max(1, int(y.shape[0]))
    return loss_sum / n, correct / n


@torch.no_grad()
def refresh_scores(
    model: nn.Module, sampler: Sampler, x_all: torch.Tensor, y_all: torch.Tensor, idx: torch.Tensor,
    c: Counters, batch: int = 1024,
) -> None:  # fmt: skip
    """Forward-only pass over ``idx`` so the sampler sees fresh losses (counted as forwards)."""
    device = model_device(model)
    for start in range(0, int(idx.numel()), batch):
        part = idx[start : start + batch]
        losses = F.cross_entropy(model(x_all[part].to(device)), y_all[part].to(device), reduction="none")
        sampler.observe(part, losses.to(part.device), {"path": c.path, "refresh": True})
        c.forwards += int(part.numel())


def backprop_batch(
    model: nn.Module, sampler: Sampler, x_all: torch.Tensor, y_all: torch.Tensor,
    idx: torch.Tensor, weights: torch.Tensor | None, c: Counters, flat_grad: torch.Tensor | None = None,
    rows: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[float, int]:  # fmt: skip
    """Forward and backward on the batch ``idx`` of ``(x_all, y_all)``; gradients are left in ``.grad``.

    Two-pass samplers first see a no-grad forward and choose whom to backprop. Returns the mean loss
    and how many samples were backpropagated (their forwards and backprops are added to ``c``).

    ``weights``: the samples' loss weights; None where every weight is 1, and then the loss the
    backward takes, the losses' ``mean``, is also the step's mean loss, which saves a reduction per
    step. Weighted or not, the backward takes a ``mean``: on the CPU the same values and gradients,
    bit for bit, as ``sum / count``, one autograd node fewer.
    Gradients are zeroed in place, so views into a flat buffer survive: ``flat_grad``, the buffer
    every ``.grad`` is a view of, in one operation; without it, one gradient at a time. ``rows``:
    the batch's samples and labels already gathered on the model's device (see
    :class:`~adass.engine.rows.EpochRows`); without them, they are gathered here.
    """
    if flat_grad is None:
        model.zero_grad(set_to_none=False)
    else:
        flat_grad.zero_()
    if idx.numel() == 0:
        return 0.0, 0
    device = model_device(model) if flat_grad is None else flat_grad.device  # the gradient's is the model's
    if rows is None:
        x, y = x_all.index_select(0, idx).to(device), y_all.index_select(0, idx).to(device)
    else:
        x, y = rows
    on_host = device == idx.device  # losses go to the sampler on the host: no move needed then
    if sampler.two_pass:
        with torch.no_grad():
            probe = F.cross_entropy(model(x), y, reduction="none")
        probe = probe if on_host else probe.to(idx.device)
        c.forwards += int(idx.numel())
        sampler.observe(idx, probe, {"path": c.path})
        chosen = sampler.backprop_weights(idx, probe)
        weights = chosen if weights is None else weights * chosen
        keep = torch.nonzero(weights > 0).squeeze(1)  # found once, then one gather per tensor
        idx, weights = idx.index_select(0, keep), weights.index_select(0, keep)
        keep = keep if on_host else keep.to(device)
        x, y = x.index_select(0, keep), y.index_select(0, keep)
        if idx.numel() == 0:
            return float(probe.mean()), 0
    used = int(idx.numel())
    losses = F.cross_entropy(model(x), y, reduction="none")
    mean = None
    if weights is None:
        mean = losses.mean()
        mean.backward()
    else:
        (losses * weights.to(device)).mean().backward()  # the weighted sum over ``used``, bit for bit
    losses = losses.detach()
    if not sampler.two_pass:  # after the backward, which reads nothing the sampler keeps
        sampler.observe(idx, losses if on_host else losses.to(idx.device), {"path": c.path})
    c.backprops += used
    c.forwards += used
    return (losses.mean() if mean is None else mean).item(), used


def flat_params(model: nn.Module) -> torch.Tensor:
    """Every parameter, flattened and concatenated (a copy)."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def flatten_into(tensors: Iterable[torch.Tensor], flat: torch.Tensor) -> None:
    """Make every tensor of ``tensors`` a view of its slice of ``flat`` (in order; ``flat`` holds
    as many values as they do together, and keeps the values they had). Parameters stay the same
    objects, so an optimizer built over them, hooks and ``state_dict`` keys are unaffected."""
    offset = 0
    with torch.no_grad():
        for t in tensors:
            part = flat[offset : offset + t.numel()].view_as(t)
            part.copy_(t)
            t.data = part
            offset += t.numel()


class StepLength:
    """The length ``||w_{t+1} - w_t||`` of a change to a flat parameter buffer every parameter is a
    view of (see :func:`flatten_into`) that no optimizer step describes (pulled parameters, another
    optimizer): :meth:`before` copies the buffer into a scratch buffer of the same size, :meth:`after`
    takes the distance to it, bit for bit the norm of the difference of two :func:`flat_params`
    copies. A step of :class:`FlatSGD` reads its length off the step itself instead.

    Neither buffer takes part in autograd (the parameters are views through ``.data``), so no
    method needs ``torch.no_grad``, whose switching would cost more than the copy itself."""

    def __init__(self, flat: torch.Tensor) -> None:
        self.flat = flat
        self._scratch: torch.Tensor | None = None

    def before(self) -> None:
        if self._scratch is None:
            self._scratch = torch.empty_like(self.flat)
        self._scratch.copy_(self.flat)

    def after(self) -> float:
        return float(torch.dist(self.flat, self._scratch))


class FlatSGD:
    """Steps torch's SGD with momentum (no Nesterov, no dampening, one parameter group, float
    hyper-parameters: the toolkit's optimizer) on flat buffers: every parameter a view of ``params``,
    every gradient a view of ``grad`` (see :class:`~adass.engine.replica.ReplicaState`), and every
    momentum buffer made a view of one flat buffer here. Torch's step loops over the parameters in
    Python, a few operations each, plus its own bookkeeping; on the flat buffers the step is three
    operations (6 against 46 µs, 81 inside a training loop, for the 56k MLP's 2,946 parameters on
    one core). Each value goes through the same arithmetic as in torch's loop (weight decay added
    to the gradient, ``buffer * momentum + gradient``, ``w - lr * buffer``), so the parameters come
    out bit for bit torch's.

    Before the first step the momentum views hold zeros, and ``0 * momentum + d`` is ``d``, the
    buffer torch's first step takes. A loaded optimizer state is copied back into the views. Any
    other optimizer, and gradients that are no longer the flat buffer's views, are not
    :meth:`ready`: they step through ``opt.step()``. The optimizer's step hooks run only there.

    The step moves every parameter by ``-lr * buffer``, so its length is ``lr * ||buffer||``
    (:meth:`step` returns the buffer); it differs from the distance between the parameters before
    and after only by the rounding of ``w - lr * buffer`` (a few units in the last place).
    """

    def __init__(self, params: torch.Tensor, grad: torch.Tensor) -> None:
        self.params, self.grad = params, grad
        self._decayed: torch.Tensor | None = None  # the gradient plus weight decay, reused every step
        # (optimizer, flat momentum buffer, its views, the gradient views); views None: torch steps it
        self._bound: tuple[torch.optim.Optimizer, torch.Tensor, list[torch.Tensor] | None, list] | None = None

    def ready(self, opt: torch.optim.Optimizer) -> bool:
        """Whether :meth:`step` can step ``opt`` on the flat buffers now: binds ``opt`` the first time,
        then checks that every gradient is still the flat buffer's view."""
        bound = self._bound
        if bound is None or bound[0] is not opt:
            bound = self._bound = self._bind_to(opt)
        groups = opt.param_groups
        if bound[2] is None or len(groups) != 1:
            return False
        params, grads = groups[0]["params"], bound[3]
        if len(params) != len(grads):
            return False
        for p, g in zip(params, grads, strict=True):  # a plain loop: a generator in all() costs more
            if p.grad is not g:
                return False
        return True

    def step(self, opt: torch.optim.Optimizer) -> torch.Tensor:
        """Step ``opt`` (where :meth:`ready` says so); returns the flat momentum buffer, by which every
        parameter moved ``-lr * buffer``."""
        _, buffer, views, _ = self._bound
        group = opt.param_groups[0]
        if opt.state[group["params"][0]].get("momentum_buffer") is not views[0]:
            self._load(opt, views)  # a fresh or loaded state (load_state_dict replaces it whole)
        decay, d = group["weight_decay"], self.grad
        if decay != 0:  # the gradient with weight decay, written into a buffer kept for it
            if self._decayed is None:
                self._decayed = torch.empty_like(self.grad)
            d = torch.add(self.grad, self.params, alpha=decay, out=self._decayed)
        buffer.mul_(group["momentum"]).add_(d)
        self.params.add_(buffer, alpha=-group["lr"])
        return buffer

    def _bind_to(self, opt: torch.optim.Optimizer) -> tuple:
        """``opt`` with a flat momentum buffer and its views, where its step can run on the flat buffers."""
        groups = opt.param_groups
        group = groups[0]
        params = group["params"]
        grads = [p.grad for p in params]
        flat = (
            type(opt) is torch.optim.SGD and len(groups) == 1 and group["momentum"] > 0
            and group["dampening"] == 0 and not group["nesterov"] and not group["maximize"]
            and not group.get("fused") and not group.get("differentiable")
            and not any(isinstance(group[k], torch.Tensor) for k in ("lr", "momentum", "weight_decay"))
            and _views_of(params, self.params)
            and all(g is not None for g in grads) and _views_of(grads, self.grad)
        )  # fmt: skip
        if not flat:
            return opt, self.params, None, grads
        buffer = torch.zeros_like(self.params)
        views, offset = [], 0
        for p in params:
            views.append(buffer[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
        return opt, buffer, views, grads

    @staticmethod
    def _load(opt: torch.optim.Optimizer, views: list[torch.Tensor]) -> None:
        """Make ``opt``'s momentum buffers ``views``, with the values its state holds (zeros where none)."""
        for p, view in zip(opt.param_groups[0]["params"], views, strict=True):
            state = opt.state[p]
            held = state.get("momentum_buffer")
            if held is None:
                view.zero_()
            elif held is not view:
                view.copy_(held)
            state["momentum_buffer"] = view


def _views_of(params: list[torch.Tensor], flat: torch.Tensor) -> bool:
    """Whether ``params`` are contiguous views lying one after another over all of ``flat``."""
    offset = 0
    size = flat.element_size()
    for p in params:
        if (p.dtype != flat.dtype or p.device != flat.device or not p.is_contiguous()
                or p.data_ptr() != flat.data_ptr() + offset * size):  # fmt: skip
            return False
        offset += p.numel()
    return offset == flat.numel()


@torch.no_grad()
def write_flat_params(
    flat: torch.Tensor, pulled: torch.Tensor, c: Counters, length: StepLength | None = None
) -> None:
    """Copy ``pulled`` into the flat parameter buffer ``flat`` (every parameter a view of it, see
    :func:`flatten_into`); with ``length``, add the change's length to ``c.path`` as a step would."""
    if length is not None:
        length.before()
    flat.copy_(pulled)
    if length is not None:
        c.path += length.after()


def optimizer_step(
    opt: torch.optim.Optimizer, c: Counters, length: StepLength | None = None, flat: FlatSGD | None = None
) -> None:
    """``opt.step()``, on the flat buffers where ``flat`` can (see :class:`FlatSGD`); with ``length``
    (over the parameters ``opt`` steps), add the step's length ``||w_{t+1} - w_t||`` to ``c.path``:
    read off a flat step's momentum buffer, measured by ``length`` otherwise."""
    if flat is not None and flat.ready(opt):
        buffer = flat.step(opt)
        if length is not None:
            c.path += opt.param_groups[0]["lr"] * float(torch.linalg.vector_norm(buffer))
    elif length is None:
        opt.step()
    else:
        length.before()
        opt.step()
        c.path += length.after()
