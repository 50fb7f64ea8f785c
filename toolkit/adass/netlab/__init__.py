"""A network lab on one machine: hosts as network namespaces on a bridge, links shaped by the kernel.

For studying real slow networks and for tests that leave loopback: ``adass netlab up --hosts 4
--rate 1gbit``, ``adass netlab cluster``, ``adass netlab run -- adass train ...``, ``adass netlab down``.
Needs root and iproute2.
"""

from .command import add_netlab_parser, lab_down, lab_up, main, run_netlab
from .counters import LinkBytes, read_counters, since
from .processes import signal_process, start_cluster, start_worker, stop_processes
from .shaping import parse_rate
from .state import LabState, find_state, subnet_for
from .system import LabError, require_tools
from .topology import reshape

__all__ = [
    "LabError", "LabState", "LinkBytes", "add_netlab_parser", "find_state", "lab_down", "lab_up", "main",
    "parse_rate", "read_counters", "require_tools", "reshape", "run_netlab", "signal_process", "since", "start_cluster",
    "start_worker", "stop_processes", "subnet_for",
]  # fmt: skip
