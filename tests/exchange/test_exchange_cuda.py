"""Exchanges take gradients that live on CUDA: they reduce a host copy and hand the result back on
the gradient's device, with the same bits as the CPU run (needs a GPU; skipped without one)."""

from __future__ import annotations

import exchange_cases
import pytest
import torch
from exchange_cases import inproc_steps

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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(("spec", "codec"), CASES)
def test_cuda_gradients_reduce_like_cpu_ones(spec: str, codec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = [[1.0, 2.0, 3.0, 4.0]] * 3
    on_cpu = inproc_steps(spec, codec, 5003, counts)
    host_grads = exchange_cases.grads
    monkeypatch.setattr(
        exchange_cases, "grads", lambda w, n, seed=0: [g.cuda() for g in host_grads(w, n, seed)]
    )
    on_gpu = inproc_steps(spec, codec, 5003, counts)
    for gpu_row, cpu_row in zip(on_gpu, on_cpu, strict=True):
        for gpu, cpu in zip(gpu_row, cpu_row, strict=True):
            if cpu is None:  # a PS server rank
                continue
            assert gpu.is_cuda
            assert torch.equal(gpu.cpu(), cpu)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_in_place_reduce_of_a_cuda_gradient() -> None:
    from adass.exchange import InProcHub, make_exchange

    exchange = make_exchange("ring", InProcHub(1, timeout_s=10).transport(0), "qsgd:bits=8", seed=1)
    x = torch.linspace(-1, 1, 1001)
    expected = exchange.reduce(x.clone())
    again = make_exchange("ring", InProcHub(1, timeout_s=10).transport(0), "qsgd:bits=8", seed=1)
    y = x.cuda()
    result = again.reduce(y, out=y)
    assert result is y and y.is_cuda and torch.equal(y.cpu(), expected)
