"""``--device``: auto takes CUDA only where every replica has a GPU, cuda elsewhere is refused in
one line, and the process group's backend follows the device."""

from __future__ import annotations

import pytest
import torch

from adass.config import RunConfig
from adass.devices import check_device, group_backend, local_device, resolve_device
from adass.registry import SpecError

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")


@pytest.mark.parametrize(
    ("choice", "everywhere", "device"),
    [
        ("auto", False, "cpu"),
        ("auto", True, "cuda"),
        ("cpu", True, "cpu"),
        ("cpu", False, "cpu"),
        ("cuda", True, "cuda"),
    ],
)
def test_a_choice_resolves_to_a_device(choice: str, everywhere: bool, device: str) -> None:
    assert resolve_device(choice, everywhere) == device


def test_cuda_without_a_gpu_for_every_replica_is_refused_in_one_line() -> None:
    with pytest.raises(SpecError) as info:
        resolve_device("cuda", False, "1 of 2 workers have no GPU")
    message = str(info.value)
    assert message.startswith("--device: 'cuda'") and "1 of 2 workers have no GPU" in message
    assert "allowed here: auto, cpu" in message and "\n" not in message


def test_an_unknown_device_is_refused() -> None:
    with pytest.raises(SpecError, match="--device: 'tpu' is not a device; allowed: auto, cpu, cuda"):
        resolve_device("tpu", True)


def test_the_group_backend_follows_the_device() -> None:
    assert group_backend("cpu") == "gloo"
    assert group_backend("cuda") == "cpu:gloo,cuda:nccl"  # host tensors (frame heads) keep gloo


def test_the_option_is_a_run_option_with_auto_by_default() -> None:
    assert RunConfig.from_flat().cluster.device == "auto"
    assert RunConfig.from_flat(device="cpu", replicas=2).cluster.device == "cpu"


@NO_CUDA
def test_cuda_on_this_machine_is_refused_before_anything_starts() -> None:
    assert local_device("auto") == "cpu"
    with pytest.raises(SpecError, match="this machine has none"):
        check_device("cuda")
    for backend in ({}, {"replicas": 2}, {"workers": 2}):
        with pytest.raises(SpecError, match="^--device: 'cuda' needs a CUDA GPU"):
            RunConfig.from_flat(device="cuda", **backend)
