"""Exchange specs and impossible exchange/codec pairs fail before anything runs, in one line."""

from __future__ import annotations

import pytest
import torch

from adass.config import RunConfig
from adass.exchange import EXCHANGES, InProcHub, check, make_exchange, simulate
from adass.registry import SpecError


@pytest.mark.parametrize("exchange, codec, words", [
    ("ring:strategy=shared_scale", "topk:ratio=0.01", ["topk", "not summable", "all-gather"]),
    ("ring:strategy=shared_scale", "topk:ratio=0.1+qsgd:bits=8", ["topk", "not summable"]),
    ("ring:strategy=shared_scale", "ef(topk:ratio=0.1)", ["topk", "not summable"]),
    ("ring", "qsgd:bits=4,shared=true", ["agreed scale", "shared_scale"]),
    ("ring", "ef(randk:ratio=0.01,scale=false+qsgd:bits=8)", ["error feedback", "shared_scale"]),
    ("ring", "mc(randk:ratio=0.01,scale=false+qsgd:bits=8)", ["error feedback", "shared_scale"]),
    ("ring:strategy=average", "fp32", ["strategy", "requantize|shared_scale|allgather"]),
    ("ring:hops=3", "fp32", ["unknown parameter", "hops"]),
    ("tree", "fp32", ["'tree'", "ps|ring"]),
    ("ps:servers=0", "fp32", ["servers", "[1, 64]"]),
    ("ps:pull=fp12", "fp32", ["fp12"]),
    ("ps:servers=2,mode=async", "fp32", ["mode=async", "needs update=server", "got update=replica"]),
    ("ps:mode=ssp,staleness=2", "fp32", ["mode=ssp", "needs update=server", "got update=replica"]),
    ("ps:mode=bsp", "fp32", ["mode=bsp", "sync|async|ssp"]),
    ("ps:staleness=-1", "fp32", ["staleness=-1", "[0, 1024]"]),
    ("ps:staleness=2", "fp32", ["staleness=2", "mode=ssp"]),
    ("ps:update=both", "fp32", ["update=both", "replica|server"]),
    ("ring", "qsgd:bits=99", ["bits"]),
])  # fmt: skip
def test_impossible_or_bad_specs_fail_in_one_line(exchange: str, codec: str, words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        check(exchange, codec)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message


@pytest.mark.parametrize("exchange, codec", [
    ("ring", "fp32"), ("ring", "topk:ratio=0.01"), ("ring:strategy=shared_scale", "qsgd:bits=4"),
    ("ring:strategy=shared_scale", "randk:ratio=0.01+qsgd:bits=8"), ("ring:strategy=shared_scale", "ef(qsgd:bits=2)"),
    ("ring:strategy=allgather", "qsgd:bits=4,shared=true"), ("ps:servers=3,pull=fp16", "topk:ratio=0.1"),
    ("ps:servers=2,update=server,mode=sync,staleness=0", "qsgd:bits=8"),
    # codecs that add without a scale add directly under shared_scale too
    ("ring:strategy=shared_scale", "fp32"), ("ring:strategy=shared_scale", "fp16"),
    ("ring:strategy=shared_scale", "bf16"), ("ring:strategy=shared_scale", "randk:ratio=0.01"),
])  # fmt: skip
def test_possible_pairs_pass(exchange: str, codec: str) -> None:
    assert check(exchange, codec).startswith(exchange.split(":")[0])


def test_registry_lists_both_exchanges() -> None:
    assert EXCHANGES.names() == ["ps", "ring"]
    assert "strategy" in EXCHANGES.help()


def test_make_exchange_checks_first() -> None:
    hub = InProcHub(2)
    with pytest.raises(SpecError):
        make_exchange("ring:strategy=shared_scale", hub.transport(0), "topk:ratio=0.1")
    with pytest.raises(SpecError, match="no worker"):
        make_exchange("ps:servers=2", hub.transport(0), "fp32")


def test_simulate_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="same length"):
        simulate([torch.zeros(3), torch.zeros(4)], codec="fp32")
    with pytest.raises(ValueError, match="counts"):
        simulate([torch.zeros(3)] * 2, codec="fp32", counts=[1.0])
    with pytest.raises(SpecError):
        simulate([torch.zeros(3)] * 65, codec="fp32")
    with pytest.raises(SpecError, match="link"):
        simulate([torch.zeros(3)] * 2, codec="fp32", link="1gbps,50us")
    with pytest.raises(ValueError, match="positive total"):
        simulate([torch.zeros(3)] * 2, codec="fp32", counts=[0.0, 0.0])


def test_an_asynchronous_server_whose_replicas_step_is_refused_by_the_run_options_in_one_line():
    with pytest.raises(SpecError) as info:
        RunConfig.from_flat(workers=2, exchange="ps:mode=async", codec="fp32")
    message = str(info.value)
    assert "\n" not in message and "--exchange" in message and "mode=async needs update=server" in message


def test_simulate_refuses_servers_that_own_parameters_in_one_line():
    with pytest.raises(SpecError, match="update=replica") as info:
        simulate([torch.ones(4), torch.ones(4)], exchange="ps:update=server", codec="fp32")
    assert "\n" not in str(info.value)


def test_momentum_on_both_the_workers_and_the_servers_is_refused_in_one_line():
    from adass.config import RunConfig

    with pytest.raises(SpecError, match="update=server") as caught:
        RunConfig.from_flat(
            workers=2, exchange="ps:servers=1,update=server", codec="dmc(randk:ratio=0.1,scale=false)"
        )
    assert len(str(caught.value).splitlines()) == 1
    RunConfig.from_flat(workers=2, exchange="ps:servers=1,update=server", codec="fp32")
    RunConfig.from_flat(
        workers=2, exchange="ps:servers=1,update=replica", codec="dmc(randk:ratio=0.1,scale=false)"
    )
