"""What an exchange declares beside ``reduce``: its family's topology, the server side that only
parameter servers offer, and the report of each call."""

import threading

import pytest
import torch

from adass.exchange import (
    Exchange,
    InProcHub,
    Server,
    StepReport,
    as_server,
    make_exchange,
    server_of,
    topology_of,
)
from adass.registry import SpecError


def test_the_topology_is_known_from_the_spec_alone():
    ring, ps = topology_of("ring"), topology_of("ps")
    assert ring.extra_ranks() == 0 and ring.colocated_shards() == {}
    assert ring.stage("reduce_scatter", 2) == ("reduce_scatter", 2)
    assert ps.extra_ranks(servers=3) == 3 and ps.extra_ranks(servers=3, colocated=True) == 0
    assert ps.colocated_shards(servers=2, colocated=True) == {0: 0, 1: 1}
    assert [ps.stage("push", 0), ps.stage("pull", 0)] == ["push", "pull"]
    ps.check_workers(2, servers=2, colocated=True)
    with pytest.raises(SpecError, match="servers must be <= workers"):
        ps.check_workers(1, servers=2, colocated=True)


def test_only_parameter_servers_have_a_server_side():
    hub = InProcHub(2)
    ring = make_exchange("ring", hub.transport(0), "fp32")
    worker, server = (make_exchange("ps", hub.transport(r), "fp32") for r in range(2))
    assert server_of(ring) is None and server_of(worker) is worker and isinstance(server, Server)
    assert [worker.held_shard(), as_server(server).held_shard()] == [None, (0, 1)]
    with pytest.raises(TypeError, match="no server ranks"):
        as_server(ring)
    for moved in ("serve_epoch", "serve_step", "held_shard", "extra_ranks", "timers", "traffic", "held_s"):
        assert not hasattr(Exchange, moved)


def test_a_report_hands_each_transfer_over_once():
    hub = InProcHub(2)
    worker, server = (make_exchange("ps", hub.transport(r), "qsgd:bits=8") for r in range(2))
    serving = threading.Thread(target=server.serve_step)
    serving.start()
    worker.reduce(torch.ones(100), 2.0)
    serving.join()
    done = worker.report()
    assert isinstance(done, StepReport) and done.staleness == 0 and done.held_s == 0.0
    assert [r.phase for r in done.traffic] == ["pull"] and min(done.encode_s, done.decode_s) > 0
    assert worker.report().traffic == [] and [r.phase for r in server.report().traffic] == ["push"]
