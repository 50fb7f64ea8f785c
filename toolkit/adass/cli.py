"""The ``adass`` command: ``train``, ``compare``, ``bench`` and ``dashboard``; run flags come from adass.config.

Bad input exits with status 2 and one line naming the option, the value and what is allowed, before
anything is written to disk.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .config import SECTIONS, RunConfig, allowed_text, check_option, options, registry_for
from .registry import SpecError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block) and exit with status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _option_help(option: str, p) -> str:
    text = f"{p.doc}; default {p.default!s}"
    registry = registry_for(option)
    if registry is None:
        return f"{text}; {allowed_text(p)}"
    return f"{text}; one of {'|'.join(registry.names())} (parameters below)"


def _spec_epilog(skip: Sequence[str] = ()) -> str:
    """The plug-ins every spec option accepts, with each parameter's allowed values."""
    parts = ["spec options take NAME or NAME:key=value,key=value"]
    for section in SECTIONS.values():
        for option in options(section):
            registry = registry_for(option)
            if registry is not None and option not in skip:
                flag = "--" + option.replace("_", "-") + ("/--samplers" if option == "sampler" else "")
                parts.append(f"\n{registry.kind} specs ({flag}):\n{registry.help()}")
    return "\n".join(parts)


def _add_config_options(parser: argparse.ArgumentParser, skip: Sequence[str] = ()) -> None:
    for section_name, section in SECTIONS.items():
        group = parser.add_argument_group(f"{section_name} options")
        for option, p in options(section).items():
            if option in skip:
                continue
            flag = "--" + option.replace("_", "-")
            group.add_argument(flag, dest=option, default=None, metavar="VALUE", help=_option_help(option, p))


def _add_out(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--out", required=required, metavar="DIR", help="folder for records and tables")
    parser.add_argument("--overwrite", action="store_true", help="allow an --out folder that already holds results")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


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
    _add_out(p_train, required=False)
    p_train.add_argument("--resume", metavar="DIR", help="continue the distributed run in DIR from its last checkpoint "
                         "(its config.json is used; --epochs may raise the epoch count)")  # fmt: skip

    p_cmp = sub.add_parser(
        "compare", help="several samplers x seeds side by side, writes compare.csv",
        description="Train each sampler for each seed on the same data; write DIR/compare.csv and compare.md.",
        epilog=_spec_epilog(), formatter_class=raw,
    )  # fmt: skip
    p_cmp.add_argument("--samplers", nargs="+", required=True, metavar="SPEC",
                       help="sampler specs separated by spaces (a spec may hold commas); full is added as reference")  # fmt: skip
    p_cmp.add_argument("--seeds", default="1", metavar="K", help="seeds per sampler (seed, seed+1, ..); an integer in [1, 100]")
    p_cmp.add_argument("--exchanges", nargs="+", default=[], metavar="SPEC",
                       help="with --workers: several exchange specs, each run with every sampler and codec")  # fmt: skip
    p_cmp.add_argument("--codecs", nargs="+", default=[], metavar="SPEC",
                       help="with --workers: several codec specs, each run with every sampler and exchange")  # fmt: skip
    _add_config_options(p_cmp, skip=("sampler",))
    _add_out(p_cmp)

    from .bench import SUITES

    p_bench = sub.add_parser(
        "bench", help="benchmark suites (tables to DIR/<suite>.md and .csv)",
        description="Suites: " + "; ".join(f"{k}: {v}" for k, v in SUITES.items()),
    )  # fmt: skip
    p_bench.add_argument("suite", choices=sorted(SUITES), help="which benchmark")
    p_bench.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    _add_out(p_bench)

    p_dash = sub.add_parser(
        "dashboard", help="serve the live dashboard (dashboards/app.py) with Panel",
        description="Serve the live dashboard: every run option, Start/Stop, live selection, traffic and "
                    "accuracy views, and saved runs overlaid for comparison.",
    )  # fmt: skip
    p_dash.add_argument("--port", default="5006", metavar="P", help="port to serve on; an integer in [1, 65535]; default 5006")
    p_dash.add_argument("--address", default="127.0.0.1", metavar="ADDR",
                        help="address to listen on; default 127.0.0.1 (this machine only)")  # fmt: skip
    p_dash.add_argument("--scheduler", default="", metavar="ADDR",
                        help="default Dask scheduler for runs started from the page (tcp://HOST:PORT); "
                             "empty: an embedded LocalCluster per run")  # fmt: skip
    p_dash.add_argument("--runs", default=None, metavar="DIR",
                        help="folder of saved runs to compare (searched 3 levels deep); new runs are saved here")  # fmt: skip
    p_dash.add_argument("--show", action="store_true", help="open the page in a browser")
    return parser


def _config_from(args: argparse.Namespace) -> RunConfig:
    flat = {k: v for k, v in vars(args).items() if k in {o for s in SECTIONS.values() for o in options(s)}}
    return RunConfig.from_flat(**flat)


def _check_out(args: argparse.Namespace, marker: str) -> Path:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise SpecError(f"--out: {args.out!r} is a file; expected a folder")
    if (out / marker).exists() and not args.overwrite:
        raise SpecError(f"--out: {args.out!r} already holds results ({marker}); choose another folder or pass --overwrite")
    return out


def _seeds(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= 100:
        raise SpecError(f"--seeds: {raw!r} is not allowed; expected an integer in [1, 100]")
    return value


def _port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise SpecError(f"--port: {raw!r} is not allowed; expected an integer in [1, 65535]")
    return value


def _runs_folder(raw: str | None) -> Path | None:
    if raw is None:
        return None
    if not Path(raw).is_dir():
        raise SpecError(f"--runs: {raw!r} is not a folder; expected a folder of saved runs")
    return Path(raw)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from . import commands
    from .allocator import keep_freed_memory

    keep_freed_memory()
    try:
        if args.command == "train" and args.resume:
            return commands.run_resume(Path(args.resume), args.epochs, quiet=args.quiet)
        if args.command == "train":
            if args.out is None:
                raise SpecError("--out: a folder is required (or --resume DIR)")
            config = _config_from(args)
            out = _check_out(args, "config.json")
            return commands.run_train(config, out, quiet=args.quiet)
        if args.command == "compare":
            config = _config_from(args)
            seeds = _seeds(args.seeds)
            if (args.exchanges or args.codecs) and not config.cluster.workers:
                raise SpecError("--exchanges/--codecs: need --workers 1 or more")
            out = _check_out(args, "compare.csv")
            return commands.run_compare(config, args.samplers, seeds, out, quiet=args.quiet,
                                        exchanges=args.exchanges, codecs=args.codecs)  # fmt: skip
        if args.command == "dashboard":
            port, runs = _port(args.port), _runs_folder(args.runs)
            scheduler = check_option("scheduler", options(SECTIONS["cluster"])["scheduler"], args.scheduler)
            return commands.run_dashboard(port, args.address, scheduler, runs, show=args.show)
        out = _check_out(args, f"{args.suite}.csv")
        return commands.run_bench(args.suite, out, quick=args.quick)
    except SpecError as err:
        print(f"adass {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
