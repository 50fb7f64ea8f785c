"""The options of the ``adass`` commands beside the run options: one ``param`` class per command.

Like the run options in :mod:`adass.config`, each is defined once (default, bounds, one-line doc);
``adass.cli`` makes the flags and their help from these classes and checks values with
:func:`check_command_options`, which parses and bounds-checks as :mod:`adass.options` does everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import param

from ..config import RUN_OPTIONS, check_option, flag_for, options
from ..devices import DEVICES

__all__ = [
    "LIST_ITEMS",
    "BenchOptions",
    "CompareOptions",
    "DashboardOptions",
    "OutputOptions",
    "ReproduceOptions",
    "TrainOptions",
    "check_command_options",
]


class OutputOptions(param.Parameterized):
    """Where a command writes its records and tables."""

    required: tuple[str, ...] = ("out",)

    out = param.Foldername(None, check_exists=False, doc="folder for records and tables")
    overwrite = param.Boolean(False, doc="allow an --out folder that already holds results")
    quiet = param.Boolean(False, doc="no progress bar")


class TrainOptions(OutputOptions):
    """``adass train``: ``--out`` for a new run, or ``--resume`` for a saved one."""

    required: tuple[str, ...] = ()

    resume = param.Foldername(
        None,
        doc="continue the distributed run in DIR from its last checkpoint "
        "(its config.json is used; --epochs may raise the epoch count, --workers and the cluster "
        "options say where it goes on)",
    )


class CompareOptions(OutputOptions):
    """``adass compare``: the arms and how many seeds each gets."""

    required: tuple[str, ...] = ("samplers", "out")

    samplers = param.List(
        None, item_type=str,
        doc="sampler specs separated by spaces (a spec may hold commas); full is added as reference",
    )  # fmt: skip
    seeds = param.Integer(1, bounds=(1, 100), doc="seeds per sampler (seed, seed+1, ..)")
    exchanges = param.List(
        [], item_type=str, doc="with --workers: several exchange specs, each run with every sampler and codec"
    )
    codecs = param.List(
        [], item_type=str, doc="with --workers: several codec specs, each run with every sampler and exchange"
    )


class BenchOptions(OutputOptions):
    """``adass bench SUITE``."""

    quick = param.Boolean(False, doc="small sizes (a smoke run)")
    netlab = param.String(
        "",
        doc="dml and faults only: link rates of a network lab to run on, e.g. 1gbit,100mbit (faults: one "
        "rate; root and iproute2)",
    )
    straggler_only = param.Boolean(
        False, doc="dml only: run just the straggler case (ring vs sync, SSP and async parameter servers)"
    )
    lab_workers = param.Integer(
        None,
        allow_None=True,
        bounds=(2, 16),
        doc="dml --netlab only: replicas P on the lab, one host each plus one for the PS server "
        "(default 4; P at or under the CPU count gives every replica a core of its own)",
    )
    powersgd_only = param.Boolean(
        False,
        doc="dml --netlab only: run just DDP fp32 and the PowerSGD arms (torch's hook and the ring's codec "
        "at each rank, paired over rounds; the PS at rank 4)",
    )
    against = param.String(
        "", doc="equivalence only: the git revision whose results this tree must reproduce bit for bit"
    )
    device = param.Selector(
        objects=list(DEVICES), default="auto",
        doc="dml only (not with --netlab): where the replicas train, as train's --device",
    )  # fmt: skip
    seeds = param.Integer(
        None,
        allow_None=True,
        bounds=(1, 100),
        doc="frontier, adass_choice and faults only: seeds per point (default 5; faults 3)",
    )
    settings = param.String(
        "",
        doc="frontier and adass_choice only: the settings to run, comma-separated (default: all); frontier: mnist5k, "
        "synthetic-hard, vectors-56k, images-32; adass_choice: those and noisy-4k, short-3, short-6, vectors-56k-20, "
        "noisy-56k-20, mnist5k-30, mnist5k-logreg",
    )


class ReproduceOptions(OutputOptions):
    """``adass reproduce``."""

    quick = param.Boolean(
        False, doc="small data, few epochs and seeds: a smoke run of about ten minutes on two cores"
    )
    jobs = param.Integer(
        1,
        bounds=(1, None),
        doc="worker processes for the independent sampler and grid runs (results as with 1)",
    )


class DashboardOptions(param.Parameterized):
    """``adass dashboard`` (its ``--scheduler`` is the run option of the same name)."""

    required: tuple[str, ...] = ()

    port = param.Integer(5006, bounds=(1, 65535), doc="port to serve on")
    address = param.String("127.0.0.1", doc="address to listen on (127.0.0.1: this machine only)")
    runs = param.Foldername(
        None, doc="folder of saved runs to compare (searched 3 levels deep); new runs are saved here"
    )
    show = param.Boolean(False, doc="open the page in a browser")
    data_dir = param.List(
        [],
        item_type=str,
        doc="folders the page's runs may read data files from (none: bundled and synthetic data only)",
    )
    allow_scheduler = param.List(
        [],
        item_type=str,
        doc="Dask scheduler addresses the page's runs may use besides --scheduler (none: the embedded cluster only)",
    )
    max_workers = param.Integer(8, bounds=(1, 256), doc="most workers one run of the page may ask for")
    token = param.String(
        "", doc="password the page asks for; needed when --address is reachable from other machines"
    )


# list option -> the run option each of its items is checked as
LIST_ITEMS: dict[str, str] = {"samplers": "sampler", "exchanges": "exchange", "codecs": "codec"}


def check_command_options(command: type[param.Parameterized], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``command``: the given values parsed and checked, the others at their default.

    Parameters
    ----------
    command : type
        One of the classes above.
    given : mapping
        Raw values by option name (text from flags, lists for list options); None means not given.

    Raises
    ------
    SpecError
        One line naming the flag, the value and what is allowed.
    """
    values: dict[str, Any] = {}
    for option, p in options(command).items():
        raw = given.get(option)
        if raw is None:
            values[option] = list(p.default) if isinstance(p.default, list) else p.default
            continue
        value = check_option(option, p, raw)
        if option in LIST_ITEMS:
            item = LIST_ITEMS[option]
            value = [check_option(item, RUN_OPTIONS[item], v, flag=flag_for(option)) for v in value]
        values[option] = value
    return values
