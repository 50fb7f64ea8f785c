"""The torch.distributed process group across replicas: free port, init with a timeout, teardown.

Blocking calls run in a thread (``asyncio.to_thread``) so a Dask worker's event loop and its
heartbeats keep going while ranks wait for each other.
"""

from __future__ import annotations

import datetime
import socket

import torch
import torch.distributed as dist

__all__ = ["backend", "destroy_group", "free_port", "init_group"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def backend() -> str:
    """``nccl`` where CUDA is present, else ``gloo``."""
    return "nccl" if torch.cuda.is_available() else "gloo"


def init_group(master: str, port: int, rank: int, world: int, timeout_s: float) -> None:
    """Join the default process group (blocking until every rank has joined or the timeout passes).

    The exchanges send point-to-point messages over gloo; with CUDA present the group is created
    with both backends (``cuda:nccl,cpu:gloo``) so collectives on GPU tensors use nccl.
    """
    if dist.is_initialized():
        dist.destroy_process_group()
    name = "cpu:gloo,cuda:nccl" if backend() == "nccl" else "gloo"
    dist.init_process_group(
        name, init_method=f"tcp://{master}:{port}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )  # fmt: skip


def destroy_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
