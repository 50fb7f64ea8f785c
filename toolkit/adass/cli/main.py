"""The ``adass`` command: ``train``, ``compare``, ``bench``, ``reproduce`` and ``dashboard``; run flags come from adass.config.

Bad input exits with status 2 and one line naming the option, the value and what is allowed, before
anything is written to disk. ``adass --help`` lists the commands without importing the library (a
command's own help and every run import it: the parser lists each plug-in's parameters).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .outline import COMMANDS, outline_parser, top_parser

if TYPE_CHECKING:
    import param

    from ..config import RunConfig

__all__ = ["COMMANDS", "build_parser", "main", "top_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The full parser: every command with every flag (imports the registries)."""
    from .parser import build_parser as full_parser

    return full_parser()


def _config_from(args: argparse.Namespace) -> RunConfig:
    from ..config import RUN_OPTIONS, RunConfig

    flat = {k: v for k, v in vars(args).items() if k in RUN_OPTIONS}
    return RunConfig.from_flat(**flat)


def _checked(command: type[param.Parameterized], args: argparse.Namespace) -> argparse.Namespace:
    """The command's own options from ``args``, parsed and checked against their definitions."""
    from .command_options import check_command_options

    return argparse.Namespace(**check_command_options(command, vars(args)))


def _check_out(out_dir: str, overwrite: bool, marker: str) -> Path:
    """``--out`` (already known to be a folder or nothing yet) must not hold results unless ``--overwrite``."""
    from ..registry import SpecError

    if not str(out_dir).strip():
        raise SpecError("--out: an empty path; name a folder")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SpecError(f"--out: {out_dir!r} is a file, not a folder")
    if (out / marker).exists() and not overwrite:
        raise SpecError(
            f"--out: {out_dir!r} already holds results ({marker}); choose another folder or pass --overwrite"
        )
    return out


def _command_in(argv: Sequence[str]) -> str | None:
    """The command named in ``argv`` (its first word that is not an option), if it is one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _command_in(argv) is None:
        outline_parser().parse_args(argv)  # prints the help, the version or a one-line error; exits
    args = build_parser().parse_args(argv)
    from ..allocator import keep_freed_memory
    from ..config import ClusterSection, check_option
    from ..registry import SpecError
    from . import commands
    from .command_options import (
        BenchOptions,
        CompareOptions,
        DashboardOptions,
        ReproduceOptions,
        TrainOptions,
    )

    keep_freed_memory()
    if args.command == "netlab":
        from ..netlab import run_netlab

        return run_netlab(args)
    from ..failures import RunFailure, one_line
    from ..runtime.cluster.bootstrap import GroupConnectError

    try:
        if args.command == "train":
            opts = _checked(TrainOptions, args)
            if opts.resume is not None:
                changes = _resume_changes(args)
                return commands.run_resume(Path(opts.resume), changes, quiet=opts.quiet)
            if opts.out is None:
                raise SpecError("--out: a folder is required (or --resume DIR)")
            config = _config_from(args)
            out = _check_out(opts.out, opts.overwrite, "config.json")
            return commands.run_train(config, out, quiet=opts.quiet)
        if args.command == "compare":
            config = _config_from(args)
            opts = _checked(CompareOptions, args)
            if (opts.exchanges or opts.codecs) and config.backend == "local":
                raise SpecError("--exchanges/--codecs: need --workers or --replicas 1 or more")
            out = _check_out(opts.out, opts.overwrite, "compare.csv")
            return commands.run_compare(config, opts.samplers, opts.seeds, out, quiet=opts.quiet,
                                        exchanges=opts.exchanges, codecs=opts.codecs)  # fmt: skip
        if args.command == "dashboard":
            opts = _checked(DashboardOptions, args)
            scheduler = check_option("scheduler", ClusterSection.param["scheduler"], args.scheduler or "")
            runs = None if opts.runs is None else Path(opts.runs)
            return commands.run_dashboard(opts.port, opts.address, scheduler, runs, show=opts.show,
                                          data_dirs=opts.data_dir, allow_schedulers=opts.allow_scheduler,
                                          max_workers=opts.max_workers, token=opts.token)  # fmt: skip
        if args.command == "reproduce":
            opts = _checked(ReproduceOptions, args)
            from ..experiments.reproduce.store import RUNS

            # a folder holding finished runs is resumed; any other must be new or empty
            resume = bool(str(opts.out).strip()) and (Path(opts.out) / RUNS).is_dir()
            out = _check_out(opts.out, opts.overwrite or resume, "report.md")
            if out.is_dir() and any(out.iterdir()) and not (opts.overwrite or resume):
                raise SpecError(
                    f"--out: {opts.out!r} is not empty; choose another folder or pass --overwrite"
                )
            return commands.run_reproduce(out, argv, quick=opts.quick, quiet=opts.quiet, jobs=opts.jobs,
                                          fresh=opts.overwrite)  # fmt: skip
        opts = _checked(BenchOptions, args)
        out = _check_out(opts.out, opts.overwrite, f"{args.suite}.csv")
        return commands.run_bench(args.suite, out, quick=opts.quick, netlab=opts.netlab,
                                  straggler_only=opts.straggler_only, lab_workers=opts.lab_workers,
                                  powersgd_only=opts.powersgd_only,
                                  against=opts.against, device=opts.device, seeds=opts.seeds,
                                  settings=opts.settings)  # fmt: skip
    except (SpecError, GroupConnectError, RunFailure) as err:
        print(f"adass {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        kept = (
            "finished runs are kept under --out/runs (run again to resume); no report was written"
            if args.command == "reproduce"
            else "the last finished epoch's checkpoint is kept"
        )
        print(f"adass {args.command}: interrupted; {kept}", file=sys.stderr)
        return 130
    except Exception as err:  # gloo, Dask, torch: one line naming what failed, not a traceback
        if os.environ.get("ADASS_TRACEBACK"):
            raise
        print(
            f"adass {args.command}: error: {one_line(err)} (ADASS_TRACEBACK=1 shows where)", file=sys.stderr
        )
        return 1


#: what a resume may change: how long it trains, where (on which device) and on how many workers it
#: runs, how data and checkpoints reach them and where the replicas keep their rows (a checkpoint moved elsewhere is read there), and when the
#: divergence checks stop it (a run they stopped too early goes on from its last checkpoint)
RESUME_CHANGES = ("epochs", "workers", "replicas", "scheduler", "timeout_s", "detect_s", "restarts", "commit_steps", "min_workers", "max_workers", "bind",
                  "tls_ca", "tls_cert", "tls_key", "dask_dashboard", "diverge_factor", "chance_epochs", "device",
                  "data_to_workers", "train_rows", "checkpoint", "checkpoint_writer")  # fmt: skip


def _resume_changes(args: argparse.Namespace) -> dict[str, object]:
    """The options given beside ``--resume``; one line for any that would change the saved run."""
    from ..config import RUN_OPTIONS, flag_for
    from ..registry import SpecError

    given = {k: getattr(args, k) for k in RUN_OPTIONS if getattr(args, k, None) not in (None, False)}
    refused = [flag_for(k) for k in given if k not in RESUME_CHANGES]
    if refused:
        allowed = ", ".join(flag_for(k) for k in RESUME_CHANGES)
        raise SpecError(f"--resume: {', '.join(refused)} cannot change a saved run (only {allowed} can); "
                        "drop them, or train anew with --out")  # fmt: skip
    return given
