"""``ps:colocated=true``: server shard s served inside worker s gives, bit for bit, what a dedicated
server rank gives, with fewer messages (a worker's own shard stays in its process)."""

import pytest
import torch
from exchange_cases import grads

from adass.config import RunConfig
from adass.exchange import (
    ColocatedParameterServer,
    InProcHub,
    ParameterServer,
    check,
    make_exchange,
    simulate,
    topology_of,
)
from adass.registry import SpecError


@pytest.mark.parametrize("workers,servers,n", [(4, 2, 1001), (3, 3, 50), (4, 1, 7), (3, 2, 1), (2, 2, 0)])
@pytest.mark.parametrize("codec,pull", [("fp32", "fp32"), ("qsgd:bits=4", "qsgd:bits=8"),
                                        ("ef(topk:ratio=0.1)", "fp16"), ("randk:ratio=0.2", "fp32")])  # fmt: skip
def test_colocated_equals_dedicated_bit_for_bit(workers, servers, n, codec, pull):
    gs, counts = grads(workers, n, seed=workers + n), [float(c + 1) for c in range(workers)]
    dedicated = simulate(gs, f"ps:servers={servers},pull={pull}", codec, counts=counts, seed=3, step=5)
    colocated = simulate(
        gs, f"ps:servers={servers},pull={pull},colocated=true", codec, counts=counts, seed=3, step=5
    )
    for ours, theirs in zip(colocated.outputs, dedicated.outputs, strict=True):
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("workers,servers", [(4, 2), (4, 4), (3, 1)])
def test_a_workers_own_shard_sends_no_message(workers, servers):
    gs = grads(workers, 64)
    dedicated = simulate(gs, f"ps:servers={servers}", "fp32").traffic
    colocated = simulate(gs, f"ps:servers={servers},colocated=true", "fp32").traffic
    assert len(dedicated) == 2 * workers * servers
    assert len(colocated) == 2 * (workers - 1) * servers
    assert not (colocated.src == colocated.dst).any()
    for phase, server in (("push", "dst"), ("pull", "src")):
        rows = colocated[colocated.phase == phase]
        # shard s is rank s: its records name the rank that serves it, and their chunk is the shard
        assert set(rows[server]) <= set(range(servers))
        assert (rows[server] == rows.chunk).all()


def test_the_spec_builds_the_colocated_variant_and_needs_no_extra_ranks():
    hub = InProcHub(3)
    built = [
        make_exchange(spec, hub.transport(0), "fp32")
        for spec in ("ps:servers=2,colocated=true", "ps:servers=2")
    ]
    assert type(built[0]) is ColocatedParameterServer and type(built[1]) is ParameterServer
    assert topology_of("ps").extra_ranks(servers=2, colocated=True) == 0
    assert topology_of("ps").extra_ranks(servers=2) == 2
    assert [built[0].held_shard(), built[1].held_shard()] == [(0, 2), None]
    assert (
        check("ps:colocated=true", "fp32")
        == "ps:servers=1,pull=fp32,update=replica,mode=sync,staleness=0,colocated=True"
    )


def test_more_servers_than_workers_are_refused_in_one_line():
    with pytest.raises(SpecError) as err:
        RunConfig.from_flat(workers=2, exchange="ps:servers=3,colocated=true")
    message = str(err.value)
    assert "\n" not in message
    assert "servers=3" in message and "colocated=true" in message and "<= workers (2)" in message
    with pytest.raises(SpecError, match="<= workers"):
        make_exchange("ps:servers=3,colocated=true", InProcHub(2).transport(0), "fp32")
    assert RunConfig.from_flat(workers=3, exchange="ps:servers=3,colocated=true").cluster.workers == 3


def test_colocated_is_built_for_sync_only():
    with pytest.raises(SpecError, match="colocated=true is built for mode=sync"):
        check("ps:colocated=true,mode=ssp,staleness=2", "fp32")
