"""GPUs on Dask: the device a run trains on, decided with its workers, and the kind of embedded cluster.

``--device auto`` trains on CUDA where every worker of the run has a GPU of its own (NCCL needs one
per rank; two workers on one GPU count as lacking one), on the CPU otherwise; ``--device cuda`` where
that does not hold is refused in one line before any actor starts. The embedded cluster is dask-cuda's
``LocalCUDACluster`` (one worker per GPU, each seeing its own as ``cuda``) where dask-cuda is installed
and the machine has a GPU for every worker; Dask's ``LocalCluster`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from distributed import LocalCluster

from ...config import RunConfig
from ...devices import resolve_device
from ...failures import RunFailure
from .waiting import missing_code

__all__ = ["cluster_class", "cuda_everywhere", "device_on_workers", "worker_gpu"]


def worker_gpu() -> str:
    """This process's CUDA device, named so that two processes on one GPU give one name (its UUID);
    ``""`` without CUDA. Run on every worker through ``client.run``."""
    if not torch.cuda.is_available():
        return ""
    index = torch.cuda.current_device()
    return str(getattr(torch.cuda.get_device_properties(index), "uuid", "")) or f"cuda:{index}"


def cuda_everywhere(gpus: Sequence[str]) -> str:
    """What keeps ``gpus`` (every worker's :func:`worker_gpu`, in rank order) from a GPU per worker,
    in words; ``""`` where each has one of its own.

    >>> cuda_everywhere(["a", "b"]), cuda_everywhere(["a", ""]), cuda_everywhere(["a", "a"])
    ('', '1 of 2 workers have no GPU', '2 workers share 1 GPU')
    """
    lacking = sum(1 for g in gpus if not g)
    if lacking:
        return f"{lacking} of {len(gpus)} workers have no GPU"
    distinct = len(set(gpus))
    return "" if distinct == len(gpus) else f"{len(gpus)} workers share {distinct} GPU{'s' * (distinct > 1)}"


def device_on_workers(config: RunConfig, client: Any, addresses: Sequence[str]) -> RunConfig:
    """``config`` with ``--device`` resolved for the workers at ``addresses`` (the run's, in rank
    order), which are asked what GPU each holds; a run on the CPU asks nothing.

    Raises
    ------
    SpecError
        ``--device cuda`` where some worker has no GPU of its own (one line).
    RunFailure
        A worker cannot load the run's code (one line; a restart would not help).
    """
    choice = config.cluster.device
    if choice == "cpu":
        return config
    try:
        answers = client.run(worker_gpu, workers=list(addresses))
    except Exception as err:
        missing = missing_code(err)
        if missing is None:
            raise
        raise RunFailure(f"asking the workers for their GPUs: a worker cannot load the run's code ({missing}); "
                         "every worker needs the same adass, torch and dask as this process") from None  # fmt: skip
    lacking = cuda_everywhere([answers.get(a, "") for a in addresses])
    device = resolve_device(choice, not lacking, lacking)
    return config if device == choice else config.replace(device=device)


def cluster_class(n_workers: int, device: str) -> type:
    """The embedded cluster for ``n_workers`` workers of a run with ``--device device``:
    ``LocalCUDACluster`` where the run may use CUDA, the machine has ``n_workers`` GPUs and
    dask-cuda is installed (imported only then), else ``LocalCluster``."""
    if device == "cpu" or not 0 < n_workers <= torch.cuda.device_count():
        return LocalCluster
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        return LocalCluster
    return LocalCUDACluster
