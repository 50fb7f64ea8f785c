"""The sizes of ``adass bench dml``: a full plan and a quick smoke plan, which part (c) sizes itself from too."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FULL", "QUICK", "Plan"]


@dataclass(frozen=True)
class Plan:
    """Sizes of one benchmark invocation.

    Attributes
    ----------
    setting : dict
        Run options shared by every arm (data, model, batch, lr, epochs).
    workers : tuple of int
        Replica counts P.
    adass : str
        Sampler spec of part (b); ``adass_epochs`` long (it needs epochs past warm-up and final).
    adass_seeds : tuple of int
        Seeds of part (b): every run of it is repeated with each, and compared seed by seed.
    ddp_pairs : int
        Alternating rounds of DDP, ring fp32 and PS fp32 (no link) per P, for the ring's step-time
        ratio to DDP and its epoch-time ratio to PS.
    warm_up : bool
        Run one untimed distributed epoch first, so no arm pays the workers' first-use costs.
    """

    setting: dict
    workers: tuple[int, ...]
    adass: str
    adass_epochs: int
    adass_seeds: tuple[int, ...]
    ddp_pairs: int
    warm_up: bool


FULL = Plan({"data": "mnist5k", "model": "mlp:hidden=128", "batch_size": 64, "lr": 0.05, "epochs": 3},
            (2, 4), "adass:eps=0.3,warmup=1,final=1", 6, tuple(range(10)), 5, True)  # fmt: skip
QUICK = Plan({"data": "synthetic:n=480,d=8,classes=3,test=120", "model": "mlp:hidden=16", "batch_size": 32,
              "lr": 0.1, "epochs": 1},
             (2,), "adass:eps=0.3,warmup=0,final=0", 2, (0, 1), 1, False)  # fmt: skip
