"""PyTorch DDP (gloo) baseline: the replicas' model, shards, local batch and steps, trained by
``torch.nn.parallel.DistributedDataParallel``, one rank per Dask worker.

Each rank runs in a process of its own, which a plain Dask task on its worker starts and waits on
(:func:`~adass.runtime.cluster.rank_process.run_rank_process`): gloo's threads run the communication
hook's Python callbacks, and inside the worker they held its GIL away from the event loop until the
scheduler took the worker for lost. The rendezvous still travels over Dask, relayed by the task.

Every rank builds the same state an :class:`~adass.engine.Engine` replica holds (model from the run
seed, its shard, its sampler's visiting order, the optimizer), so a DDP run and an ADASS run with
``sampler=full`` do the same arithmetic up to the order of floating-point sums. A step is timed over
forward + backward, inside which DDP's hooks all-reduce the gradients; the optimizer step is left
out, as in the replicas' ``compute_s + comm_s``.

DDP's own gradient compression runs through a communication hook (``HOOKS``): ``fp32`` (none, plain
all-reduce), ``fp16`` (``fp16_compress_hook``) and ``powersgd:rank=R`` (``powerSGD_hook`` with error
feedback and warm start, compressing from the second step on).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
import torch.distributed as dist
from distributed import as_completed, get_worker
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

from ...allocator import keep_freed_memory
from ...config import RunConfig
from ...data import load_dataset
from ...devices import local_device
from ...engine import Engine, ReplicaState, TorchAgreement, set_lr
from ...registry import SpecError
from ...runtime.cluster import ClusterHandle
from ...runtime.cluster.bootstrap import destroy_group, init_group
from ...runtime.cluster.rank_process import run_rank_process
from ...runtime.cluster.rendezvous import KeyValue

CLIENT_GRACE_S = 30.0
#: steps of plain all-reduce before ``powerSGD_hook`` compresses (its ``start_powerSGD_iter``: the
#: least it allows with error feedback and warm start)
POWERSGD_START_STEP = 2

__all__ = [
    "CLIENT_GRACE_S",
    "HOOKS",
    "POWERSGD_START_STEP",
    "DDPResult",
    "attach_hook",
    "ddp_rank",
    "ddp_rank_process",
    "ddp_result",
    "parse_hook",
    "train_ddp",
]


def _fp16(model: DistributedDataParallel, args: dict[str, str], seed: int) -> None:
    model.register_comm_hook(None, default_hooks.fp16_compress_hook)


def _powersgd(model: DistributedDataParallel, args: dict[str, str], seed: int) -> None:
    state = powersgd.PowerSGDState(
        process_group=None,
        matrix_approximation_rank=int(args.get("rank", "1")),
        start_powerSGD_iter=POWERSGD_START_STEP,
        random_seed=seed,  # its first Q is drawn from the run's seed, as the ring codec's is
    )
    model.register_comm_hook(state, powersgd.powerSGD_hook)


# hook name -> attach(model, args); ``fp32`` leaves DDP's own all-reduce in place
HOOKS: dict[str, Callable[[DistributedDataParallel, dict[str, str], int], None]] = {
    "fp32": lambda model, args, seed: None,
    "fp16": _fp16,
    "powersgd": _powersgd,
}


def parse_hook(spec: str) -> tuple[str, dict[str, str]]:
    """``powersgd:rank=4`` -> ``("powersgd", {"rank": "4"})``, checked against ``HOOKS``.

    Raises
    ------
    SpecError
        An unknown hook name or argument.
    """
    name, _, rest = spec.partition(":")
    items = [item.split("=", 1) for item in rest.split(",") if item]
    args = {item[0]: item[1] for item in items if len(item) == 2}
    allowed = {"powersgd": {"rank"}}.get(name, set())
    if (
        name not in HOOKS
        or set(args) - allowed
        or len(args) != len(items)
        or not all(v.isdigit() for v in args.values())
    ):
        raise SpecError(f"DDP hook: {spec!r} is not allowed; expected fp32, fp16 or powersgd:rank=R")
    return name, args


def attach_hook(model: DistributedDataParallel, spec: str, seed: int = 0) -> None:
    """Register the communication hook ``spec`` (``fp32``, ``fp16``, ``powersgd:rank=4``) on ``model``;
    a hook that draws (PowerSGD's first ``Q``) draws from ``seed``."""
    name, args = parse_hook(spec)
    HOOKS[name](model, args, seed)


@dataclass
class DDPResult:
    """A finished DDP run.

    Attributes
    ----------
    steps : DataFrame
        One row per rank and step: ``epoch, step, rank, samples, loss, step_s``.
    epoch_s : list of float
        Per epoch, the slowest rank's time for the epoch's loop (optimizer steps included).
    test_acc, test_loss : float
        Rank 0's evaluation after the last epoch.
    """

    steps: pd.DataFrame
    epoch_s: list[float] = field(default_factory=list)
    test_acc: float = float("nan")
    test_loss: float = float("nan")


def _local_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Forward and backward on one local batch (the all-reduce happens inside ``backward``)."""
    logits = model(x)
    if y.numel() == 0:  # a rank with an empty local batch still joins the all-reduce, with zeros
        loss = logits.sum() * 0.0
    else:
        loss = F.cross_entropy(logits, y)
    loss.backward()
    return float(loss.detach())


def ddp_rank(config: dict[str, dict[str, Any]], rank: int, world: int, store: dist.Store, timeout_s: float,
             hook: str, host: str) -> dict[str, Any]:  # fmt: skip
    """Train one DDP rank for ``config``'s epochs, in a process of its own (one per rank).

    Parameters
    ----------
    config : dict
        ``RunConfig.to_dict()`` of the run (sampler ``full`` for a like-for-like baseline).
    rank, world : int
        This rank and the number of ranks (``config``'s workers).
    store : torch.distributed.Store
        The run's rendezvous: a :class:`~adass.runtime.cluster.rank_process.RelayedStore` to the run's
        actor on Dask, or a TCPStore at rank 0 (the lab's torchrun-style ranks).
    timeout_s : float
        How long a rank waits for the others.
    hook : str
        DDP communication hook (``HOOKS``): ``fp32``, ``fp16`` or ``powersgd:rank=R``.
    host : str
        The address whose interface the group binds (the rank's Dask worker's, or its lab host's).

    Returns
    -------
    dict
        ``steps`` (list of row dicts), ``epoch_s`` (this rank's loop time per epoch) and, on rank 0,
        ``test_loss`` and ``test_acc``.
    """
    torch.set_num_threads(1)  # as the replicas do: one worker thread per process
    keep_freed_memory()  # and the same allocator setting
    run = RunConfig.from_dict(config)
    o = run.optim
    device = local_device(run.cluster.device)  # resolved with the workers by the caller
    init_group(store, rank, world, timeout_s, host=host, bind=run.cluster.bind or None, device=device)
    try:
        state = ReplicaState.shard(run, load_dataset(run.data.data, seed=o.seed), rank, world)
        engine = Engine(state, TorchAgreement())
        model = DistributedDataParallel(state.model)  # all-reduces over nccl on CUDA, gloo on the CPU
        attach_hook(model, hook, o.seed)
        rows: list[dict[str, Any]] = []
        epoch_s: list[float] = []
        step = 0
        for epoch in range(o.epochs):
            set_lr(state.optimizer, run, epoch)
            start = time.perf_counter()
            plan = engine.plan(epoch)
            order = engine.selection.indices
            for part in plan.batches:
                idx = order[part]
                t0 = time.perf_counter()
                state.optimizer.zero_grad(set_to_none=False)
                loss = _local_step(model, state.x[idx].to(state.device), state.y[idx].to(state.device))
                step_s = time.perf_counter() - t0
                state.optimizer.step()
                rows.append({"epoch": epoch, "step": step, "rank": rank, "samples": int(idx.numel()),
                             "loss": loss, "step_s": step_s})  # fmt: skip
                step += 1
            epoch_s.append(time.perf_counter() - start)
        report: dict[str, Any] = {"steps": rows, "epoch_s": epoch_s}
        if rank == 0:
            report["test_loss"], report["test_acc"] = engine.evaluate()
        dist.barrier()
        return report
    finally:
        destroy_group()


def ddp_rank_process(config: dict[str, dict[str, Any]], rank: int, world: int, rendezvous: Any,
                     timeout_s: float, hook: str) -> dict[str, Any]:  # fmt: skip
    """A Dask task: :func:`ddp_rank` in a process of its own, bound where this worker lives, its
    rendezvous relayed to the ``rendezvous`` actor; the whole run may take ``timeout_s`` plus
    ``CLIENT_GRACE_S``."""
    host = get_worker().address.split("://")[-1].rsplit(":", 1)[0]
    kwargs = {
        "config": config,
        "rank": rank,
        "world": world,
        "timeout_s": timeout_s,
        "hook": hook,
        "host": host,
    }
    return run_rank_process(ddp_rank, kwargs, rendezvous, timeout_s + CLIENT_GRACE_S)


def train_ddp(config: RunConfig, handle: ClusterHandle, hook: str = "fp32") -> DDPResult:
    """Run ``config`` with PyTorch DDP on the first ``config.cluster.workers`` workers of ``handle``.

    Parameters
    ----------
    config : RunConfig
        Data, model, optimizer and ``workers``; exchange, codec and link are ignored (DDP all-reduces
        over gloo, unthrottled, compressed only by ``hook``).
    handle : ClusterHandle
        An open cluster (left open) with at least ``workers`` workers.
    hook : str
        DDP communication hook (``HOOKS``): ``fp32`` (plain all-reduce), ``fp16``, ``powersgd:rank=R``.

    Returns
    -------
    DDPResult
        Per-step times of every rank, per-epoch times and the final evaluation.
    """
    parse_hook(hook)
    world = config.cluster.workers
    addresses = handle.workers()
    if world < 1 or len(addresses) < world:
        raise SpecError(f"--workers: DDP with {world} ranks needs {max(1, world)} Dask workers; "
                        f"the cluster has {len(addresses)}")  # fmt: skip
    client, timeout_s = handle.client, config.cluster.timeout_s
    rendezvous = client.submit(KeyValue, workers=[addresses[0]], allow_other_workers=False, actor=True,
                               pure=False).result(timeout=timeout_s)  # fmt: skip
    futures = [
        client.submit(
            ddp_rank_process,
            config.to_dict(),
            rank,
            world,
            rendezvous,
            timeout_s,
            hook,
            workers=[address],
            allow_other_workers=False,
            pure=False,
        )  # fmt: skip
        for rank, address in enumerate(addresses[:world])
    ]
    # a rank that fails leaves the others waiting in a collective: its error is the run's, at once;
    # the client waits past the ranks' own timeouts, so a rank's error (naming what it waited for) wins
    for done in as_completed(futures, timeout=timeout_s + 2 * CLIENT_GRACE_S):
        if done.status == "error":
            done.result()
    return ddp_result([f.result() for f in futures], config.optim.epochs)


def ddp_result(reports: list[dict[str, Any]], epochs: int) -> DDPResult:
    """Merge the ranks' reports (rank 0 first), as :func:`ddp_rank` returns them, into one result."""
    steps = pd.DataFrame([row for r in reports for row in r["steps"]])
    epoch_s = [max(r["epoch_s"][e] for r in reports) for e in range(epochs)]
    return DDPResult(steps, epoch_s, reports[0]["test_acc"], reports[0]["test_loss"])
