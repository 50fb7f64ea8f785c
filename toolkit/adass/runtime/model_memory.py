"""Whether a model fits before anything starts: its parameters are counted on the ``meta`` device
(no memory taken), and what the replicas on this host would hold is compared with the memory
available now, so a size within the spec's bounds but far past this machine is refused in one line
instead of failing in an allocation minutes later.
"""

from __future__ import annotations

import psutil
import torch

from ..config import RunConfig
from ..data import Dataset
from ..models import MODELS
from ..registry import SpecError

__all__ = ["BYTES_PER_PARAMETER", "check_model_fits", "parameter_count"]

#: float32 weights, gradient (the flat buffer), momentum, error-feedback residual and the copies the
#: step takes of the parameters (the path length), 4 bytes each
BYTES_PER_PARAMETER = 4 * 6
_GIB = 2**30


def parameter_count(spec: str, shape: tuple[int, ...], classes: int) -> int:
    """Parameters of the model ``spec`` for samples of ``shape`` and ``classes`` outputs (none allocated)."""
    with torch.device("meta"):
        model = MODELS.build(spec, shape=tuple(shape), classes=int(classes))
    return sum(p.numel() for p in model.parameters())


def _replicas_here(config: RunConfig) -> int:
    """Models this host holds: every rank of a run in this process or on the embedded cluster, none
    for a cluster elsewhere (its workers' hosts are not this one)."""
    if config.backend == "dask" and config.cluster.scheduler:
        return 0
    return config.world + config.servers


def check_model_fits(config: RunConfig, dataset: Dataset, share: float = 0.8) -> None:
    """SpecError in one line when the replicas of ``config`` on this host need more than ``share`` of
    the memory available now."""
    replicas = _replicas_here(config)
    if not replicas:
        return
    count = parameter_count(config.model.model, dataset.shape, dataset.classes)
    needed = count * BYTES_PER_PARAMETER * replicas
    available = psutil.virtual_memory().available
    if needed > share * available:
        where = "in this process" if replicas == 1 else f"for {replicas} ranks on this host"
        raise SpecError(
            f"--model: {config.model.model!r} has {count:,} parameters and would need {needed / _GIB:.1f} GiB "
            f"{where}; {available / _GIB:.1f} GiB of memory is available"
        )
