"""Keep freed memory for reuse: glibc's malloc otherwise hands large blocks back to the system.

Exchanges and codecs make buffers of megabytes at every step (levels, random draws, decoded
chunks). By default glibc serves blocks above a moving threshold with fresh ``mmap`` pages and
unmaps them on free, so every step pays a page fault per 4 KiB it touches; on a small machine
that measured as much as the codec math itself (a 1M-value QSGD encode went from about 6 ms to
under 2 ms). Raising that threshold to its largest value (32 MiB on 64-bit systems) and never
trimming the heap makes freed blocks get reused. The price is that a process keeps the memory it
once used, so the setting is applied only to processes adass owns:

- :func:`keep_freed_memory` tunes the calling process; the ``adass`` command and the processes it
  spawns itself (gloo launches, benchmarks) call it.
- The embedded ``LocalCluster`` gets the same setting through Dask's own configuration,
  :func:`dask_config`: ``distributed.nanny.pre-spawn-environ`` sets glibc's ``MALLOC_*``
  variables before each worker process starts (Dask sets ``MALLOC_TRIM_THRESHOLD_`` there too).
- The network lab's scheduler and workers (``adass netlab cluster``) start with the variables set.
- Workers of a cluster of your own are left as Dask configured them. To opt in, put the same keys
  in that cluster's Dask configuration (for example ``~/.config/dask/adass.yaml``)::

      distributed:
        nanny:
          pre-spawn-environ:
            MALLOC_MMAP_THRESHOLD_: 33554432
            MALLOC_TRIM_THRESHOLD_: 2147483647

Set ``ADASS_KEEP_FREED_MEMORY=0`` to leave the allocator as it is everywhere.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["ENVIRON", "dask_config", "keep_freed_memory", "wanted"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters of glibc
_MMAP_THRESHOLD_MAX = 32 << 20  # glibc's upper limit on 64-bit systems
_TRIM_THRESHOLD = 2**31 - 1  # the largest int: the heap is never trimmed

# the same two settings as environment variables, which glibc reads when a process starts
ENVIRON: dict[str, str] = {
    "MALLOC_MMAP_THRESHOLD_": str(_MMAP_THRESHOLD_MAX),
    "MALLOC_TRIM_THRESHOLD_": str(_TRIM_THRESHOLD),
}


def wanted() -> bool:
    """False when ``ADASS_KEEP_FREED_MEMORY=0`` turns the setting off."""
    return os.environ.get("ADASS_KEEP_FREED_MEMORY", "1") != "0"


def keep_freed_memory() -> bool:
    """Tune glibc's malloc in this process (calling it again changes nothing).

    Returns
    -------
    bool
        False where it does not apply (not glibc, or turned off by ``ADASS_KEEP_FREED_MEMORY=0``).
    """
    if not wanted():
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and bool(
        mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    )


def dask_config() -> dict[str, str]:
    """Dask configuration under which a Nanny starts its worker with freed memory kept.

    For ``dask.config.set`` around the creation of a cluster adass owns; empty when
    ``ADASS_KEEP_FREED_MEMORY=0``.
    """
    if not wanted():
        return {}
    return {f"distributed.nanny.pre-spawn-environ.{key}": value for key, value in ENVIRON.items()}
