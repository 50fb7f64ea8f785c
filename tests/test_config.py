"""Run configuration: validation from one definition per option."""

import pytest

from adass.config import RunConfig
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
