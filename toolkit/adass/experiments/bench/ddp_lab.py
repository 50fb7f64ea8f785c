"""PyTorch DDP across lab hosts the way it is deployed: one process per rank, started on its host.

Each rank is ``ip netns exec HOST python -m adass.experiments.bench.ddp_lab ...`` (as ``torchrun`` would start
it on a machine of its own), rendezvous at host 0, its group bound to the host's ``eth0`` address.
The ranks run :func:`~adass.experiments.bench.ddp.ddp_rank`, so the arithmetic is the Dask baseline's. A run that
outlives its timeout has its processes killed (by the PIDs started here) and fails in one line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ...config import RunConfig
from ...netlab import LabError, LabState
from ...runtime.cluster.bootstrap import tcp_store
from .ddp import CLIENT_GRACE_S, DDPResult, ddp_rank, ddp_result, parse_hook

__all__ = ["main", "train_ddp_in_lab"]


def train_ddp_in_lab(config: RunConfig, state: LabState, hook: str = "fp32") -> DDPResult:
    """Train ``config`` with DDP, rank i on lab host i, for ``config.cluster.workers`` ranks.

    Raises
    ------
    LabError
        The lab has too few hosts, a rank failed, or the run outlived ``timeout_s`` (one line).
    """
    parse_hook(hook)
    world, timeout_s = config.cluster.workers, config.cluster.timeout_s
    if not 1 <= world <= len(state.hosts):
        raise LabError(
            f"DDP with {world} ranks needs {world} lab hosts; lab {state.name} has {len(state.hosts)}"
        )
    master, port = state.hosts[0].address, 20_000 + secrets.randbelow(20_000)
    with tempfile.TemporaryDirectory(prefix="adass-ddp-") as tmp:
        folder = Path(tmp)
        (folder / "config.json").write_text(json.dumps(config.to_dict()))
        procs = []
        try:
            for rank in range(world):
                host = state.hosts[rank]
                argv = ["ip", "netns", "exec", host.netns, sys.executable, "-m", "adass.experiments.bench.ddp_lab",
                        "--config", str(folder / "config.json"), "--rank", str(rank), "--world", str(world),
                        "--master", master, "--port", str(port), "--timeout-s", f"{timeout_s:g}",
                        "--hook", hook, "--host", host.address, "--out", str(folder / f"rank{rank}.json")]  # fmt: skip
                log = open(folder / f"rank{rank}.log", "wb")  # noqa: SIM115  (closed with the process)
                procs.append((subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True), log))  # fmt: skip
            deadline = time.monotonic() + timeout_s + CLIENT_GRACE_S
            while any(p.poll() is None for p, _ in procs):
                failed = [r for r, (p, _) in enumerate(procs) if p.poll() not in (None, 0)]
                if failed or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        finally:
            for p, log in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                p.wait()
                log.close()
        # a rank that failed on its own first; the others were killed after it
        bad = sorted(
            (r for r, (p, _) in enumerate(procs) if p.returncode != 0),
            key=lambda r: procs[r][0].returncode < 0,
        )
        if bad:
            text = (folder / f"rank{bad[0]}.log").read_text(errors="replace").strip().splitlines()
            sys.stderr.write("\n".join(text[-20:]) + "\n")  # the failed rank's own account
            last = text[-1] if text else "no output"
            raise LabError(
                f"DDP ({hook}) rank {bad[0]} of {world} failed or outlived {timeout_s:g} s: {last}"
            )
        reports = [json.loads((folder / f"rank{r}.json").read_text()) for r in range(world)]
    return ddp_result(reports, config.optim.epochs)


def main(argv: Sequence[str] | None = None) -> int:
    """One rank: ``python -m adass.experiments.bench.ddp_lab --config FILE --rank R ... --out FILE.json``."""
    parser = argparse.ArgumentParser(prog="python -m adass.experiments.bench.ddp_lab")
    for name in ("--config", "--master", "--hook", "--host", "--out"):
        parser.add_argument(name, required=True)
    for name in ("--rank", "--world", "--port"):
        parser.add_argument(name, required=True, type=int)
    parser.add_argument("--timeout-s", required=True, type=float)
    args = parser.parse_args(argv)
    config = json.loads(Path(args.config).read_text())
    store = tcp_store(
        args.master, args.port, args.rank, args.world, datetime.timedelta(seconds=args.timeout_s)
    )
    report = ddp_rank(config, args.rank, args.world, store, args.timeout_s, args.hook, args.host)
    report.setdefault("test_acc", float("nan"))
    report.setdefault("test_loss", float("nan"))
    Path(args.out).write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
