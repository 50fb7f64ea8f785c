"""Run configuration: one definition per option (bounds and a one-line doc), grouped in sections.

The CLI flags, the dashboard widgets and validation all come from these ``param`` classes; values are
parsed and checked by :mod:`adass.options`, as plug-in parameters are. Options whose value is a
plug-in spec (``--sampler adass:eps=0.2``) are checked against their registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import param

from .codecs import CODECS, Codec
from .data import DATASETS, SHARDINGS
from .devices import DEVICES, check_device
from .exchange import EXCHANGES, check, topology_of
from .exchange.link import parse_link
from .locations import check_location
from .memory import MEMORIES, build_pair, split_memory
from .models import MODELS
from .options import allowed, check_value
from .registry import Registry, SpecError
from .sampling import SAMPLERS
from .scheduler_address import parse_scheduler_address
from .straggler import parse_straggler

__all__ = [
    "ClusterSection",
    "CodecSection",
    "DataSection",
    "ExchangeSection",
    "ModelSection",
    "OptimSection",
    "RunConfig",
    "SamplerSection",
    "RUN_OPTIONS",
    "SECTIONS",
    "SPEC_PARSERS",
    "SPEC_REGISTRIES",
    "allowed_text",
    "check_option",
    "codec_probe",
    "flag_for",
    "options",
    "registry_for",
]


class DataSection(param.Parameterized):
    data = param.String(
        "mnist5k",
        doc="data set spec NAME:key=value (loaders of files take a path)",
    )
    shard = param.String("iid", doc="how the training set is split across replicas")
    data_to_workers = param.Selector(
        objects=["auto", "read", "stream"],
        default="auto",
        doc="how Dask replicas get their shard: read it from --data (a URL or a path on their machine), "
        "stream (the client sends each its rows), auto (read where the files are there, else stream)",
    )
    train_rows = param.Selector(
        objects=["auto", "memory", "file"],
        default="auto",
        doc="where a Dask replica that reads its shard keeps the training rows: memory (read once), file (read "
        "each batch's rows from --data as it trains, for shards larger than a worker's memory; npy data only), "
        "auto (file where the shard would take more than a quarter of the worker's memory limit and the "
        "format allows it, else memory)",
    )


class ModelSection(param.Parameterized):
    model = param.String("mlp:hidden=128", doc="model spec NAME:key=value")


class SamplerSection(param.Parameterized):
    sampler = param.String("full", doc="sample-selection policy spec NAME:key=value")


class OptimSection(param.Parameterized):
    epochs = param.Integer(20, bounds=(1, 100_000), doc="training epochs")
    batch_size = param.Integer(64, bounds=(1, 1_000_000), doc="samples per step (global batch)")
    lr = param.Number(0.05, bounds=(1e-8, 100.0), doc="learning rate")
    momentum = param.Number(0.9, bounds=(0.0, 0.999), doc="SGD momentum (0 for plain SGD)")
    weight_decay = param.Number(0.0, bounds=(0.0, 1.0), doc="L2 weight decay")
    schedule = param.Selector(
        objects=["constant", "step", "cosine"], default="cosine", doc="learning-rate schedule"
    )
    seed = param.Integer(0, bounds=(0, 2**31 - 1), doc="run seed (data split, init, sampling, codecs)")
    max_nonfinite = param.Integer(
        5,
        bounds=(1, 1_000_000),
        doc="steps in a row with a non-finite loss or gradient (each skipped) after which the run stops",
    )
    diverge_factor = param.Number(
        1000.0,
        bounds=(0.0, None),
        doc="stop the run when an epoch's training loss exceeds this many times its first step's (0: never)",
    )
    chance_epochs = param.Integer(
        5,
        bounds=(0, 100_000),
        doc="stop the run when test accuracy stays within 0.02 of chance (the largest test class's share) "
        "this many epochs in a row, from its third epoch on (0: never)",
    )


class CodecSection(param.Parameterized):
    codec = param.String(
        "fp32",
        doc="gradient codec spec NAME:key=value; A+B stacks two codecs, MEMORY(SPEC) names a --memory too",
    )
    memory = param.String(
        "none",
        doc="what each replica keeps of its own gradient from step to step (error feedback, momentum corrections)",
    )


class ExchangeSection(param.Parameterized):
    exchange = param.String(
        "ring",
        doc="how gradients are averaged: an exchange spec NAME:key=value",
    )
    link = param.String(
        "",
        doc="simulated link BANDWIDTH,LATENCY (e.g. 1gbit,50us) that throttles every transfer; empty: none",
    )


class ClusterSection(param.Parameterized):
    workers = param.Integer(
        0, bounds=(0, 256), doc="Dask workers holding model replicas (0: train in this process)"
    )
    replicas = param.Integer(
        0,
        bounds=(0, 256),
        doc="virtual replicas on threads of this process, the same run as --workers without Dask (0: none)",
    )
    scheduler = param.String(
        "", doc="Dask scheduler address (tcp://HOST:PORT); empty: an embedded LocalCluster"
    )
    timeout_s = param.Number(
        300.0, bounds=(5.0, 86_400.0), doc="seconds a replica waits for the others before the run fails"
    )
    bind = param.String(
        "",
        doc="interface or address each worker's process group binds (e.g. eth0); empty: the one holding the worker's own Dask address",
    )
    threads = param.Integer(
        1,
        bounds=(0, 1024),
        doc="torch intra-op threads of every training process, pinned so wall times compare (0: torch's default)",
    )
    detect_s = param.Number(
        30.0,
        bounds=(1.0, 3_600.0),
        doc="seconds without a heartbeat after which a worker counts as lost (embedded cluster)",
    )
    dask_dashboard = param.Boolean(
        False,
        doc="embedded cluster: serve Dask's own dashboard (logs, call stacks; plain HTTP, no login) on 127.0.0.1; off: none",
    )
    tls_ca = param.String(
        "", doc="external scheduler: CA certificate file (PEM) the cluster's certificates are signed with"
    )
    tls_cert = param.String("", doc="external scheduler: this client's certificate file (PEM)")
    tls_key = param.String("", doc="external scheduler: this client's private key file (PEM)")
    straggler = param.String(
        "",
        doc="slow one replica by a sleep per step: RANK:DELAY_S, or each in turn for STEPS steps: rotate:DELAY_S:STEPS; empty: none",
    )
    device = param.Selector(
        objects=list(DEVICES),
        default="auto",
        doc="where replicas train: auto takes CUDA where every replica has a GPU of its own, else the CPU",
    )
    restarts = param.Integer(
        2,
        bounds=(0, 100),
        doc="times a run that lost a worker restarts from its last checkpoint on the workers the cluster has",
    )
    min_workers = param.Integer(
        1,
        bounds=(1, 256),
        doc="the fewest replicas a run that lost workers for good goes on with; fewer end it",
    )
    max_workers = param.Integer(
        0,
        bounds=(0, 256),
        doc="the most replicas: workers that join a running job (or come back) are taken in at the next commit "
        "point (as the next epoch begins where replicas cannot pause mid-epoch), up to this many (0: --workers)",
    )
    commit_steps = param.Integer(
        20,
        bounds=(0, 1_000_000),
        doc="steps between in-memory commits of every Dask replica: a lost worker costs at most this many steps "
        "instead of its epoch (lock-step exchanges; a PS server shard commits too; 0: none, back to the epoch "
        "checkpoint)",
    )
    checkpoint = param.String(
        "",
        doc="where checkpoints go: a folder or an fsspec URL (file://, s3://, gs://, ...); empty: the run's --out",
    )
    checkpoint_writer = param.Selector(
        objects=["auto", "workers", "client"],
        default="auto",
        doc="who writes Dask replicas' checkpoints: workers (each its own file), client (states travel to it), "
        "auto (workers where every one of them sees --checkpoint, else the client)",
    )


SECTIONS: dict[str, type[param.Parameterized]] = {
    "data": DataSection,
    "model": ModelSection,
    "sampler": SamplerSection,
    "optim": OptimSection,
    "codec": CodecSection,
    "exchange": ExchangeSection,
    "cluster": ClusterSection,
}

# option name -> the registry of the plug-ins its spec names
SPEC_REGISTRIES: dict[str, Registry] = {
    "data": DATASETS,
    "shard": SHARDINGS,
    "model": MODELS,
    "sampler": SAMPLERS,
    "codec": CODECS,
    "memory": MEMORIES,
    "exchange": EXCHANGES,
}


@lru_cache(maxsize=64)
def codec_probe(spec: str, memory: str = "none") -> Codec:
    """The codec ``spec`` builds (with ``memory``, which the spec may name itself: ``ef(SPEC)``), for
    checks only: never train with it (it may keep state). Built once per spec and process, however
    often configurations are validated: every replica validates its configuration again, and
    comparisons validate each arm.
    """
    return build_pair(spec, memory)[0]


@lru_cache(maxsize=64)
def _checked_pair(exchange: str, codec: str, memory: str) -> str:
    return check(exchange, codec_probe(codec, memory), split_memory(codec, memory)[1])


# options whose spec grammar goes beyond one registry entry (checked by these, not by the registry's
# validate): option name -> parser(text) -> object
SPEC_PARSERS: dict[str, Callable[[str], object]] = {
    "codec": lambda spec: codec_probe(spec, "none"),  # the same cache key as the pair checks use
    "link": parse_link,
    "straggler": parse_straggler,
    "scheduler": parse_scheduler_address,
    "checkpoint": check_location,
}


def registry_for(option: str) -> Registry | None:
    """The registry whose plug-ins an option's spec names, or None for plain options."""
    return SPEC_REGISTRIES.get(option)


def flag_for(option: str) -> str:
    """The command-line flag of an option: ``batch_size`` -> ``--batch-size``."""
    return "--" + option.replace("_", "-")


allowed_text = allowed  # what a parameter accepts, in words (one text for every kind of option)


def check_option(option: str, p: param.Parameter, raw: Any, flag: str | None = None) -> Any:
    """Convert and validate one option value; raise SpecError with one line naming the flag.

    Parameters
    ----------
    option : str
        The option's name; a spec option is also checked against its registry or parser.
    p : param.Parameter
        Its definition.
    raw : Any
        Text from a flag or a widget, or a Python value.
    flag : str, optional
        The flag named in messages (``--samplers`` for an item of that list); ``--OPTION`` by default.
    """
    flag = flag or flag_for(option)
    value = check_value(p, raw, flag)
    try:
        if option in SPEC_PARSERS:
            if str(value):
                SPEC_PARSERS[option](str(value))
        elif (registry := registry_for(option)) is not None:
            value = registry.validate(str(value))
    except SpecError as err:
        raise SpecError(f"{flag}: {err}") from None
    return value


def options(section: type[param.Parameterized]) -> dict[str, param.Parameter]:
    """The options a section (or any param class) defines, by name."""
    return {k: v for k, v in section.param.objects("existing").items() if k != "name"}


# every run option by name (names are unique across sections)
RUN_OPTIONS: dict[str, param.Parameter] = {k: p for s in SECTIONS.values() for k, p in options(s).items()}


#: options that only a run on Dask workers uses, and why
_DASK_ONLY = {
    "scheduler": "it places Dask workers",
    "bind": "it places Dask workers",
    "data_to_workers": "it says how Dask workers get their data",
    "train_rows": "it says where Dask workers keep the data they read",
    "checkpoint_writer": "it says who writes Dask workers' checkpoints",
    "commit_steps": "Dask replicas commit their state",
    "min_workers": "it counts Dask workers",
    "max_workers": "it counts Dask workers",
}


@dataclass
class RunConfig:
    """All sections of one run; ``RunConfig.from_flat(epochs=5, sampler="adass")`` validates each value."""

    data: DataSection
    model: ModelSection
    sampler: SamplerSection
    optim: OptimSection
    codec: CodecSection
    exchange: ExchangeSection
    cluster: ClusterSection

    @classmethod
    def from_flat(cls, **values: Any) -> RunConfig:
        unknown = set(values) - set(RUN_OPTIONS)
        if unknown:
            raise SpecError(f"unknown option {flag_for(sorted(unknown)[0])}")
        sections = {}
        for name, section in SECTIONS.items():
            kwargs = {}
            for option, p in options(section).items():
                if option in values and values[option] is not None:
                    kwargs[option] = check_option(option, p, values[option])
            sections[name] = section(**kwargs)
        config = cls(**sections)
        config.check_pairs()
        return config

    @property
    def backend(self) -> str:
        """Where the replicas live: ``"dask"`` (``--workers``), ``"threads"`` (``--replicas``) or
        ``"local"`` (one model in this process)."""
        if self.cluster.workers:
            return "dask"
        return "threads" if self.cluster.replicas else "local"

    @property
    def world(self) -> int:
        """Model replicas of the run (1 for a run in this process)."""
        return self.cluster.workers or self.cluster.replicas or 1

    @property
    def servers(self) -> int:
        """Ranks the exchange needs besides the replicas (Parameter Server shards on their own ranks)."""
        entry, values = EXCHANGES.resolve(self.exchange.exchange)
        return int(topology_of(entry.name).extra_ranks(**values))

    def colocated_shards(self) -> dict[int, int]:
        """``{replica rank: shard}`` of the PS shards that replicas serve (``colocated=true``); else empty."""
        entry, values = EXCHANGES.resolve(self.exchange.exchange)
        return dict(topology_of(entry.name).colocated_shards(**values))

    def check_pairs(self) -> None:
        """Checks across options: the memory is named once and suits the codec, the exchange must be
        able to carry the codec and its memory, and options that need several replicas (or Dask)
        must have them."""
        try:
            codec_probe(self.codec.codec, self.codec.memory)
        except SpecError as err:
            raise SpecError(f"--memory/--codec: {err}") from None
        try:
            _checked_pair(self.exchange.exchange, self.codec.codec, self.codec.memory)
        except SpecError as err:
            raise SpecError(f"--exchange/--codec: {err}") from None
        c, flat = self.cluster, self.flat()
        if c.workers and c.replicas:
            raise SpecError(f"--replicas: {c.replicas} needs --workers 0 (replicas live on threads of this "
                            f"process or on {c.workers} Dask workers, not both)")  # fmt: skip
        count = "--workers" if c.workers else "--replicas"
        if self.backend != "local":  # what the exchange needs of the replica count (colocated PS shards)
            entry, values = EXCHANGES.resolve(self.exchange.exchange)
            try:
                topology_of(entry.name).check_workers(self.world, **values)
            except SpecError as err:
                raise SpecError(f"--exchange/{count}: {err}") from None
        needs = (
            {"codec": "fp32", "memory": "none", "link": "", "straggler": ""}
            if self.backend == "local"
            else {}
        )
        if self.backend != "dask":
            needs.update({option: RUN_OPTIONS[option].default for option in _DASK_ONLY})
        for option, default in needs.items():
            if flat[option] != default:
                wanted, why = (("--workers 1 or more", _DASK_ONLY[option]) if option in _DASK_ONLY
                               else ("--workers or --replicas", "a single process exchanges nothing"))  # fmt: skip
                raise SpecError(f"{flag_for(option)}: {flat[option]!r} needs {wanted} ({why})")
        self._check_train_rows()
        if c.workers and c.max_workers and c.max_workers < c.workers:
            raise SpecError(f"--max-workers: {c.max_workers} is below --workers {c.workers}; allowed: 0 "
                            f"(the run's --workers) or {c.workers} and more")  # fmt: skip
        if c.workers and c.min_workers > c.workers:
            raise SpecError(
                f"--min-workers: {c.min_workers} is above --workers {c.workers}; allowed: 1 to {c.workers}"
            )
        rank = parse_straggler(c.straggler).rank
        if rank is not None and self.backend != "local" and rank >= self.world:
            raise SpecError(f"--straggler: rank {rank} is not a replica of {count} {self.world}; "
                            f"expected 0..{self.world - 1}")  # fmt: skip
        if c.dask_dashboard and (self.backend != "dask" or c.scheduler):
            why = ("an external cluster serves its own" if c.scheduler
                   else "it is the embedded Dask cluster's; needs --workers 1 or more")  # fmt: skip
            raise SpecError(f"--dask-dashboard: not for this run ({why})")
        if not c.scheduler:  # replicas on this machine; a cluster's workers are asked when it connects
            check_device(c.device)
            for option in ("tls_ca", "tls_cert", "tls_key"):
                if getattr(c, option):
                    raise SpecError(
                        f"{flag_for(option)}: needs --scheduler (the embedded cluster makes its own credentials)"
                    )

    def _check_train_rows(self) -> None:
        """Rows can stay in a file only where the replica reads its shard from one with fixed-size rows."""
        d = self.data
        if d.train_rows != "file":
            return
        if d.data_to_workers == "stream":
            raise SpecError(
                "--train-rows: 'file' needs --data-to-workers read or auto (streamed rows have no file)"
            )
        name = DATASETS.resolve(d.data)[0].name
        if not DATASETS.keeps_in_file.get(name, False):
            raise SpecError(f"--train-rows: 'file' is not allowed for --data {name}: its files are read whole; "
                            f"allowed for {', '.join(DATASETS.in_file_names())}")  # fmt: skip

    @classmethod
    def from_dict(cls, nested: dict[str, dict[str, Any]]) -> RunConfig:
        flat = {k: v for name in SECTIONS for k, v in nested.get(name, {}).items()}
        return cls.from_flat(**flat)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {
            name: {k: getattr(getattr(self, name), k) for k in options(section)}
            for name, section in SECTIONS.items()
        }

    def replace(self, **changes: Any) -> RunConfig:
        """A validated copy with some options changed (``config.replace(seed=1, sampler="full")``)."""
        return RunConfig.from_flat(**{**self.flat(), **changes})

    def flat(self) -> dict[str, Any]:
        return {k: v for sec in self.to_dict().values() for k, v in sec.items()}
