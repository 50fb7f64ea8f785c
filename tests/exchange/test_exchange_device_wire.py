"""Gradients on a device cross real processes: the ring's bodies travel on the device where the
group carries it (CUDA over nccl) and through host copies where it does not (gloo), and the results
are the same bits on every rank, on the gradient's device. The CPU case runs everywhere; the CUDA
cases are marked ``cuda`` (nccl needs two GPUs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributed as dist
from exchange_cases import grads, ring_on_device, weighted_mean

from adass.devices import group_backend
from adass.exchange.transport.gloo import wire_device
from adass.runtime.launch import run_processes

CODECS = ["fp32", "qsgd:bits=8", "randk:ratio=0.1"]
N = 3000


def wire_of(rank: int, world: int, devices: list[str]) -> list[str]:
    """In a spawned process of a gloo group: where bodies of a transport on each device travel."""
    return [str(wire_device(None, torch.device(d))) for d in devices]


def test_a_gloo_group_carries_every_body_on_the_host() -> None:
    # torch.device("cuda") names a device without needing one: the choice is the group's alone
    [wires] = run_processes(wire_of, 1, (["cpu", "cuda", "cuda:1"],), timeout_s=60)
    assert wires == ["cpu", "cpu", "cpu"]


def _check(results: list[dict], placement: str, world: int) -> None:
    device = "cpu" if placement == "cpu" else "cuda"
    wire = "cuda" if placement == "nccl" else "cpu"
    mean = weighted_mean(grads(world, N, seed=2), [float(r + 1) for r in range(world)]).numpy()
    for codec in CODECS:
        first = results[0][codec]
        for r in results:
            got = r[codec]
            assert got["device"].split(":")[0] == device and got["wire"].split(":")[0] == wire, codec
            for step in ("result", "in_place"):  # a second step, in place (its weights rescale anew)
                assert np.array_equal(got[step], first[step]), (codec, step)
        if codec == "fp32":
            for step in ("result", "in_place"):
                np.testing.assert_allclose(first[step], mean, rtol=1e-5, atol=1e-6)


def test_a_ring_on_the_host_over_gloo() -> None:
    results = run_processes(ring_on_device, 2, (N, CODECS, "cpu"), timeout_s=90)
    _check(results, "cpu", 2)


@pytest.mark.cuda
def test_cuda_gradients_cross_a_gloo_group_through_host_copies() -> None:
    results = run_processes(ring_on_device, 2, (N, CODECS, "cuda"), timeout_s=120)
    _check(results, "cuda", 2)


@pytest.mark.cuda
@pytest.mark.skipif(
    torch.cuda.device_count() < 2 or not dist.is_nccl_available(), reason="nccl needs two GPUs"
)
def test_cuda_gradients_cross_an_nccl_group_on_the_device() -> None:
    results = run_processes(
        ring_on_device, 2, (N, CODECS, "nccl"), timeout_s=180, backend=group_backend("cuda")
    )
    _check(results, "nccl", 2)
