"""Where a rank's process group binds: the interface holding its Dask worker's address, or an override."""

from __future__ import annotations

import os

import psutil
import pytest
import torch
import torch.distributed as dist

from adass.runtime.cluster.binding import (
    GLOO_IFNAME_ENV,
    Binding,
    apply_binding,
    choose_binding,
    interface_holding,
)
from adass.runtime.cluster.bootstrap import destroy_group, init_group

LOOPBACK = next(
    name for name, addrs in psutil.net_if_addrs().items() if any(a.address == "127.0.0.1" for a in addrs)
)


def test_the_worker_address_picks_the_interface_that_holds_it() -> None:
    assert interface_holding("127.0.0.1") == Binding(LOOPBACK, "127.0.0.1")
    assert choose_binding("127.0.0.1") == Binding(LOOPBACK, "127.0.0.1")
    assert choose_binding("[127.0.0.1]").interface == LOOPBACK
    assert choose_binding("localhost").interface == LOOPBACK
    # an address no interface holds (a worker behind NAT): gloo keeps choosing as before
    assert choose_binding("198.51.100.7") is None
    assert choose_binding(None) is None


def test_an_override_names_an_interface_or_one_of_its_addresses() -> None:
    assert choose_binding("10.255.0.9", bind=LOOPBACK).interface == LOOPBACK
    assert choose_binding("10.255.0.9", bind="127.0.0.1") == Binding(LOOPBACK, "127.0.0.1")
    with pytest.raises(ValueError, match=r"bind: 'nosuchif0' is not allowed; expected an interface") as err:
        choose_binding("127.0.0.1", bind="nosuchif0")
    assert "\n" not in str(err.value)


def test_the_binding_reaches_gloo_and_is_undone_without_one(monkeypatch) -> None:
    monkeypatch.delenv(GLOO_IFNAME_ENV, raising=False)
    apply_binding(Binding(LOOPBACK, "127.0.0.1"))
    assert os.environ[GLOO_IFNAME_ENV] == LOOPBACK
    apply_binding(None)
    assert GLOO_IFNAME_ENV not in os.environ


def test_a_group_of_one_binds_the_workers_interface(monkeypatch) -> None:
    monkeypatch.delenv(GLOO_IFNAME_ENV, raising=False)
    try:
        init_group(dist.HashStore(), 0, 1, 30.0, host="127.0.0.1")
        assert os.environ[GLOO_IFNAME_ENV] == LOOPBACK
        t = torch.ones(3)
        dist.all_reduce(t)
        assert t.tolist() == [1.0, 1.0, 1.0]
    finally:
        destroy_group()
