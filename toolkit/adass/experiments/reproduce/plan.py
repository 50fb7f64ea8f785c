"""How big one ``adass reproduce`` is: data, epochs, seeds, replica counts and the arm lists.

``FULL`` is the run behind docs/results.md; ``QUICK`` (``--quick``) is a smoke run sized for ten minutes
on two cores; ``TINY`` (environment variable ``ADASS_REPRODUCE_SIZES=tiny``) is the test suite's, with
only arms whose codecs exist in every build and one PowerSGD rank. The command path is the same for all three.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from ...registry import SpecError
from ..bench.netlab_dml import PSGD_RANKS
from ..bench.samplers import QUICK as SAMPLERS_QUICK
from ..bench.samplers import SETTINGS as SAMPLERS_SETTINGS
from . import arms

__all__ = ["FULL", "PLANS", "QUICK", "SIZES_ENV", "TINY", "Plan", "plan_for"]

SIZES_ENV = "ADASS_REPRODUCE_SIZES"


@dataclass(frozen=True)
class Plan:
    """The sizes and arms of one invocation.

    Attributes
    ----------
    name : str
        ``full``, ``quick`` or ``tiny`` (shown in the report).
    seeds : int
        Seeds of every arm (0 .. seeds-1); means and standard errors are over them.
    sampler_settings : dict
        Claim 1, samplers: name -> run options (data, model, lr, epochs), as ``adass bench samplers``.
    setting : dict
        Run options of the distributed and replica-grid runs (data, model, batch, lr, epochs).
    adass : str
        The ADASS sampler spec of the distributed runs.
    workers : tuple of int
        Real processes P (Dask LocalCluster).
    sim_workers : tuple of int
        Virtual replicas P of the simulated scaling (PS needs one thread more: at most 63).
    sim_epochs : int
        Epochs of each simulated scaling run.
    grid_workers : int
        Virtual replicas of the accuracy grids of claims 2 and 3 (ring).
    grid_settings : dict
        Name -> run options of each data set the grids of claims 2 and 3 run on (each gets its own
        verdict); empty: ``setting`` alone (see :attr:`grids`).
    rs_settings : dict
        Name -> run options of more settings for claim 3's grid alone (see :meth:`sparsify`).
    psgd_ranks : tuple of int
        Ranks of claim 1's PowerSGD on the ring and of torch's ``powerSGD_hook`` beside it (those of
        ``adass bench dml --netlab``).
    psgd_adass_rank : int
        Rank of the PowerSGD that ``adass`` runs under beside ``adass`` in fp32.
    """

    name: str
    seeds: int
    sampler_settings: dict[str, dict]
    setting: dict
    adass: str
    workers: tuple[int, ...]
    sim_workers: tuple[int, ...]
    sim_epochs: int
    grid_workers: int = 4
    samplers: list[str] = field(default_factory=lambda: list(arms.SAMPLERS))
    dml_links: list[str] = field(default_factory=lambda: list(arms.DML_LINKS))
    q_bits: list[int] = field(default_factory=lambda: list(arms.Q_BITS))
    q_strategies: list[str] = field(default_factory=lambda: list(arms.Q_STRATEGIES))
    q_codecs: dict[str, str] = field(default_factory=lambda: dict(arms.Q_CODECS))
    rs_ratios: list[float] = field(default_factory=lambda: list(arms.RS_RATIOS))
    rs_arms: list[tuple[str, str, str]] = field(default_factory=lambda: list(arms.RS_ARMS))
    grid_settings: dict[str, dict] = field(default_factory=dict)
    rs_settings: dict[str, dict] = field(default_factory=dict)
    psgd_ranks: tuple[int, ...] = PSGD_RANKS
    psgd_adass_rank: int = 4

    @property
    def grids(self) -> dict[str, dict]:
        """The grid settings, or ``setting`` named after its data set's kind (``synthetic``)."""
        return self.grid_settings or {self.setting["data"].split(":")[0]: self.setting}

    def sparsify(self) -> Plan:
        """This plan with claim 3's extra settings after the shared ones."""
        if not self.rs_settings:
            return self
        return replace(self, grid_settings={**self.grids, **self.rs_settings})


MNIST5K = {"data": "mnist5k", "model": "mlp:hidden=128", "batch_size": 64, "lr": 0.05, "epochs": 10}
#: the hard synthetic set of ``adass bench samplers`` on the grids' P=4 ring. Measured fp32 runs:
#: 0.885-0.889 test accuracy over seeds 0-2 after 10 epochs at lr 0.05 (about 5 s on one core), the
#: same within 0.3 points after 20 epochs or at lr 0.1, and 0.886 at the bench's lr 0.01 for 30 epochs
SYNTHETIC_HARD = {"data": SAMPLERS_SETTINGS["synthetic-hard"]["data"], "model": "mlp:hidden=128",
                  "batch_size": 64, "lr": 0.05, "epochs": 10}  # fmt: skip
#: the same hard synthetic set under an MLP eight times as wide (19,464 parameters against 2,440), for
#: claim 3 alone: at ratio 0.01 each of the four chunks of the narrow model keeps about six values a
#: step, of this one about 49. Measured fp32: 0.888 over seeds 0-2 (the narrow model: 0.886)
SYNTHETIC_HARD_WIDE = {**SYNTHETIC_HARD, "model": "mlp:hidden=1024"}
FULL = Plan(
    "full", 5, dict(SAMPLERS_SETTINGS), MNIST5K, "adass:eps=0.2,warmup=2,final=1,resample=0,min_keep=0.1", (2, 4), (2, 4, 8, 16, 32, 63), 1,
    grid_settings={"mnist5k": MNIST5K, "synthetic-hard": SYNTHETIC_HARD},
    rs_settings={"synthetic-hard-wide": SYNTHETIC_HARD_WIDE},
)  # fmt: skip
QUICK = Plan(
    "quick", 2, {name: {"lr": 0.1, **o} for name, o in SAMPLERS_QUICK.items()},
    {"data": "synthetic:n=960,d=12,classes=4,test=240", "model": "mlp:hidden=32", "batch_size": 32,
     "lr": 0.1, "epochs": 4},
    "adass:eps=0.2,warmup=1,final=1,resample=0,min_keep=0.1", (2,), (2, 4, 8), 1, dml_links=["none"],
)  # fmt: skip
TINY = Plan(
    "tiny", 1, {"synthetic-tiny": {"data": "synthetic:n=120,d=6,classes=3,test=60", "model": "mlp:hidden=8",
                                   "lr": 0.1, "epochs": 2}},
    {"data": "synthetic:n=160,d=6,classes=3,test=60", "model": "mlp:hidden=8", "batch_size": 32,
     "lr": 0.1, "epochs": 2},
    "adass:eps=0.2,warmup=0,final=0,resample=0,min_keep=0.1", (2,), (2, 4), 1, grid_workers=2, dml_links=["none"], q_bits=[2, 8],
    q_strategies=["shared_scale"], rs_ratios=[0.1, 0.01], rs_arms=list(arms.RS_ARMS_NOW),
    psgd_ranks=(1,), psgd_adass_rank=1,  # rank 4 compresses no layer of an 8-unit MLP
)  # fmt: skip
PLANS: dict[str, Plan] = {p.name: p for p in (FULL, QUICK, TINY)}


def plan_for(quick: bool) -> Plan:
    """``QUICK`` or ``FULL``, unless ``ADASS_REPRODUCE_SIZES`` names a plan (the tests' ``tiny``).

    Raises
    ------
    SpecError
        The variable names no plan.
    """
    chosen = os.environ.get(SIZES_ENV, "")
    if not chosen:
        return QUICK if quick else FULL
    if chosen not in PLANS:
        raise SpecError(f"{SIZES_ENV}: {chosen!r} is not allowed; expected one of {'|'.join(PLANS)}")
    return PLANS[chosen]
