"""Run configuration: validation from one definition per option."""

import pytest

from adass.cli import main
from adass.config import RUN_OPTIONS, SPEC_REGISTRIES, RunConfig, codec_probe
from adass.registry import SpecError


def test_defaults_round_trip_through_dict():
    config = RunConfig.from_flat(epochs=5, sampler="adass:eps=0.3")
    again = RunConfig.from_dict(config.to_dict())
    assert again.to_dict() == config.to_dict()
    assert again.optim.epochs == 5 and again.sampler.sampler == "adass:eps=0.3"


@pytest.mark.parametrize(
    "values, flag",
    [
        ({"epochs": 0}, "--epochs"),
        ({"lr": "fast"}, "--lr"),
        ({"schedule": "linear"}, "--schedule"),
        ({"sampler": "adass:eps=3"}, "--sampler"),
        ({"model": "transformer"}, "--model"),
        ({"data": "synthetic:n=-1"}, "--data"),
        ({"batch_size": 2.5}, "--batch-size"),
    ],
)
def test_bad_values_fail_with_the_flag_named(values, flag):
    with pytest.raises(SpecError) as err:
        RunConfig.from_flat(**values)
    assert str(err.value).startswith(flag)


def test_replace_validates_and_copies():
    config = RunConfig.from_flat(seed=1)
    other = config.replace(seed=2, sampler="random:ratio=0.5")
    assert (config.optim.seed, other.optim.seed) == (1, 2)
    assert config.sampler.sampler == "full"
    with pytest.raises(SpecError):
        config.replace(momentum=1.5)


@pytest.mark.parametrize(
    "values, flag, shown",
    [
        ({"lr": "nan"}, "--lr", "nan"),
        ({"lr": float("inf")}, "--lr", "inf"),
        ({"momentum": float("nan")}, "--momentum", "nan"),
        ({"timeout_s": "nan"}, "--timeout-s", "nan"),
        ({"epochs": "nan"}, "--epochs", "'nan'"),
        ({"sampler": "adass:eps=nan"}, "--sampler", "eps=nan"),
        ({"shard": "dirichlet:alpha=inf"}, "--shard", "alpha=inf"),
        ({"workers": 2, "codec": "randk:ratio=nan"}, "--codec", "ratio=nan"),
        ({"workers": 2, "codec": "qsgd:bits=-inf"}, "--codec", "bits='-inf'"),
    ],
)
def test_nan_and_infinity_are_rejected_naming_the_option_and_what_is_allowed(values, flag, shown):
    with pytest.raises(SpecError) as err:
        RunConfig.from_flat(**values)
    message = str(err.value)
    assert message.startswith(flag) and f"{shown} is not allowed; expected" in message and "\n" not in message


def test_validating_again_builds_no_second_codec():
    # every replica validates its configuration again, and a comparison validates each arm: the codec
    # probe behind those checks is built once per spec in a process
    before = codec_probe.cache_info()
    config = RunConfig.from_flat(workers=2, codec="qsgd:bits=5,bucket=96", exchange="ps:servers=1")
    RunConfig.from_dict(config.to_dict())
    config.replace(seed=3)
    after = codec_probe.cache_info()
    assert after.misses == before.misses + 1 and after.hits >= before.hits + 2


@pytest.mark.parametrize("option", sorted(SPEC_REGISTRIES))
def test_plugin_names_reach_the_help_from_the_registry_never_by_hand(option, capsys):
    """Option docs say what a spec is; the names of its plug-ins come from the registry, so a new
    plug-in is listed by ``--help`` (and the dashboard) without touching the doc."""
    registry, doc = SPEC_REGISTRIES[option], RUN_OPTIONS[option].doc
    assert not [n for n in registry.names() if f"({n}" in doc or f"{n}:" in doc or f"{n}," in doc]
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    text = " ".join(out[out.index(f"\n  --{option} VALUE") :].split())  # its entry, not the usage line
    listed = (
        text.split("one of ", 1)[1].split(" (parameters below)", 1)[0].replace("| ", "|")
    )  # wrapped after a |
    assert listed.split("|") == registry.names()
