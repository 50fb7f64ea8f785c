"""The torch.distributed process group across replicas: init over the run's rendezvous with a timeout, teardown.

Each rank binds the interface that holds its own Dask worker's address (``binding.py``), and a rank
that cannot connect raises :class:`GroupConnectError`, one line naming it, its peers and their
addresses. Blocking calls run in a thread (``asyncio.to_thread``) so a Dask worker's event loop and
its heartbeats keep going while ranks wait for each other.
"""

from __future__ import annotations

import datetime
import re
import socket

import torch.distributed as dist

from ...devices import group_backend
from .binding import apply_binding, choose_binding
from .rendezvous import PeerProofError, prove_peers

__all__ = ["GroupConnectError", "destroy_group", "init_group", "tcp_store"]

_ADDRESS_KEY = "adass/address/{rank}"  # each rank's advertised address, read back to explain a failure
_SOURCE = re.compile(r"\[/[^\]]*\]\s*")  # gloo's "[/path/file.cc:152]" source locations


class GroupConnectError(RuntimeError):
    """A rank could not join the process group; the message is one line (ranks, addresses, reason)."""


def init_group(store: dist.Store, rank: int, world: int, timeout_s: float, host: str | None = None,
               bind: str | None = None, secret: bytes | None = None, device: str = "cpu") -> None:  # fmt: skip
    """Join the default process group (blocking until every rank has joined or the timeout passes).

    The backend follows the run's device (:func:`adass.devices.group_backend`): gloo for a run on
    the CPU; for a run on CUDA (every rank on a GPU) the group has both backends
    (``cpu:gloo,cuda:nccl``), so gradient bodies travel over nccl and host tensors (frame heads,
    agreements) over gloo.

    Parameters
    ----------
    store : torch.distributed.Store
        The run's rendezvous: a :class:`~adass.runtime.cluster.rendezvous.DaskStore` on a cluster, so
        no port is opened for it (any store works, e.g. a FileStore in a private folder).
    rank, world : int
        This rank and the number of ranks.
    timeout_s : float
        Seconds to wait for the others, at rendezvous and when connecting.
    host : str, optional
        This rank's own Dask worker address; gloo binds the interface that holds it.
    bind : str, optional
        Override: an interface name or an address of this machine to bind instead.
    secret : bytes, optional
        The run's secret: once connected, every pair proves it (:func:`prove_peers`).
    device : {"cpu", "cuda"}
        The run's device, resolved (``auto`` is decided before the ranks start).

    Raises
    ------
    GroupConnectError
        The rendezvous or the connections to the peers failed, or a pair did not prove the secret (one line).
    SpecError
        ``bind`` names nothing on this machine (one line).
    """
    if dist.is_initialized():
        dist.destroy_process_group()
    binding = choose_binding(host, bind)
    apply_binding(binding)
    timeout = datetime.timedelta(seconds=timeout_s)
    store.set_timeout(timeout)
    own = str(binding) if binding else "an address chosen by gloo"
    try:
        store.set(_ADDRESS_KEY.format(rank=rank), own)
    except RuntimeError as err:
        raise GroupConnectError(
            f"rank {rank} of {world} could not reach the rendezvous: {_reason(err)}"
        ) from None
    peers = _peer_addresses(store, rank, world)  # read now: after a failure the store may be gone
    try:
        dist.init_process_group(
            group_backend(device), store=store, rank=rank, world_size=world, timeout=timeout
        )
        if secret is not None:
            prove_peers(secret, rank, world)
    except PeerProofError as err:
        raise GroupConnectError(str(err)) from None
    except RuntimeError as err:
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


def tcp_store(master: str, port: int, rank: int, world: int, timeout: datetime.timedelta) -> dist.TCPStore:
    """torch's own rendezvous, a TCPStore rank 0 serves on ``master`` alone (not every interface).

    It accepts anyone who reaches the port; the toolkit's runs rendezvous over Dask instead
    (:class:`~adass.runtime.cluster.rendezvous.DaskStore`). It serves the DDP baseline in the network
    lab, started as ``torchrun`` starts ranks, inside namespaces of the lab's own.
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
