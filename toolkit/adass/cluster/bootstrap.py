"""The torch.distributed process group across replicas: free port, init with a timeout, teardown.

Blocking calls run in a thread (``asyncio.to_thread``) so a Dask worker's event loop and its
heartbeats keep going while ranks wait for each other.
"""

from __future__ import annotations

import datetime
import socket

import torch
import torch.distributed as dist

__all__ = ["backend", "destroy_group", "free_port", "init_group", "rendezvous_store"]


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
    timeout = datetime.timedelta(seconds=timeout_s)
    store = rendezvous_store(master, port, rank, world, timeout)
    dist.init_process_group(name, store=store, rank=rank, world_size=world, timeout=timeout)


def rendezvous_store(master: str, port: int, rank: int, world: int, timeout: datetime.timedelta) -> dist.TCPStore:
    """The ranks' rendezvous store; rank 0 serves it on ``master`` alone, not on every interface.

    torch's TCPStore binds all interfaces; handing it a socket already bound to ``master`` keeps the
    store off the addresses the ranks do not use.
    """
    if rank != 0:
        return dist.TCPStore(master, port, world, False, timeout=timeout)
    family = socket.AF_INET6 if ":" in master else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((master, port))
    sock.listen(max(world, 64))
    return dist.TCPStore(master, port, world, True, timeout=timeout, wait_for_workers=False,
                         master_listen_fd=sock.detach())  # fmt: skip


def destroy_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
