"""The ``adass`` command: ``train``, ``compare``, ``bench`` and ``dashboard``; run flags come from adass.config.

Bad input exits with status 2 and one line naming the option, the value and what is allowed, before
anything is written to disk.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import param

from . import __version__
from .command_options import (
    LIST_ITEMS,
    BenchOptions,
    CompareOptions,
    DashboardOptions,
    TrainOptions,
    check_command_options,
)
from .config import (
    RUN_OPTIONS,
    SECTIONS,
    ClusterSection,
    RunConfig,
    allowed_text,
    check_option,
    flag_for,
    options,
    registry_for,
)
from .failures import RunFailure, one_line
from .registry import SpecError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block) and exit with status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _option_help(option: str, p: param.Parameter) -> str:
    """The definition's doc, its default and what it accepts (the plug-in names of a spec option)."""
    text = p.doc
    if not isinstance(p, param.Boolean) and p.default not in (None, "", []):
        text += f"; default {p.default!s}"
    registry = registry_for(LIST_ITEMS.get(option, option))
    if registry is not None:
        return f"{text}; one of {'|'.join(registry.names())} (parameters below)"
    if isinstance(p, (param.Number, param.Selector)):
        return f"{text}; {allowed_text(p)}"
    return text


def _metavar(p: param.Parameter) -> str:
    if isinstance(p, param.Foldername):
        return "DIR"
    return "SPEC" if isinstance(p, param.List) else "VALUE"


def _add_options(
    parser: argparse.ArgumentParser, definitions: type[param.Parameterized], skip: Sequence[str] = (),
    only: Sequence[str] | None = None,
) -> None:  # fmt: skip
    """One flag per option of a param class: ``--name VALUE``, ``--name SPEC [SPEC ...]`` for lists,
    a switch for booleans that default to false. Values stay text here; they are checked later."""
    required = getattr(definitions, "required", ())
    for option, p in options(definitions).items():
        if option in skip or (only is not None and option not in only):
            continue
        flag, text = flag_for(option), _option_help(option, p)
        if isinstance(p, param.Boolean) and p.default is False:
            parser.add_argument(flag, dest=option, action="store_true", help=text)
            continue
        nargs = "+" if isinstance(p, param.List) else None
        parser.add_argument(flag, dest=option, nargs=nargs, default=None, metavar=_metavar(p),
                            required=option in required, help=text)  # fmt: skip


def _spec_epilog(lists: Sequence[str] = ()) -> str:
    """The plug-ins every spec option (and each of the command's ``lists``) accepts, with each
    parameter's allowed values."""
    parts = ["spec options take NAME or NAME:key=value,key=value"]
    for section in SECTIONS.values():
        for option in options(section):
            registry = registry_for(option)
            if registry is not None:
                flags = [flag_for(option)] + [flag_for(k) for k in lists if LIST_ITEMS[k] == option]
                parts.append(f"\n{registry.kind} specs ({'/'.join(flags)}):\n{registry.help()}")
    return "\n".join(parts)


def _add_config_options(parser: argparse.ArgumentParser, skip: Sequence[str] = ()) -> None:
    for section_name, section in SECTIONS.items():
        _add_options(parser.add_argument_group(f"{section_name} options"), section, skip=skip)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="adass",
        description="Distributed machine learning with adaptive sample selection (ADASS).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"adass {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    raw = argparse.RawDescriptionHelpFormatter
    p_train = sub.add_parser(
        "train", help="train one model and write its records", description="Train one model.",
        epilog=_spec_epilog(), formatter_class=raw,
    )  # fmt: skip
    _add_config_options(p_train)
    _add_options(p_train, TrainOptions)

    p_cmp = sub.add_parser(
        "compare", help="several samplers x seeds side by side, writes compare.csv",
        description="Train each sampler for each seed on the same data; write DIR/compare.csv and compare.md.",
        epilog=_spec_epilog(lists=("samplers", "exchanges")), formatter_class=raw,
    )  # fmt: skip
    _add_options(p_cmp, CompareOptions)
    _add_config_options(p_cmp, skip=("sampler",))

    from .bench import SUITES

    p_bench = sub.add_parser(
        "bench", help="benchmark suites (tables to DIR/<suite>.md and .csv)",
        description="Suites: " + "; ".join(f"{k}: {v}" for k, v in SUITES.items()),
    )  # fmt: skip
    p_bench.add_argument("suite", choices=sorted(SUITES), help="which benchmark")
    _add_options(p_bench, BenchOptions)

    p_dash = sub.add_parser(
        "dashboard", help="serve the live dashboard (dashboards/app.py) with Panel",
        description="Serve the live dashboard: every run option, Start/Stop, live selection, traffic and "
                    "accuracy views, and saved runs overlaid for comparison.",
    )  # fmt: skip
    _add_options(p_dash, DashboardOptions)
    _add_options(p_dash, ClusterSection, only=("scheduler",))
    return parser


def _config_from(args: argparse.Namespace) -> RunConfig:
    flat = {k: v for k, v in vars(args).items() if k in RUN_OPTIONS}
    return RunConfig.from_flat(**flat)


def _checked(command: type[param.Parameterized], args: argparse.Namespace) -> argparse.Namespace:
    """The command's own options from ``args``, parsed and checked against their definitions."""
    return argparse.Namespace(**check_command_options(command, vars(args)))


def _check_out(out_dir: str, overwrite: bool, marker: str) -> Path:
    """``--out`` (already known to be a folder or nothing yet) must not hold results unless ``--overwrite``."""
    if not str(out_dir).strip():
        raise SpecError("--out: an empty path; name a folder")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SpecError(f"--out: {out_dir!r} is a file, not a folder")
    if (out / marker).exists() and not overwrite:
        raise SpecError(f"--out: {out_dir!r} already holds results ({marker}); choose another folder or pass --overwrite")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from . import commands
    from .allocator import keep_freed_memory

    keep_freed_memory()
    try:
        if args.command == "train":
            opts = _checked(TrainOptions, args)
            if opts.resume is not None:
                _refuse_with_resume(args)
                return commands.run_resume(Path(opts.resume), args.epochs, quiet=opts.quiet)
            if opts.out is None:
                raise SpecError("--out: a folder is required (or --resume DIR)")
            config = _config_from(args)
            out = _check_out(opts.out, opts.overwrite, "config.json")
            return commands.run_train(config, out, quiet=opts.quiet)
        if args.command == "compare":
            config = _config_from(args)
            opts = _checked(CompareOptions, args)
            if (opts.exchanges or opts.codecs) and not config.cluster.workers:
                raise SpecError("--exchanges/--codecs: need --workers 1 or more")
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
        opts = _checked(BenchOptions, args)
        out = _check_out(opts.out, opts.overwrite, f"{args.suite}.csv")
        return commands.run_bench(args.suite, out, quick=opts.quick)
    except (SpecError, RunFailure) as err:
        print(f"adass {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"adass {args.command}: interrupted; the last finished epoch's checkpoint is kept",
            file=sys.stderr,
        )
        return 130
    except Exception as err:  # gloo, Dask, torch: one line naming what failed, not a traceback
        if os.environ.get("ADASS_TRACEBACK"):
            raise
        print(
            f"adass {args.command}: error: {one_line(err)} (ADASS_TRACEBACK=1 shows where)", file=sys.stderr
        )
        return 1


def _refuse_with_resume(args: argparse.Namespace) -> None:
    """``--resume`` takes the saved run's options; only ``--epochs`` may be given beside it."""
    given = [
        flag_for(k) for k in RUN_OPTIONS if k != "epochs" and getattr(args, k, None) not in (None, False)
    ]
    if given:
        raise SpecError(f"--resume: {', '.join(given)} cannot change a saved run (only --epochs can); "
                        "drop them, or train anew with --out")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
