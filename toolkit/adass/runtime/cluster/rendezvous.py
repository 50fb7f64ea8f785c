"""The ranks' rendezvous over the run's own Dask connection, and a per-run secret their pairs prove.

torch's usual rendezvous is a TCPStore on rank 0: a port that any process able to reach it may read
and write, with no password. Here the store is :class:`KeyValue`, a Dask actor the client starts on
rank 0's worker, and every rank reaches it through :class:`DaskStore`, a ``torch.distributed.Store``
whose calls travel over the Dask connection the rank already has. That connection is the cluster's:
under TLS (the embedded cluster always; an external one with ``--tls-*``) only holders of the
cluster's certificate can talk to it, so only the run's own ranks can read the addresses or write a
key. No port is opened for the rendezvous.

gloo's own TCP pairs carry no authentication (torch's gloo has no TLS transport). What can be done
is done right after they connect: every rank sends every peer a tag made from a secret the client
drew for this run and handed out over Dask (:func:`prove_peers`); a pair that does not lead to a rank
of this run (a stranger who took a rank's place while the pairs connected) fails the run in one line.
The gradients themselves then travel unencrypted (see docs/howto/dask-cluster.md, "Security").
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import hmac
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["DaskStore", "KeyValue", "PeerProofError", "prove_peers"]


class KeyValue:
    """A Dask actor: the key-value store of one run's rendezvous.

    Its methods are coroutines, so they run one at a time on the worker's event loop: ``add`` and
    ``compare_set`` are atomic without locks, and ``wait`` parks until a key arrives.
    """

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.changed = asyncio.Event()

    def _touch(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def set(self, key: str, value: bytes) -> None:
        self.data[key] = bytes(value)
        self._touch()

    async def get(self, key: str) -> bytes | None:
        return self.data.get(key)

    async def add(self, key: str, amount: int) -> int:
        value = int(self.data.get(key, b"0")) + int(amount)
        self.data[key] = str(value).encode()
        self._touch()
        return value

    async def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        current = self.data.get(key)
        if (current is None and not expected) or current == expected:
            self.data[key] = bytes(desired)
            self._touch()
            return bytes(desired)
        return current if current is not None else bytes(expected)

    async def delete_key(self, key: str) -> bool:
        found = self.data.pop(key, None) is not None
        self._touch()
        return found

    async def check(self, keys: list[str]) -> bool:
        return all(k in self.data for k in keys)

    async def num_keys(self) -> int:
        return len(self.data)

    async def wait(self, keys: list[str], timeout_s: float) -> bool:
        """True once every key is present; False when ``timeout_s`` passes first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not all(k in self.data for k in keys):
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                return False
        return True


class DaskStore(dist.Store):
    """A ``torch.distributed.Store`` whose every call goes to a :class:`KeyValue` actor over Dask.

    Parameters
    ----------
    actor : distributed.Actor
        The run's KeyValue actor (its handle pickles; each rank gets a copy from the client).
    timeout : timedelta
        How long ``get`` and ``wait`` wait for keys that are not there yet.
    """

    def __init__(self, actor: Any, timeout: datetime.timedelta) -> None:
        super().__init__()
        self.actor = actor
        self.set_timeout(timeout)

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self.actor, method)(*args).result()
        except Exception as err:  # the actor's worker is gone, or Dask cannot reach it
            raise dist.DistStoreError(
                f"the run's rendezvous on Dask did not answer ({type(err).__name__}: {err})"
            ) from None

    def _wait(self, keys: list[str], timeout: datetime.timedelta) -> None:
        if not self._call("wait", list(keys), timeout.total_seconds()):
            missing = ", ".join(keys)
            raise dist.DistStoreError(f"the rendezvous waited {timeout.total_seconds():g} s for {missing}")

    def set(self, key: str, value: bytes | str) -> None:
        self._call("set", key, value.encode() if isinstance(value, str) else bytes(value))

    def get(self, key: str) -> bytes:
        self._wait([key], self.timeout)
        value = self._call("get", key)
        if value is None:  # deleted between the wait and the read
            raise dist.DistStoreError(f"the rendezvous lost {key}")
        return value

    def add(self, key: str, amount: int) -> int:
        return int(self._call("add", key, int(amount)))

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        as_bytes = [v.encode() if isinstance(v, str) else bytes(v) for v in (expected, desired)]
        return self._call("compare_set", key, *as_bytes)

    def delete_key(self, key: str) -> bool:
        return bool(self._call("delete_key", key))

    def check(self, keys: list[str]) -> bool:
        return bool(self._call("check", list(keys)))

    def num_keys(self) -> int:
        return int(self._call("num_keys"))

    def wait(self, keys: list[str], timeout: datetime.timedelta | None = None) -> None:
        self._wait(keys, self.timeout if timeout is None else timeout)


class PeerProofError(RuntimeError):
    """A process-group pair did not prove that it leads to a rank of this run (one line)."""


def _tag(secret: bytes, sender: int, receiver: int) -> torch.Tensor:
    digest = hmac.new(secret, f"{sender}->{receiver}".encode(), hashlib.sha256).digest()
    return torch.frombuffer(bytearray(digest), dtype=torch.uint8)


def prove_peers(
    secret: bytes, rank: int, world: int, group: Any = None, what: str = "the process group"
) -> None:
    """Every rank sends every peer ``HMAC(secret, "i->j")`` over each pair and checks what it got.

    Raises
    ------
    PeerProofError
        A peer sent the wrong tag: the pair does not lead to a rank of this run.
    """
    ranks = dist.get_process_group_ranks(group) if group is not None else list(range(world))
    if rank not in ranks or len(ranks) < 2:
        return
    sends, receives = [], {}
    for peer in ranks:
        if peer == rank:
            continue
        sends.append(dist.isend(_tag(secret, rank, peer), dst=peer, group=group))
        received = torch.zeros(32, dtype=torch.uint8)
        receives[peer] = (received, dist.irecv(received, src=peer, group=group))
    for work in sends:
        work.wait()
    for peer, (received, work) in receives.items():
        work.wait()
        if not hmac.compare_digest(received.numpy().tobytes(), _tag(secret, peer, rank).numpy().tobytes()):
            raise PeerProofError(f"rank {rank} of {world}: the pair to rank {peer} in {what} did not prove this "
                                 "run's secret; another process may have connected in that rank's place")  # fmt: skip
