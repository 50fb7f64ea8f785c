"""The torch.distributed process group across replicas: free port, init with a timeout, teardown.

Each rank binds the interface that holds its own Dask worker's address (``binding.py``), and a rank
that cannot connect raises :class:`GroupConnectError`, one line naming it, its peers and their
addresses. Blocking calls run in a thread (``asyncio.to_thread``) so a Dask worker's event loop and
its heartbeats keep going while ranks wait for each other.
"""

from __future__ import annotations

import datetime
import re
import socket

import torch
import torch.distributed as dist

from .binding import apply_binding, choose_binding

__all__ = ["GroupConnectError", "backend", "destroy_group", "free_port", "init_group", "rendezvous_store"]

_ADDRESS_KEY = "adass/address/{rank}"  # each rank's advertised address, read back to explain a failure
_SOURCE = re.compile(r"\[/[^\]]*\]\s*")  # gloo's "[/path/file.cc:152]" source locations


class GroupConnectError(RuntimeError):
    """A rank could not join the process group; the message is one line (ranks, addresses, reason)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def backend() -> str:
    """``nccl`` where CUDA is present, else ``gloo``."""
    return "nccl" if torch.cuda.is_available() else "gloo"


def init_group(master: str, port: int, rank: int, world: int, timeout_s: float,
               host: str | None = None, bind: str | None = None) -> None:  # fmt: skip
    """Join the default process group (blocking until every rank has joined or the timeout passes).

    The exchanges send point-to-point messages over gloo; with CUDA present the group is created
    with both backends (``cuda:nccl,cpu:gloo``) so collectives on GPU tensors use nccl.

    Parameters
    ----------
    master, port : str, int
        Rank 0's address and the free port of the rendezvous store it hosts.
    rank, world : int
        This rank and the number of ranks.
    timeout_s : float
        Seconds to wait for the others, at rendezvous and when connecting.
    host : str, optional
        This rank's own Dask worker address; gloo binds the interface that holds it.
    bind : str, optional
        Override: an interface name or an address of this machine to bind instead.

    Raises
    ------
    GroupConnectError
        The rendezvous or the connections to the peers failed (one line).
    SpecError
        ``bind`` names nothing on this machine (one line).
    """
    if dist.is_initialized():
        dist.destroy_process_group()
    binding = choose_binding(host, bind)
    apply_binding(binding)
    timeout = datetime.timedelta(seconds=timeout_s)
    try:
        store = rendezvous_store(master, port, rank, world, timeout)
    except RuntimeError as err:
        raise GroupConnectError(
            f"rank {rank} of {world} could not reach the rendezvous at {master}:{port} within {timeout_s:g} s: "
            f"{_reason(err)}"
        ) from None
    store.set(_ADDRESS_KEY.format(rank=rank), str(binding) if binding else "an address chosen by gloo")
    peers = _peer_addresses(store, rank, world)  # read now: after a failure the store may be gone
    name = "cpu:gloo,cuda:nccl" if backend() == "nccl" else "gloo"
    try:
        dist.init_process_group(name, store=store, rank=rank, world_size=world, timeout=timeout)
    except RuntimeError as err:
        own = str(binding) if binding else "an address chosen by gloo"
        raise GroupConnectError(
            f"rank {rank} of {world} (at {own}) could not connect its process group within {timeout_s:g} s "
            f"to {'; '.join(f'rank {r} at {where}' for r, where in peers.items()) or 'no peers'}: {_reason(err)}"
        ) from None


def _peer_addresses(store: dist.Store, rank: int, world: int) -> dict[int, str]:
    """Every other rank's published address (each rank publishes right after the rendezvous)."""
    keys = {r: _ADDRESS_KEY.format(rank=r) for r in range(world) if r != rank}
    try:
        store.wait(list(keys.values()))
        return {r: store.get(key).decode() for r, key in keys.items()}
    except RuntimeError as err:
        raise GroupConnectError(
            f"rank {rank} of {world}: the peers' addresses never arrived: {_reason(err)}"
        ) from None


def _reason(err: Exception) -> str:
    """The gist of a torch/gloo error on one line, without source locations."""
    lines = [ln for ln in str(err).splitlines() if ln.strip()] or [type(err).__name__]
    return " ".join(_SOURCE.sub("", lines[0]).split())


def rendezvous_store(
    master: str, port: int, rank: int, world: int, timeout: datetime.timedelta
) -> dist.TCPStore:
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
