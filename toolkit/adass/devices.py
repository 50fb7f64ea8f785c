"""Where replicas train (``--device auto|cpu|cuda``) and which process-group backend that implies.

One rule for every backend: ``auto`` trains on CUDA where every replica has a GPU of its own, on
the CPU otherwise; ``cuda`` where that does not hold is refused in one line before anything starts.
The code that trains is the same on both: tensors follow the device they are given.

>>> resolve_device("auto", cuda_everywhere=False)
'cpu'
>>> group_backend("cuda"), group_backend("cpu")
('cpu:gloo,cuda:nccl', 'gloo')
"""

from __future__ import annotations

import torch

from .options import SpecError

__all__ = ["DEVICES", "check_device", "group_backend", "local_device", "resolve_device", "run_device"]

#: the values of ``--device``
DEVICES = ("auto", "cpu", "cuda")


def resolve_device(choice: str, cuda_everywhere: bool, lacking: str = "") -> str:
    """The device a run trains on: ``"cpu"`` or ``"cuda"``.

    Parameters
    ----------
    choice : {"auto", "cpu", "cuda"}
        The ``--device`` option.
    cuda_everywhere : bool
        Whether every replica of the run has a GPU of its own.
    lacking : str
        What lacks a GPU, in words, for the message (``this machine has none`` if empty).

    Raises
    ------
    SpecError
        ``cuda`` without a GPU for every replica, or a value outside :data:`DEVICES` (one line).
    """
    if choice not in DEVICES:
        raise SpecError(f"--device: {choice!r} is not a device; allowed: {', '.join(DEVICES)}")
    if choice == "auto":
        return "cuda" if cuda_everywhere else "cpu"
    if choice == "cuda" and not cuda_everywhere:
        raise SpecError(f"--device: 'cuda' needs a CUDA GPU for every replica; "
                        f"{lacking or 'this machine has none'}; allowed here: auto, cpu")  # fmt: skip
    return choice


def check_device(choice: str) -> None:
    """Refuse ``--device cuda`` on a machine without CUDA (one line); other values pass."""
    if choice == "cuda":
        resolve_device(choice, torch.cuda.is_available())


def local_device(choice: str) -> str:
    """:func:`resolve_device` for replicas in this process (the local and threads backends share
    its one GPU; a Dask run resolves ``auto`` with its workers instead)."""
    return resolve_device(choice, torch.cuda.is_available())


def run_device(choice: str) -> torch.device:
    """The ``torch.device`` a replica of a run with ``--device choice`` trains on."""
    return torch.device(local_device(choice))


def group_backend(device: str) -> str:
    """The torch.distributed backend of a run on ``device``: nccl moves CUDA tensors where every
    rank is on CUDA, gloo keeps the CPU tensors (frame heads, agreements) beside it; gloo alone for
    a run on the CPU."""
    return "cpu:gloo,cuda:nccl" if device == "cuda" else "gloo"
