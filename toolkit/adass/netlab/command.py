"""``adass netlab up|down|cluster|run|status``: a network lab of namespaces on a bridge, on one machine.

    adass netlab up --hosts 4 --rate 1gbit          # prints the lab's name and addresses
    adass netlab cluster --workers 4                # dask scheduler on host 0, a worker on each host
    adass netlab run -- adass train --scheduler tcp://10.77.X.1:8786 --workers 4 --out runs/lab
    adass netlab down

Errors (not root, no iproute2, no such lab, a state folder that is not the user's alone) are one line
and exit with status 2.
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .private import exists, make_private
from .processes import start_cluster, stop_processes
from .shaping import parse_rate
from .state import LabState, default_state_dir, find_state, subnet_for
from .system import LabError, require_tools
from .topology import build, destroy, plan, present

__all__ = ["add_netlab_parser", "lab_down", "lab_up", "main", "run_netlab"]


def lab_up(hosts: int, rate: str, name: str | None = None, state_dir: Path | None = None,
           queue_ms: float = 20.0) -> LabState:  # fmt: skip
    """Build a lab of ``hosts`` namespaces on a bridge, each link shaped to ``rate``; return its state.

    A failure part-way removes what was built before the error is raised. The state folder is created
    (mode 0700) if missing; one that is a symbolic link, another user's, or open to group or others is
    refused before anything is written or built.
    """
    require_tools()
    rate_bps = parse_rate(rate)
    name = name or f"lab{secrets.token_hex(3)}"
    folder = Path(state_dir or default_state_dir())
    make_private(folder)
    path = folder / f"{name}.json"
    if exists(path):
        raise LabError(f"--name: lab {name!r} is up already (state {path}); take it down first")
    state = plan(name, hosts, subnet_for(name), rate_bps, str(path))
    taken = present(state)
    if taken:  # another state folder's lab of the same name: never build over (or tear down) it
        raise LabError(
            f"--name: namespaces of a lab {name!r} exist already ({', '.join(taken)}); choose another name"
        )
    state.save()
    try:
        build(state, queue_ms)
    except BaseException:
        lab_down(state)
        raise
    return state


def lab_down(state: LabState) -> None:
    """End the lab's processes, delete its namespaces and its state file.

    Raises
    ------
    LabError
        When a namespace could not be deleted (the state file is kept, so ``down`` can be run again).
    """
    stop_processes(state)
    failed = destroy(state)
    if failed:
        state.save()
        raise LabError(f"lab {state.name}: could not delete {'; '.join(failed)}")
    state.remove()


def _lab(args: argparse.Namespace) -> LabState:
    require_tools()
    return find_state(args.state_dir, args.name)


def _up(args: argparse.Namespace) -> int:
    state = lab_up(args.hosts, args.rate, args.name, args.state_dir, args.queue_ms)
    print(f"lab {state.name}: {len(state.hosts)} hosts on {state.subnet}, {args.rate} each way")
    _print_hosts(state)
    return 0


def _down(args: argparse.Namespace) -> int:
    state = _lab(args)
    lab_down(state)
    print(f"lab {state.name}: down")
    return 0


def _cluster(args: argparse.Namespace) -> int:
    state = _lab(args)
    workers = args.workers or len(state.hosts)
    try:
        address = start_cluster(state, workers, args.scheduler_host, args.timeout_s, args.hide)
    except BaseException:
        stop_processes(state)
        state.save()
        raise
    print(address)
    return 0


def _run(args: argparse.Namespace) -> int:
    state = _lab(args)
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        raise LabError("run: no command given (adass netlab run -- COMMAND ...)")
    return subprocess.run(["ip", "netns", "exec", state.host(args.host).netns, *command]).returncode


def _status(args: argparse.Namespace) -> int:
    state = _lab(args)
    alive = present(state)
    print(f"lab {state.name}: {len(alive)} of {len(state.hosts) + 1} namespaces present, {state.subnet}")
    _print_hosts(state)
    if state.scheduler:
        print(
            f"scheduler {state.scheduler}; processes: "
            + ", ".join(f"{p.role}@h{p.host} pid {p.pid}" for p in state.processes)
        )
    return 0


def _print_hosts(state: LabState) -> None:
    for host in state.hosts:
        print(f"  host {host.index}: {host.address} (netns {host.netns})")


_COMMANDS = {"up": _up, "down": _down, "cluster": _cluster, "run": _run, "status": _status}


def add_netlab_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``netlab`` command and its subcommands to ``subparsers`` (as in ``adass``'s parser)."""
    lab = subparsers.add_parser(
        "netlab", help="a network lab on this machine: namespaces on a bridge, links shaped by tc (root)",
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    sub = lab.add_subparsers(dest="lab_command", required=True, metavar="SUBCOMMAND", parser_class=type(lab))

    def add(name: str, text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument(
            "--name", default=None, help="the lab's name (default: generated by up; else the only lab)"
        )
        p.add_argument("--state-dir", type=Path, default=default_state_dir(), metavar="DIR",
                       help=f"where lab state files live, a folder of yours that only you may enter; "
                            f"default {default_state_dir()}")  # fmt: skip
        return p

    up = add("up", "build N hosts (network namespaces) on a bridge, each link shaped with tbf")
    up.add_argument("--hosts", type=int, default=4, metavar="N", help="number of hosts; default 4")
    up.add_argument(
        "--rate", default="1gbit", help="each link's rate each way (bit|kbit|mbit|gbit); default 1gbit"
    )
    up.add_argument("--queue-ms", type=float, default=20.0, metavar="MS",
                    help="tbf queue: most milliseconds a packet waits for tokens; default 20")  # fmt: skip
    add("down", "end the lab's processes, delete its namespaces and state file")
    cluster = add(
        "cluster", "start dask scheduler and dask workers inside the lab; prints the scheduler address"
    )
    cluster.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="W",
        help="workers (worker i on host i mod N); default one per host",
    )
    cluster.add_argument(
        "--scheduler-host", type=int, default=0, metavar="I", help="host of the scheduler; default 0"
    )
    cluster.add_argument(
        "--timeout-s", type=float, default=60.0, metavar="S", help="wait for readiness; default 60"
    )
    cluster.add_argument("--hide", action="append", default=[], metavar="DIR",
                         help="a folder the workers see empty, as on hosts that share no folder (repeatable)")  # fmt: skip
    run = add("run", "run a command inside one lab host's namespace (its exit status is the result)")
    run.add_argument("--host", type=int, default=0, metavar="I", help="which host; default 0")
    run.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command and its arguments"
    )
    add("status", "the lab's hosts, addresses and processes")
    return lab


def run_netlab(args: argparse.Namespace) -> int:
    """Run the parsed ``netlab`` subcommand; a LabError prints one line and returns 2."""
    try:
        return _COMMANDS[args.lab_command](args)
    except LabError as err:
        print(f"adass netlab {args.lab_command}: error: {err}", file=sys.stderr)
        return 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m adass.netlab SUBCOMMAND ...``, the same as ``adass netlab SUBCOMMAND ...``."""
    parser = _Parser(prog="adass")
    add_netlab_parser(parser.add_subparsers(dest="command", required=True, parser_class=_Parser))
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_netlab(parser.parse_args(["netlab", *argv]))
