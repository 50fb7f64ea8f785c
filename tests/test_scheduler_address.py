"""A scheduler address is read into host and port with the configuration, or refused in one line."""

import pytest

from adass.config import RunConfig
from adass.registry import SpecError
from adass.scheduler_address import DEFAULT_PORT, SchedulerAddress, parse_scheduler_address


@pytest.mark.parametrize(
    "text, expected",
    [
        ("tcp://10.0.0.5:8786", SchedulerAddress("10.0.0.5", 8786)),
        ("tls://sched.example:9000", SchedulerAddress("sched.example", 9000)),
        ("10.0.0.5:8786", SchedulerAddress("10.0.0.5", 8786)),
        ("tcp://[::1]:8786", SchedulerAddress("::1", 8786)),
        ("tcp://host", SchedulerAddress("host", DEFAULT_PORT)),
    ],
)
def test_addresses_dask_takes_are_read(text, expected):
    assert parse_scheduler_address(text) == expected
    assert RunConfig.from_flat(workers=1, scheduler=text).cluster.scheduler == text


@pytest.mark.parametrize("text", ["tcp://[::1", "tcp://h:99999", "tcp://h:port", "tcp://:8786", "tcp://"])
def test_an_address_that_cannot_be_read_is_refused_with_the_configuration(text):
    with pytest.raises(SpecError) as caught:
        RunConfig.from_flat(workers=1, scheduler=text)
    message = str(caught.value)
    assert message.startswith(f"--scheduler: {text!r} is no scheduler address") and "\n" not in message


def test_the_examples_in_the_docstrings_hold():
    import doctest

    import adass.runtime.replica_count
    import adass.scheduler_address

    assert doctest.testmod(adass.scheduler_address).failed == 0
    assert doctest.testmod(adass.runtime.replica_count).failed == 0
