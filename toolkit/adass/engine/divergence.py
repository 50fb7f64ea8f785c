"""Divergence whose numbers stay finite: a training loss far past the run's start, or test accuracy
at chance epoch after epoch; the driver checks both after every epoch's evaluation.

Non-finite losses are the engine's to catch, step by step (``--max-nonfinite``); a run whose loss
only grows huge (``--lr 100`` on mnist5k: 1.5e25 in its first epoch) or whose model fell dead
(``--lr 1``: every prediction one class, the loss back at ln(classes)) stays finite and used to end
with exit 0. Both stop it with :class:`~adass.failures.Diverged` in one line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..failures import Diverged
from ..metrics import EvalRecord, StepRecord

__all__ = ["CHANCE_MARGIN", "CHANCE_WARMUP", "Divergence", "chance_accuracy", "start_loss"]

#: how far above chance an accuracy may lie and still count as chance: a model that ignores its
#: input scores the largest class's share at best, and on a test set of 1000 samples a guesser's
#: accuracy wanders by about 0.01 (one standard error) around its expectation
CHANCE_MARGIN = 0.02
#: epochs whose accuracy is not held against the run: a healthy model may still sit at chance in
#: its first epochs (a small learning rate, a warm-up schedule, a sampler's warm-up)
CHANCE_WARMUP = 2
#: the keys the check keeps in the run's totals, so that a resumed run goes on with them
START_KEY, CHANCE_KEY = "start_loss", "chance_epochs_in_row"


def chance_accuracy(y_test: torch.Tensor, classes: int) -> float | None:
    """The test accuracy of a model that ignores its input: the largest class's share of the test
    labels (at least ``1 / classes``); None for an empty test set."""
    if y_test.numel() == 0:
        return None
    counts = torch.bincount(y_test.reshape(-1).long(), minlength=max(1, classes))
    return max(float(counts.max()) / y_test.numel(), 1.0 / max(1, classes))


def start_loss(steps: Iterable[Mapping[str, Any]]) -> float | None:
    """The untrained model's loss: every rank's first step with samples and a finite loss (computed
    before any update), their losses averaged by samples; None when no such step is among ``steps``.

    ``steps`` are StepRecord rows (``rank``, ``step``, ``samples``, ``loss``) of the run's first epoch.
    """
    first: dict[int, Mapping[str, Any]] = {}
    for row in steps:
        if row["samples"] > 0 and math.isfinite(row["loss"]):
            rank = int(row["rank"])
            if rank not in first or row["step"] < first[rank]["step"]:
                first[rank] = row
    samples = sum(row["samples"] for row in first.values())
    return sum(row["loss"] * row["samples"] for row in first.values()) / samples if samples else None


def _recorded_start(sink: Any) -> float | None:
    """The start loss from the step records a resumed run's sink holds (checkpoints written before
    the totals kept it); None where the sink keeps no records or they lack the first epoch."""
    frame = getattr(sink, "frame", None)
    if frame is None:
        return None
    steps = frame(StepRecord)
    if not len(steps):
        return None
    return start_loss(steps[steps["epoch"] == 0].to_dict("records"))


@dataclass
class Divergence:
    """The two checks of one run, as ``--diverge-factor`` and ``--chance-epochs`` set them.

    Parameters
    ----------
    factor : float
        Stop when an epoch's training loss exceeds ``factor`` times the run's start loss; 0: never.
    chance_epochs : int
        Stop when test accuracy stays at chance this many epochs in a row (epochs from
        ``CHANCE_WARMUP`` on); 0: never.
    chance : float or None
        The chance accuracy of the test set (:func:`chance_accuracy`); None: never.

    Notes
    -----
    The yardstick of the loss is the run's first step, not its first epoch: the first step's loss
    is taken before any update, so it is the untrained model's (about ln(classes)) however badly
    the run goes on, while a learning rate far too high blows up within the first epoch and would
    move a first epoch's mean with it (mnist5k at ``--lr 100``: 1.5e25). Against it stands the
    epoch's mean, not a single step, whose loss may spike on one hard batch without the run being
    lost. A healthy epoch's mean lies below its start (samplers that keep only hard samples report
    those samples' loss, a few times the mean at most), so the default of 1000 leaves a wide margin
    and still stops a run that blew up by orders of magnitude at its first epoch's end.
    """

    factor: float
    chance_epochs: int
    chance: float | None

    def check(self, epoch: int, steps: Sequence[Mapping[str, Any]], record: EvalRecord,
              totals: dict[str, float], sink: Any = None) -> None:  # fmt: skip
        """Update ``totals`` with the epoch (``steps``: its StepRecord rows) and raise Diverged in one
        line when either check trips."""
        if START_KEY not in totals:  # the run's first epoch, or a resume from a checkpoint without it
            start = start_loss(steps) if epoch == 0 else _recorded_start(sink)
            if start is not None:
                totals[START_KEY] = start
        start = totals.get(START_KEY)
        loss = record.train_loss
        if self.factor and start is not None and start > 0 and loss > self.factor * start:
            raise Diverged(f"epoch {epoch}: the training loss grew to {loss:.3g}, over {self.factor:g}x its "
                           f"first step's {start:.3g} (--diverge-factor {self.factor:g}); lower --lr or check "
                           "the data")  # fmt: skip
        if not self.chance_epochs or self.chance is None or epoch < CHANCE_WARMUP:
            return
        at_chance = record.test_acc <= self.chance + CHANCE_MARGIN
        in_row = totals.get(CHANCE_KEY, 0.0) + 1 if at_chance else 0.0
        totals[CHANCE_KEY] = in_row
        if in_row >= self.chance_epochs:
            raise Diverged(f"epoch {epoch}: test accuracy {record.test_acc:.3f} has been at chance (at most "
                           f"{self.chance:.3f}, the largest class's share, + {CHANCE_MARGIN:g}) for {int(in_row)} "
                           f"epochs in a row (--chance-epochs {self.chance_epochs}); lower --lr or check the "
                           "data")  # fmt: skip
