"""Which network interface a rank's process group binds: the one that holds its own Dask worker's address.

Gloo otherwise advertises the address the machine's host name resolves to, which on many machines is
loopback; peers on other machines then try to connect to 127.0.0.1 and time out. Binding where the
Dask worker lives uses the address the cluster already proved reachable.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass

import psutil

from ...registry import SpecError

__all__ = ["GLOO_IFNAME_ENV", "Binding", "apply_binding", "choose_binding", "interface_holding"]

GLOO_IFNAME_ENV = "GLOO_SOCKET_IFNAME"
_INHERITED_IFNAME = os.environ.get(GLOO_IFNAME_ENV)  # what the worker was started with, if anything


@dataclass(frozen=True)
class Binding:
    """An interface and the address on it that a rank advertises to its peers."""

    interface: str
    address: str

    def __str__(self) -> str:
        return f"{self.address} on {self.interface}"


def _addresses(host: str) -> list[str]:
    """``host`` as IP addresses: itself when it is one (brackets of ``[::1]`` dropped), else resolved."""
    host = host.strip().strip("[]")
    try:
        return [str(ipaddress.ip_address(host.split("%")[0]))]
    except ValueError:
        pass
    try:
        return list(dict.fromkeys(str(info[4][0]) for info in socket.getaddrinfo(host, None)))
    except OSError:
        return []


def interface_holding(host: str) -> Binding | None:
    """The interface that holds ``host`` (an address or a name that resolves to one of ours), or None.

    >>> interface_holding("127.0.0.1").address
    '127.0.0.1'
    """
    wanted = _addresses(host)
    for interface, entries in psutil.net_if_addrs().items():
        for entry in entries:
            if entry.family in (socket.AF_INET, socket.AF_INET6) and entry.address.split("%")[0] in wanted:
                return Binding(interface, entry.address.split("%")[0])
    return None


def choose_binding(host: str | None, bind: str | None = None) -> Binding | None:
    """Where this rank's process group binds.

    Parameters
    ----------
    host : str or None
        The address of this rank's own Dask worker (``10.0.0.5``); its interface is the default.
    bind : str or None
        An explicit override: an interface name (``eth1``) or an address this machine holds.

    Returns
    -------
    Binding or None
        None when nothing is given and no interface holds ``host`` (gloo then chooses as it always has).

    Raises
    ------
    SpecError
        ``bind`` names neither an interface nor an address of this machine (one line).
    """
    if bind:
        interfaces = psutil.net_if_addrs()
        if bind in interfaces:
            inet = [e.address for e in interfaces[bind] if e.family in (socket.AF_INET, socket.AF_INET6)]
            return Binding(bind, inet[0] if inet else "")
        found = interface_holding(bind)
        if found is None:
            names = "|".join(sorted(interfaces))
            raise SpecError(
                f"--bind: {bind!r} is not allowed; expected an interface ({names}) or one of its addresses"
            )
        return found
    return interface_holding(host) if host else None


def apply_binding(binding: Binding | None) -> None:
    """Make every gloo process group this process creates from now on use ``binding``'s interface.

    torch builds each gloo group's device from ``GLOO_SOCKET_IFNAME`` when set (``init_process_group``
    and ``new_group`` ignore gloo options), so the variable is set in this process; with no binding,
    the value the process started with comes back.
    """
    value = binding.interface if binding is not None else _INHERITED_IFNAME
    if value:
        os.environ[GLOO_IFNAME_ENV] = value
    else:
        os.environ.pop(GLOO_IFNAME_ENV, None)
