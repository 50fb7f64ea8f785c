"""The full ``adass`` argument parser: one flag per option definition (adass.config and
adass.cli.command_options), and every plug-in with its parameters in the commands' epilogs.

Building it imports every registry (and so torch); ``adass --help`` alone never gets here.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence

import param

from ..config import SECTIONS, ClusterSection, allowed_text, flag_for, options, registry_for
from .command_options import (
    LIST_ITEMS,
    BenchOptions,
    CompareOptions,
    DashboardOptions,
    ReproduceOptions,
    TrainOptions,
)
from .outline import COMMANDS, top_parser

__all__ = ["build_parser"]


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


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Option help wrapped between words, and in a list of names (``a|b|c``) after a ``|``: a name
    is never cut in two."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        spaced = " ".join(text.replace("|", "| ").split())
        return [line.replace("| ", "|") for line in textwrap.wrap(spaced, width, break_long_words=False)]


def build_parser() -> argparse.ArgumentParser:
    parser, sub = top_parser()

    raw = _HelpFormatter
    p_train = sub.add_parser(
        "train", help=COMMANDS["train"], description="Train one model.",
        epilog=_spec_epilog(), formatter_class=raw,
    )  # fmt: skip
    _add_config_options(p_train)
    _add_options(p_train, TrainOptions)

    p_cmp = sub.add_parser(
        "compare", help=COMMANDS["compare"],
        description="Train each sampler for each seed on the same data; write DIR/compare.csv and compare.md.",
        epilog=_spec_epilog(lists=("samplers", "exchanges")), formatter_class=raw,
    )  # fmt: skip
    _add_options(p_cmp, CompareOptions)
    _add_config_options(p_cmp, skip=("sampler",))

    from ..experiments.bench import SUITES

    p_bench = sub.add_parser(
        "bench", help=COMMANDS["bench"],
        description="Suites: " + "; ".join(f"{k}: {v}" for k, v in SUITES.items()),
    )  # fmt: skip
    p_bench.add_argument("suite", choices=sorted(SUITES), help="which benchmark")
    _add_options(p_bench, BenchOptions)

    p_repro = sub.add_parser(
        "reproduce", help=COMMANDS["reproduce"],
        description="Run the experiments behind each claim (several seeds) and write DIR/report.md with "
                    "tables (CSV beside it), PNG plots under DIR/plots, the environment and one computed "
                    "verdict per claim. The full run is sized for mnist5k and the hard synthetic set; --quick "
                    "is a smoke run. Every finished run is kept under DIR/runs at once: the same command "
                    "again resumes (--overwrite starts afresh); --jobs N spreads the independent runs.",
    )  # fmt: skip
    _add_options(p_repro, ReproduceOptions)

    p_dash = sub.add_parser(
        "dashboard", help=COMMANDS["dashboard"],
        description="Serve the live dashboard: every run option, Start/Stop, live selection, traffic and "
                    "accuracy views, and saved runs overlaid for comparison.",
    )  # fmt: skip
    _add_options(p_dash, DashboardOptions)
    _add_options(p_dash, ClusterSection, only=("scheduler",))
    from ..netlab import add_netlab_parser

    add_netlab_parser(sub)
    return parser
