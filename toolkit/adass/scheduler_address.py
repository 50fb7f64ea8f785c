"""Dask scheduler addresses (``--scheduler tcp://HOST:PORT``): read into host and port, or refused in one line.

The option is checked with the rest of the configuration, so an address that cannot be read is
bad input (exit 2) found before anything is written or started, not an error of the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from .registry import SpecError

__all__ = ["DEFAULT_PORT", "SchedulerAddress", "parse_scheduler_address"]

#: the port Dask's scheduler listens on unless told otherwise
DEFAULT_PORT = 8786
_FORM = "PROTOCOL://HOST:PORT, e.g. tcp://10.0.0.5:8786"


@dataclass(frozen=True)
class SchedulerAddress:
    """Where a scheduler listens: ``host`` and ``port`` (``DEFAULT_PORT`` where the address names none)."""

    host: str
    port: int


def parse_scheduler_address(text: str) -> SchedulerAddress:
    """``tcp://HOST:PORT`` (or ``HOST:PORT``, or any ``PROTOCOL://``) as host and port.

    Raises
    ------
    SpecError
        One line naming the address and the form allowed: text that is no URL (``tcp://[::1``), a
        port that is no number in 0..65535, or no host.

    Examples
    --------
    >>> parse_scheduler_address("tcp://[::1]:8786")
    SchedulerAddress(host='::1', port=8786)
    >>> parse_scheduler_address("tcp://[::1")
    Traceback (most recent call last):
    ...
    adass.options.SpecError: 'tcp://[::1' is no scheduler address (Invalid IPv6 URL); expected PROTOCOL://HOST:PORT, e.g. tcp://10.0.0.5:8786
    """
    text = str(text).strip()
    try:
        parts = urlsplit(text if "://" in text else f"tcp://{text}")
        host, port = parts.hostname, parts.port
    except ValueError as err:  # urlsplit refuses an unclosed [, .port a port out of range or not a number
        raise SpecError(f"{text!r} is no scheduler address ({err}); expected {_FORM}") from None
    if not host:
        raise SpecError(f"{text!r} is no scheduler address (no host); expected {_FORM}")
    return SchedulerAddress(host, DEFAULT_PORT if port is None else port)
