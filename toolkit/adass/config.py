"""Run configuration: one definition per option (bounds and a one-line doc), grouped in sections.

The CLI flags, the dashboard widgets and validation all come from these ``param`` classes. Options
whose value is a plug-in spec (``--sampler adass:eps=0.2``) are checked against their registry.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import param

from .registry import Registry, SpecError

__all__ = [
    "ClusterSection",
    "CodecSection",
    "DataSection",
    "ExchangeSection",
    "ModelSection",
    "OptimSection",
    "RunConfig",
    "SamplerSection",
    "SECTIONS",
    "SPEC_REGISTRIES",
    "allowed_text",
    "check_option",
]


class DataSection(param.Parameterized):
    data = param.String("mnist5k", doc="dataset spec (mnist5k, synthetic:..., idx:DIR, cifar10:DIR, svmlight:PATH)")
    shard = param.String("iid", doc="how the training set is split across workers (iid, dirichlet:alpha=..)")


class ModelSection(param.Parameterized):
    model = param.String("mlp:hidden=128", doc="model spec (logreg, mlp:hidden=.., lenet, resnet:depth=8|20)")


class SamplerSection(param.Parameterized):
    sampler = param.String("full", doc="sample-selection policy spec (full, random, infobatch, selective_backprop, adass)")


class OptimSection(param.Parameterized):
    epochs = param.Integer(20, bounds=(1, 100_000), doc="training epochs")
    batch_size = param.Integer(64, bounds=(1, 1_000_000), doc="samples per step (global batch)")
    lr = param.Number(0.05, bounds=(1e-8, 100.0), doc="learning rate")
    momentum = param.Number(0.9, bounds=(0.0, 0.999), doc="SGD momentum (0 for plain SGD)")
    weight_decay = param.Number(0.0, bounds=(0.0, 1.0), doc="L2 weight decay")
    schedule = param.Selector(objects=["constant", "step", "cosine"], default="cosine", doc="learning-rate schedule")
    seed = param.Integer(0, bounds=(0, 2**31 - 1), doc="run seed (data split, init, sampling, codecs)")


class CodecSection(param.Parameterized):
    codec = param.String("fp32", doc="gradient codec spec (fp32, fp16, bf16, qsgd:bits=.., randk:ratio=.., topk:ratio=.., A+B, ef(SPEC))")


class ExchangeSection(param.Parameterized):
    exchange = param.String("ring", doc="how gradients are averaged (ring:strategy=requantize|shared_scale, ps:servers=S)")
    link = param.String("", doc="simulated link BANDWIDTH,LATENCY (e.g. 1gbit,50us) that throttles every transfer; empty: none")


class ClusterSection(param.Parameterized):
    workers = param.Integer(0, bounds=(0, 256), doc="Dask workers holding model replicas (0: train in this process)")
    scheduler = param.String("", doc="Dask scheduler address (tcp://HOST:PORT); empty: an embedded LocalCluster")
    timeout_s = param.Number(300.0, bounds=(5.0, 86_400.0), doc="seconds a replica waits for the others before the run fails")


SECTIONS: dict[str, type[param.Parameterized]] = {
    "data": DataSection,
    "model": ModelSection,
    "sampler": SamplerSection,
    "optim": OptimSection,
    "codec": CodecSection,
    "exchange": ExchangeSection,
    "cluster": ClusterSection,
}

# option name -> "module:REGISTRY" of the plug-ins its spec names (imported lazily to avoid cycles)
SPEC_REGISTRIES: dict[str, str] = {
    "data": "adass.data:DATASETS",
    "shard": "adass.data:SHARDINGS",
    "model": "adass.models:MODELS",
    "sampler": "adass.sampling:SAMPLERS",
    "codec": "adass.codecs:CODECS",
    "exchange": "adass.exchange:EXCHANGES",
}
# options whose spec grammar goes beyond one registry entry: "module:function(text) -> object"
SPEC_PARSERS: dict[str, str] = {
    "codec": "adass.codecs:make_codec",
    "link": "adass.exchange.link:parse_link",
}


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def registry_for(option: str) -> Registry | None:
    target = SPEC_REGISTRIES.get(option)
    return None if target is None else _load(target)


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def allowed_text(p: param.Parameter) -> str:
    """What values a parameter accepts, in words."""
    if isinstance(p, param.Selector):
        return "one of " + "|".join(map(str, p.objects))
    if isinstance(p, param.Boolean):
        return "true|false"
    if isinstance(p, (param.Integer, param.Number)) and p.bounds is not None:
        kind = "an integer" if isinstance(p, param.Integer) else "a number"
        lo, hi = p.bounds
        return f"{kind} in [{lo}, {hi}]"
    return "a string"


def check_option(option: str, p: param.Parameter, raw: Any) -> Any:
    """Convert and validate one option value; raise SpecError with one line naming the flag."""
    flag = _flag(option)
    try:
        if isinstance(p, param.Integer):
            as_float = float(raw)
            if not as_float.is_integer():
                raise ValueError
            value: Any = int(as_float)
        elif isinstance(p, param.Number):
            value = float(raw)
        elif isinstance(p, param.Boolean):
            value = str(raw).lower() in ("1", "true", "yes", "on") if not isinstance(raw, bool) else raw
        else:
            value = raw
    except (TypeError, ValueError):
        raise SpecError(f"{flag}: {raw!r} is not allowed; expected {allowed_text(p)}") from None
    if isinstance(p, param.Selector) and value not in p.objects:
        raise SpecError(f"{flag}: {raw!r} is not allowed; expected {allowed_text(p)}")
    if isinstance(p, (param.Integer, param.Number)) and p.bounds is not None:
        lo, hi = p.bounds
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise SpecError(f"{flag}: {raw} is not allowed; expected {allowed_text(p)}")
    try:
        if option in SPEC_PARSERS:
            if str(value):
                _load(SPEC_PARSERS[option])(str(value))
        elif (registry := registry_for(option)) is not None:
            value = registry.validate(str(value))
    except SpecError as err:
        raise SpecError(f"{flag}: {err}") from None
    return value


def options(section: type[param.Parameterized]) -> dict[str, param.Parameter]:
    return {k: v for k, v in section.param.objects("existing").items() if k != "name"}


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
        unknown = set(values) - {k for s in SECTIONS.values() for k in options(s)}
        if unknown:
            raise SpecError(f"unknown option {_flag(sorted(unknown)[0])}")
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

    def check_pairs(self) -> None:
        """Checks across options: the exchange must be able to carry the codec."""
        check = _load("adass.exchange:check")
        try:
            check(self.exchange.exchange, self.codec.codec)
        except SpecError as err:
            raise SpecError(f"--exchange/--codec: {err}") from None
        if self.cluster.workers == 0:
            defaults = {"codec": "fp32", "link": "", "scheduler": ""}
            for option, default in defaults.items():
                value = self.flat()[option]
                if value != default:
                    raise SpecError(f"--{option}: {value!r} needs --workers 1 or more (a single process exchanges nothing)")

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
