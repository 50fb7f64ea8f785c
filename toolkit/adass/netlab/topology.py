"""Namespaces on a bridge: one namespace per host, and a switch namespace that holds the bridge.

Host i has ``eth0`` with ``10.77.X.(i+1)/24``; its veth peer ``p<i>`` is a port of ``br0`` in the
switch namespace. Everything is created inside the lab's namespaces (``ip -n``), so the root
namespace gains no device, address or route, and lab traffic can reach nothing outside the lab.
Both ends of every veth are shaped, so each host has a full-duplex link of the lab's rate.
"""

from __future__ import annotations

import ipaddress
import os
import signal

from .shaping import shape
from .state import NAME, Host, LabState, namespace_prefix
from .system import LabError, sh, warn

__all__ = ["DEVICE", "MAX_HOSTS", "build", "destroy", "plan", "present", "reshape"]

MAX_HOSTS = 250
BRIDGE = "br0"
DEVICE = "eth0"


def plan(name: str, hosts: int, subnet: str, rate_bps: float, path: str) -> LabState:
    """The lab's names and addresses, before anything exists."""
    if not NAME.fullmatch(name):
        raise LabError(
            f"--name: {name!r} is not allowed; expected 1-24 of a-z, 0-9 and '-', starting with a letter or digit"
        )
    if not 1 <= hosts <= MAX_HOSTS:
        raise LabError(f"--hosts: {hosts} is not allowed; expected an integer in [1, {MAX_HOSTS}]")
    net = ipaddress.ip_network(subnet)
    prefix = namespace_prefix(name)
    members = [Host(i, f"{prefix}-h{i}", str(net[i + 1]), f"p{i}") for i in range(hosts)]
    return LabState(name, f"{prefix}-sw", subnet, rate_bps, members, path=path, prefix=prefix)


def build(state: LabState, queue_ms: float = 20.0) -> None:
    """Create the switch, the hosts, their links and shaping (the state file must already be saved)."""
    sw, prefix_len = state.switch, state.subnet.split("/")[1]
    sh(["ip", "netns", "add", sw])
    sh(["ip", "-n", sw, "link", "add", BRIDGE, "type", "bridge"])
    sh(["ip", "-n", sw, "link", "set", BRIDGE, "up"])
    for host in state.hosts:
        ns = host.netns
        sh(["ip", "netns", "add", ns])
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        sh(["ip", "-n", ns, "link", "add", DEVICE, "type", "veth", "peer", "name", host.port, "netns", sw])
        sh(["ip", "-n", sw, "link", "set", host.port, "master", BRIDGE, "up"])
        sh(["ip", "-n", ns, "addr", "add", f"{host.address}/{prefix_len}", "dev", DEVICE])
        sh(["ip", "-n", ns, "link", "set", DEVICE, "up"])
        shape(ns, DEVICE, state.rate_bps, queue_ms)  # the host's upload
        shape(sw, host.port, state.rate_bps, queue_ms)  # its download


def reshape(state: LabState, rate_bps: float, queue_ms: float = 20.0) -> None:
    """Shape every link of a running lab to ``rate_bps`` each way (processes and connections stay)."""
    for host in state.hosts:
        shape(host.netns, DEVICE, rate_bps, queue_ms)
        shape(state.switch, host.port, rate_bps, queue_ms)
    state.rate_bps = rate_bps
    state.save()


def present(state: LabState) -> list[str]:
    """The lab's namespaces that exist right now."""
    listed = sh(["ip", "netns", "list"], check=False).stdout.split("\n")
    names = {line.split()[0] for line in listed if line.strip()}
    return [ns for ns in [state.switch, *(h.netns for h in state.hosts)] if ns in names]


def destroy(state: LabState) -> list[str]:
    """Delete the lab's namespaces, ending first any process still inside them; return what failed.

    Those processes were started into namespaces that only this lab knows by name (its scheduler and
    workers, or commands given to ``netlab run``), so ending them ends only the lab's own work. A
    namespace outside the lab's own names (:meth:`LabState.foreign_namespaces`) is left alone, with a
    warning.
    """
    failed = []
    foreign = set(state.foreign_namespaces())
    for ns in sorted(foreign):
        own = namespace_prefix(state.name)
        warn(f"lab {state.name}: namespace {ns} is not one of the lab's ({own}-*); left alone")
    for ns in present(state):
        if ns in foreign:
            continue
        pids = sh(["ip", "netns", "pids", ns], check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        done = sh(["ip", "netns", "del", ns], check=False)
        if done.returncode != 0:
            failed.append(f"{ns}: {' '.join(done.stderr.split())}")
    return failed
