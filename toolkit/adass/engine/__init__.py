"""One training engine for every run: the step kernel, agreements among replicas, the epoch loop,
and the one driver that runs a whole run's epochs over a backend (:mod:`adass.runtime` has them).

A single-process run is an :class:`Engine` in a world of one; a distributed run is P engines, one
per Dask actor, agreeing through torch.distributed; virtual replicas are P engines on threads of
one process. :func:`drive` plans, trains, records, evaluates and checkpoints every one of them.
"""

from .agreement import Agreement, AgreementBoard, InProcAgreement, LocalAgreement, TorchAgreement
from .batches import Split, in_order, spread_evenly
from .checkpoints import (
    Checkpoint,
    check_resume,
    checkpoint_location,
    has_checkpoint,
    read_checkpoint,
    read_checkpoint_state,
    read_state,
    reshard_checkpoint,
    state_bytes,
    state_from_bytes,
    write_state,
)
from .commits import Commit, Commits, EpochResume, host_copy
from .divergence import Divergence, chance_accuracy
from .driver import Backend, Driven, EpochOutcome, drive
from .epoch import EpochPlan, EpochReport
from .joins import EpochRest, RestPart, rest_commits, split_rest
from .live import LiveBatches, RunStore
from .loop import Engine, StepHook
from .records import epoch_eval, new_totals, write_epoch
from .replica import ReplicaState, replica_seed, sampler_layout
from .result import RunResult, Stop, stop_signal
from .server import ShardOptimizer, own_shard
from .step import (
    Counters,
    FlatSGD,
    StepLength,
    backprop_batch,
    evaluate,
    flat_params,
    flatten_into,
    lr_at,
    make_optimizer,
    make_sgd,
    optimizer_step,
    refresh_scores,
    set_lr,
    write_flat_params,
)

__all__ = [
    "Agreement",
    "AgreementBoard",
    "Backend",
    "Checkpoint",
    "Commit",
    "Commits",
    "Counters",
    "Divergence",
    "Driven",
    "Engine",
    "EpochOutcome",
    "EpochPlan",
    "EpochResume",
    "EpochRest",
    "EpochReport",
    "InProcAgreement",
    "LiveBatches",
    "LocalAgreement",
    "ReplicaState",
    "RestPart",
    "RunResult",
    "RunStore",
    "ShardOptimizer",
    "Split",
    "StepHook",
    "FlatSGD",
    "StepLength",
    "Stop",
    "TorchAgreement",
    "backprop_batch",
    "chance_accuracy",
    "check_resume",
    "checkpoint_location",
    "drive",
    "epoch_eval",
    "evaluate",
    "flat_params",
    "flatten_into",
    "in_order",
    "lr_at",
    "make_optimizer",
    "make_sgd",
    "new_totals",
    "optimizer_step",
    "own_shard",
    "has_checkpoint",
    "host_copy",
    "read_checkpoint",
    "read_checkpoint_state",
    "read_state",
    "refresh_scores",
    "replica_seed",
    "reshard_checkpoint",
    "set_lr",
    "rest_commits",
    "sampler_layout",
    "split_rest",
    "spread_evenly",
    "stop_signal",
    "write_epoch",
    "write_flat_params",
    "state_bytes",
    "state_from_bytes",
    "write_state",
]
