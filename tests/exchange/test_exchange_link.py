"""The link model: parsing, transfer time, pacing arithmetic."""

from __future__ import annotations

import pytest

from adass.exchange import Link, LinkClock, parse_link
from adass.registry import SpecError


@pytest.mark.parametrize(
    "text, bandwidth, latency",
    [
        ("1gbit,50us", 1e9, 50e-6),
        ("10gbit,5us", 10e9, 5e-6),
        ("100mbit,1ms", 100e6, 1e-3),
        (" 2.5Gbit , 0s ", 2.5e9, 0.0),
        ("800kbit,100ns", 800e3, 100e-9),
    ],
)
def test_parse(text: str, bandwidth: float, latency: float) -> None:
    link = Link.parse(text)
    assert link.bandwidth_bps == pytest.approx(bandwidth)
    assert link.latency_s == pytest.approx(latency)
    assert Link.parse(str(link)) == link


def test_seconds_is_latency_plus_serialisation() -> None:
    link = Link.parse("1gbit,50us")
    assert link.seconds(0) == pytest.approx(50e-6)
    assert link.seconds(125_000_000) == pytest.approx(1.0 + 50e-6)  # 1 Gbit of payload
    assert Link.parse("100mbit,1ms").seconds(1250) == pytest.approx(1e-3 + 1e-4)


@pytest.mark.parametrize(
    "bad",
    ["1gbit", "1gbps,50us", "fast,50us", "0gbit,1us", "1gbit,5parsecs", "1gbit,-5us", "", "1gbit,50us,1"],
)
def test_bad_link_is_one_line_naming_value_and_allowed(bad: str) -> None:
    with pytest.raises(SpecError) as info:
        Link.parse(bad)
    message = str(info.value)
    assert "\n" not in message
    assert repr(bad) in message
    assert "gbit" in message and "us" in message


def test_parse_link_passes_none_and_links() -> None:
    link = Link(1e9, 0.0)
    assert parse_link(None) is None
    assert parse_link(link) is link


def test_clock_serialises_each_direction() -> None:
    clock = LinkClock(Link.parse("8mbit,1ms"))  # 1000 bytes take 1 ms + 1 ms latency
    assert clock.egress(1000, now=10.0) == pytest.approx(10.002)
    assert clock.egress(1000, now=10.0) == pytest.approx(10.004)  # queued behind the first
    assert clock.egress(1000, now=20.0) == pytest.approx(20.002)  # the link was idle
    assert clock.ingress(1000, not_before=30.0) == pytest.approx(30.0)
    assert clock.ingress(1000, not_before=30.0) == pytest.approx(30.002)  # back to back
