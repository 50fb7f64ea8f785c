"""Connect to Dask: an embedded cluster (processes, one thread each; one worker per GPU where
dask-cuda is installed and there are GPUs enough, see ``gpus.py``) or a scheduler address."""

from __future__ import annotations

import contextlib
import logging
import socket
from dataclasses import dataclass, field
from typing import Any

import dask
from dask.utils import parse_bytes
from distributed import Client, LocalCluster
from distributed.security import Security

from ...allocator import dask_config
from ...failures import RunFailure, one_line
from ...registry import SpecError
from ...scheduler_address import parse_scheduler_address
from .credentials import temporary_security, user_security
from .gpus import cluster_class

__all__ = ["ClusterHandle", "connect", "memory_bytes", "reachable"]

#: how long a question to the scheduler may take before its address is probed (a dead scheduler's
#: port refuses connections at once, but Dask's connect retries against it until its own timeout)
_ASK_S = 5.0


@dataclass
class ClusterHandle:
    """A Dask client and, when this process started it, the LocalCluster behind it."""

    client: Client
    cluster: LocalCluster | None = None
    serves_dashboard: bool = True  # an embedded cluster serves Dask's dashboard only when asked to
    _seen: list[str] = field(default_factory=list, repr=False)  # the workers of the last answer

    @property
    def dashboard_link(self) -> str:
        """Dask's dashboard of this cluster, or '' where it serves none (an embedded cluster by default)."""
        if not self.serves_dashboard:
            return ""
        return str(self.client.dashboard_link)

    @property
    def embedded(self) -> bool:
        return self.cluster is not None

    def workers(self) -> list[str]:
        """Worker addresses, sorted (ranks follow this order).

        Raises
        ------
        RunFailure
            The client has lost its scheduler (a run cannot go on without one).
        """
        client = self.client
        if client.status == "running":
            try:
                info = client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=_ASK_S)
                self._seen = sorted(info["workers"])
                return self._seen
            except Exception:  # no answer in time: a slow scheduler still listens, a dead one does not
                with contextlib.suppress(RunFailure):
                    reachable(client.scheduler.address, timeout_s=_ASK_S)
                    return self._seen
        raise RunFailure(f"the Dask scheduler {client.scheduler.address} is gone (client {client.status})")

    def close(self) -> None:
        """Close the client and, if embedded, the cluster with all its worker processes."""
        with contextlib.suppress(Exception):
            self.client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()

    def __enter__(self) -> ClusterHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    address: str | None = None, n_workers: int = 2, timeout_s: float = 60.0, detect_s: float = 30.0,
    security: Security | None = None, dashboard: bool = False, device: str = "auto", memory_limit: str | int = 0,
) -> ClusterHandle:  # fmt: skip
    """A Dask client with at least ``n_workers`` workers.

    Parameters
    ----------
    address : str, optional
        A running scheduler (``tcp://host:8786``, ``tls://...``). Without it, an embedded ``LocalCluster``
        of ``n_workers`` processes with one thread each is started on 127.0.0.1 (dashboard on a free
        port, Dask's sampling profiler off), its traffic under TLS with credentials made for it alone,
        so no other user of the machine can join it or run code in its workers. For a cluster of your own, set
        ``distributed.worker.profile.enabled: false`` in its Dask config for the same effect.
    n_workers : int
        Workers needed; with ``address`` this waits up to ``timeout_s`` for that many to join.
    detect_s : float
        Embedded cluster: seconds without a heartbeat after which the scheduler drops a worker (a killed
        worker is dropped at once, when its connections close); its nanny starts a replacement.
    security : Security, optional
        The client's credentials for ``address`` (see :func:`adass.runtime.cluster.credentials.user_security`).
    dashboard : bool
        Embedded cluster: serve Dask's own dashboard on a free port of 127.0.0.1. It is plain HTTP
        without a login (logs, worker addresses, call stacks), so it is off unless asked for.
    device : {"auto", "cpu", "cuda"}
        The run's ``--device``: unless ``cpu``, the embedded cluster is dask-cuda's
        ``LocalCUDACluster`` (a GPU per worker) where dask-cuda is installed and the machine has a
        GPU for each of the ``n_workers``.
    memory_limit : str or int
        Embedded cluster: the most memory each worker process may hold (bytes, or ``"768MiB"``,
        ``"2GB"``), Dask's own per-worker limit: a worker pauses new tasks at 80% of it and its nanny
        restarts it at 95%. 0: no limit.

    Raises
    ------
    RunFailure
        One line: nothing listens at ``address``, or too few workers joined in ``timeout_s``.
    """
    limit_bytes = memory_bytes(memory_limit)
    if address:
        reachable(address)
        try:
            client = Client(address, timeout=timeout_s, security=security)
        except Exception as err:
            raise RunFailure(f"--scheduler: cannot connect to {address}: {one_line(err)}") from None
        try:
            client.wait_for_workers(n_workers, timeout=timeout_s)
        except Exception:
            have = len(client.scheduler_info(n_workers=-1)["workers"])
            client.close()
            raise RunFailure(f"--scheduler: {address} has {have} workers; {n_workers} did not join within "
                             f"{timeout_s:g} s") from None  # fmt: skip
        return ClusterHandle(client)
    # Dask's sampling profiler takes each worker's GIL 100 times a second; every ring hop needs the
    # GIL back after its wait, so on a small machine the profiler alone stretched the step by
    # a quarter. The embedded cluster runs without it (the dashboard's Profile page stays empty).
    ttl = {"distributed.scheduler.worker-ttl": f"{detect_s:g}s"}
    # Dask's HTTP pages (dashboard, /info, /json, metrics) are plain HTTP without a login: without
    # ``dashboard`` none is served, and what still listens answers every path with 404
    pages = (
        {} if dashboard else {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
    )
    embedded_security = temporary_security()
    with dask.config.set({"distributed.worker.profile.enabled": False, **ttl, **pages, **dask_config()}):
        cluster = cluster_class(n_workers, device)(
            n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address="127.0.0.1:0" if dashboard else None, memory_limit=limit_bytes,
            silence_logs=logging.CRITICAL,
            security=embedded_security,
        )  # fmt: skip
    try:
        client = Client(cluster, timeout=timeout_s, security=embedded_security)
    except BaseException:
        cluster.close()
        raise
    return ClusterHandle(client, cluster, serves_dashboard=dashboard)


def memory_bytes(limit: str | int) -> int:
    """``limit`` (bytes, or a size such as ``"768MiB"``) in bytes; SpecError in one line otherwise.

    >>> memory_bytes("768MiB"), memory_bytes(0)
    (805306368, 0)
    """
    try:
        value = parse_bytes(limit) if isinstance(limit, str) else int(limit)
    except (ValueError, TypeError):
        value = -1
    if value < 0:
        raise SpecError(f"memory_limit: {limit!r} is not allowed; expected a size such as 768MiB or 2GB, "
                        "or 0 for no limit")  # fmt: skip
    return value


def reachable(address: str, timeout_s: float = 5.0) -> None:
    """Raise RunFailure in one line unless something accepts TCP connections at ``address`` (``tcp://H:P``)."""
    try:
        where = parse_scheduler_address(address)
    except SpecError as err:
        raise RunFailure(f"--scheduler: {err}") from None
    host, port = where.host, where.port
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as err:
        raise RunFailure(f"--scheduler: nothing answers at {address} ({err.strerror or err})") from None


def connect_for(config: Any, n_workers: int) -> ClusterHandle:
    """:func:`connect` as ``config`` asks: its scheduler (or an embedded cluster of ``n_workers``), its
    ``--detect-s`` and its ``--tls-*`` credentials; every command connects through this."""
    c = config.cluster
    security = user_security(c.tls_ca, c.tls_cert, c.tls_key)
    return connect(c.scheduler or None, n_workers=n_workers, detect_s=c.detect_s, security=security,
                   dashboard=c.dask_dashboard, device=c.device)  # fmt: skip
