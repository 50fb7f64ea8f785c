"""Run configuration: validation from one definition per option."""

import pytest

from adass.config import RunConfig, codec_probe
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
