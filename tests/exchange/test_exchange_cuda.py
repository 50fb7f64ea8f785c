"""Exchanges reduce gradients on the device they live on: on CUDA every buffer, payload and codec
state stays there, every rank ends with the same bits, and a lossless ring gives the CPU's mean
(marked ``cuda``: skipped without a GPU). The CPU half of each check runs everywhere."""

from __future__ import annotations

import pytest
import torch
from exchange_cases import inproc_steps

from adass.exchange import InProcHub, make_exchange

CASES = [
    ("ring", "fp32"),
    ("ring", "qsgd:bits=8"),
    ("ring:strategy=shared_scale", "qsgd:bits=4"),
    ("ring", "randk:ratio=0.1"),
    ("ring", "sharedk:ratio=0.1"),
    ("ring", "dmc(sharedk:ratio=0.1)"),
    ("ring", "randk:ratio=0.01,scale=false+qsgd:bits=8"),
    ("ps:servers=2", "qsgd:bits=8"),
    ("ps:servers=2,colocated=true", "fp32"),
]
COUNTS = [[1.0, 2.0, 3.0, 4.0]] * 3


def _workers(row: list[torch.Tensor | None]) -> list[torch.Tensor]:
    return [r for r in row if r is not None]  # PS server ranks hold no result


def check_on(device: str, spec: str, codec: str) -> list[list[torch.Tensor]]:
    """Every step's results on ``device``, bit-identical across the workers; returned on the host."""
    steps = inproc_steps(spec, codec, 5003, COUNTS, device=device)
    for row in steps:
        first, *others = _workers(row)
        assert first.device.type == device and torch.isfinite(first).all()
        assert all(torch.equal(first, other) for other in others)
    return [[r.cpu() for r in _workers(row)] for row in steps]


@pytest.mark.parametrize(("spec", "codec"), CASES)
def test_results_stay_on_the_host_for_host_gradients(spec: str, codec: str) -> None:
    check_on("cpu", spec, codec)


@pytest.mark.cuda
@pytest.mark.parametrize(("spec", "codec"), CASES)
def test_cuda_gradients_reduce_on_their_device(spec: str, codec: str) -> None:
    on_gpu = check_on("cuda", spec, codec)
    if codec == "fp32":  # lossless: the CPU's weighted mean (elementwise sums, within rounding)
        on_cpu = check_on("cpu", spec, codec)
        for gpu_row, cpu_row in zip(on_gpu, on_cpu, strict=True):
            assert torch.allclose(gpu_row[0], cpu_row[0], rtol=1e-6, atol=1e-7)


@pytest.mark.cuda
@pytest.mark.parametrize("codec", ["fp32", "qsgd:bits=8"])
def test_in_place_reduce_of_a_cuda_gradient(codec: str) -> None:
    x = torch.linspace(-1, 1, 1001)
    expected = make_exchange("ring", InProcHub(1, timeout_s=10).transport(0), codec, seed=1).reduce(x.clone())
    exchange = make_exchange("ring", InProcHub(1, timeout_s=10).transport(0, device="cuda"), codec, seed=1)
    y = x.cuda()
    result = exchange.reduce(y, out=y)
    assert result is y and y.is_cuda
    assert torch.allclose(y.cpu(), expected, atol=1e-2 if codec != "fp32" else 0.0)
