"""The ``adass`` command's outline: its commands with their one-line help, and the top parser they hang on.

Light on purpose: ``adass --help`` and ``--version`` answer from here without importing the library.
"""

from __future__ import annotations

import argparse

from .. import __version__

__all__ = ["COMMANDS", "outline_parser", "top_parser"]

# each command's one-line help, as ``adass --help`` lists it
COMMANDS: dict[str, str] = {
    "train": "train one model and write its records",
    "compare": "several samplers x seeds side by side, writes compare.csv",
    "bench": "benchmark suites (tables to DIR/<suite>.md and .csv)",
    "dashboard": "serve the live dashboard with Panel (the page of dashboards/app.py)",
    "reproduce": "the experiments behind the thesis's three claims: DIR/report.md with tables, plots, verdicts",
    "netlab": "a network lab on this machine: namespaces on a bridge, links shaped by tc (root)",
}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block) and exit with status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def top_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The ``adass`` parser without its commands, and the action to add them to."""
    parser = _Parser(
        prog="adass",
        description="Distributed machine learning with adaptive sample selection (ADASS).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"adass {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    return parser, sub


def outline_parser() -> argparse.ArgumentParser:
    """The commands with their one-line help only: enough for ``adass --help``, ``--version`` and
    the error of a missing or unknown command."""
    parser, sub = top_parser()
    for command, text in COMMANDS.items():
        sub.add_parser(command, help=text, add_help=False)
    return parser
