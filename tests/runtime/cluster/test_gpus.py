"""GPUs on Dask: the run's workers are asked what GPU each holds, ``auto`` takes CUDA only where each
has one of its own, ``cuda`` elsewhere is refused in one line; the embedded cluster is a plain
LocalCluster unless dask-cuda and GPUs for every worker are there."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from distributed import Client, LocalCluster

from adass.config import RunConfig
from adass.registry import SpecError
from adass.runtime.cluster.gpus import cluster_class, cuda_everywhere, device_on_workers, worker_gpu


@pytest.mark.parametrize(
    ("gpus", "lacking"),
    [(["a", "b"], ""), (["a", ""], "1 of 2 workers have no GPU"), (["", ""], "2 of 2 workers have no GPU"),
     (["a", "a", "b"], "3 workers share 2 GPUs"), (["a", "a"], "2 workers share 1 GPU")],
)  # fmt: skip
def test_every_worker_needs_a_gpu_of_its_own(gpus: list[str], lacking: str) -> None:
    assert cuda_everywhere(gpus) == lacking


def test_a_run_on_the_cpu_keeps_a_plain_local_cluster() -> None:
    assert cluster_class(2, "cpu") is LocalCluster


@pytest.mark.skipif(
    torch.cuda.is_available() and importlib.util.find_spec("dask_cuda") is not None,
    reason="a CUDA cluster is due here",
)
def test_without_dask_cuda_or_gpus_the_embedded_cluster_is_a_local_cluster() -> None:
    assert cluster_class(2, "auto") is LocalCluster
    assert cluster_class(2, "cuda") is LocalCluster


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks workers without a GPU")
def test_workers_without_gpus_resolve_auto_to_the_cpu_and_refuse_cuda() -> None:
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0"
    ) as cluster:
        with Client(cluster) as client:
            addresses = sorted(client.scheduler_info()["workers"])
            assert client.run(worker_gpu) == {a: "" for a in addresses}
            config = RunConfig.from_flat(workers=2)
            assert device_on_workers(config, client, addresses).cluster.device == "cpu"
            on_cpu = config.replace(device="cpu")
            assert device_on_workers(on_cpu, client, addresses) is on_cpu  # nothing asked
            external = config.replace(
                scheduler=cluster.scheduler_address, device="cuda"
            )  # checked on the workers
            with pytest.raises(SpecError) as info:
                device_on_workers(external, client, addresses)
    assert str(info.value) == (
        "--device: 'cuda' needs a CUDA GPU for every replica; 2 of 2 workers have no GPU; allowed here: auto, cpu"
    )
