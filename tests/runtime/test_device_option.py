"""``--device``: on a machine without a GPU, ``cpu`` and ``auto`` train the very parameters a run
without the option trains (one model, and two replicas on a lossy ring and on a parameter server);
a resume may move a run to another device; on CUDA a run matches the CPU's within rounding
(marked ``cuda``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from adass.config import RunConfig
from adass.runtime import run

FLAT = {"data": "synthetic:n=240,d=6,classes=3,noise=0.0,hard=0.2,test=60", "model": "mlp:hidden=16",
        "sampler": "adass:eps=0.3,warmup=1,final=0", "epochs": 3, "batch_size": 32, "seed": 3, "threads": 1}  # fmt: skip
WORLDS = {
    "one model": {},
    "ring of 2": {"replicas": 2, "codec": "qsgd:bits=8"},
    "ps of 2": {"replicas": 2, "exchange": "ps:servers=1,update=server", "sampler": "full"},
}


def parameters(**changes) -> list[list[torch.Tensor]]:
    """Every replica's final parameters (host copies) of a short run of ``FLAT`` with ``changes``."""
    result = run(RunConfig.from_flat(**{**FLAT, **changes}), selection_records=False)
    return result.extra["parameters"]


def same_bits(a: list[list[torch.Tensor]], b: list[list[torch.Tensor]]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(torch.equal(p, q) for p, q in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="auto takes the GPU where there is one")
@pytest.mark.parametrize("world", WORLDS)
def test_cpu_and_auto_train_the_parameters_of_a_run_without_the_option(world: str) -> None:
    without = parameters(**WORLDS[world])
    assert same_bits(parameters(**WORLDS[world], device="cpu"), without)
    assert same_bits(parameters(**WORLDS[world], device="auto"), without)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "adass.cli", *args], capture_output=True, text=True, timeout=300
    )


def flags(**changes) -> list[str]:
    out = []
    for key, value in {**FLAT, **changes}.items():
        out += [f"--{key.replace('_', '-')}", str(value)]
    return out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_the_command_refuses_cuda_without_a_gpu_in_one_line(tmp_path) -> None:
    done = cli("train", *flags(device="cuda"), "--out", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--device: 'cuda' needs a CUDA GPU" in lines[0]
    assert not (tmp_path / "run").exists()  # nothing started, nothing written


def test_a_resume_may_change_the_device(tmp_path) -> None:
    out = str(tmp_path / "run")
    assert cli("train", *flags(epochs=1, device="cpu"), "--out", out, "--quiet").returncode == 0
    done = cli("train", "--resume", out, "--epochs", "2", "--device", "auto", "--quiet")
    assert done.returncode == 0, done.stderr


def _close(a: list[list[torch.Tensor]], b: list[list[torch.Tensor]]) -> bool:
    return all(torch.allclose(p, q, rtol=1e-3, atol=1e-4) for x, y in zip(a, b, strict=True)
               for p, q in zip(x, y, strict=True))  # fmt: skip


@pytest.mark.cuda
@pytest.mark.parametrize("world", ["one model", "ring of 2 (fp32)", "ps of 2"])
def test_a_run_on_cuda_equals_the_cpu_run_within_rounding(world: str) -> None:
    changes = {**WORLDS.get(world, {"replicas": 2}), "sampler": "full"}  # ADASS's choices may flip on a tie
    on_cuda = parameters(**changes, device="cuda")
    assert _close(on_cuda, parameters(**changes, device="cpu"))


@pytest.mark.cuda
def test_a_checkpoint_from_cuda_resumes_on_the_cpu(tmp_path) -> None:
    config = RunConfig.from_flat(**{**FLAT, "replicas": 2, "epochs": 1, "device": "cuda"})
    run(config, checkpoint_dir=tmp_path)
    resumed = run(config.replace(epochs=2, device="cpu"), checkpoint_dir=tmp_path, resume=True)
    assert all(p.device.type == "cpu" for ps in resumed.extra["parameters"] for p in ps)
    assert resumed.final is not None and resumed.final.epoch == 1


@pytest.mark.cuda
def test_a_dask_worker_on_cuda_trains_what_this_process_trains_on_the_cpu() -> None:
    # one worker: its process group is gloo beside nccl, its replica and exchange on the GPU
    changes = {"sampler": "full", "timeout_s": 120}
    on_dask = parameters(**changes, workers=1, device="cuda")
    assert _close(on_dask, parameters(**changes, device="cpu"))
