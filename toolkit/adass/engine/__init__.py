"""One training engine for every run: the step kernel, agreements among replicas, the epoch loop,
and in-process virtual replicas.

A single-process run is an :class:`Engine` in a world of one (``adass.trainer.train``); a
distributed run is P engines, one per Dask actor, agreeing through torch.distributed; a simulated
run is P engines on threads of one process (:func:`simulate_run`).
"""

from .agreement import Agreement, AgreementBoard, InProcAgreement, LocalAgreement, TorchAgreement
from .batches import Split, in_order, spread_evenly
from .epoch import EpochPlan, EpochReport
from .live import LiveBatches
from .loop import Engine, StepHook
from .records import epoch_eval, new_totals, write_epoch
from .replica import ReplicaState, replica_seed
from .result import RunResult, Stop, stop_signal
from .server import ShardOptimizer, own_shard
from .step import (
    Counters,
    backprop_batch,
    evaluate,
    flat_params,
    lr_at,
    make_optimizer,
    make_sgd,
    optimizer_step,
    refresh_scores,
    set_lr,
    write_flat_params,
)
from .virtual import colocated_shards, server_count, simulate_run

__all__ = [
    "Agreement",
    "AgreementBoard",
    "Counters",
    "Engine",
    "EpochPlan",
    "EpochReport",
    "InProcAgreement",
    "LiveBatches",
    "LocalAgreement",
    "ReplicaState",
    "RunResult",
    "ShardOptimizer",
    "Split",
    "StepHook",
    "Stop",
    "TorchAgreement",
    "backprop_batch",
    "colocated_shards",
    "epoch_eval",
    "evaluate",
    "flat_params",
    "in_order",
    "lr_at",
    "make_optimizer",
    "make_sgd",
    "new_totals",
    "optimizer_step",
    "own_shard",
    "refresh_scores",
    "replica_seed",
    "server_count",
    "set_lr",
    "simulate_run",
    "spread_evenly",
    "stop_signal",
    "write_epoch",
    "write_flat_params",
]
