"""Faults a distributed run meets: a worker killed mid-run is detected at once, named, and survived."""

import os
import signal
import threading
import time

import pytest
import torch

from adass.config import RunConfig
from adass.failures import Diverged, RunFailure
from adass.metrics import SelectionRecord, StepRecord
from adass.runtime.cluster import connect, read_checkpoint, train_distributed

BASE = dict(data="synthetic:n=600,d=8,classes=3,noise=0.0,test=200", model="mlp:hidden=16", epochs=4,
            batch_size=32, lr=0.1, workers=3, seed=1, schedule="constant")  # fmt: skip


@pytest.fixture
def own_cluster():
    handle = connect(n_workers=3)  # a cluster of its own: these tests kill its workers
    yield handle
    handle.close()


def _kill_rank_after_first_epoch(handle, rank: int, delay_s: float = 0.05):
    """A progress callback that kills rank ``rank``'s worker process ``delay_s`` after the first epoch's
    end, while the second epoch runs."""
    pids = handle.client.run(os.getpid)
    address = handle.workers()[rank]
    killed: dict[str, float] = {}

    def progress(record) -> None:
        if record.epoch == 0 and not killed:
            killed["at"] = time.time()
            threading.Timer(delay_s, os.kill, (pids[address], signal.SIGKILL)).start()

    return progress, address, killed


def test_a_killed_worker_ends_the_run_with_one_line_naming_it_well_before_the_timeout(own_cluster):
    config = RunConfig.from_flat(**BASE, timeout_s=600, restarts=0)
    progress, address, killed = _kill_rank_after_first_epoch(own_cluster, rank=2)
    with pytest.raises(RunFailure) as caught:
        train_distributed(config, handle=own_cluster, progress=progress)
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and "epoch 1" in message
    assert address in message or "rank 2" in message
    assert time.time() - killed["at"] < 300  # not the 600 s a rank waits on a dead peer


def test_a_run_that_loses_a_worker_restarts_from_its_checkpoint_and_matches_the_uninterrupted_run(
    own_cluster, tmp_path
):
    config = RunConfig.from_flat(**BASE, timeout_s=120, commit_steps=0)  # no commits: the epoch again
    straight = train_distributed(config, handle=own_cluster, checkpoint_dir=tmp_path / "straight")
    progress, address, _ = _kill_rank_after_first_epoch(own_cluster, rank=1)
    result = train_distributed(
        config, handle=own_cluster, progress=progress, checkpoint_dir=tmp_path / "killed"
    )
    assert len(result.faults) == 1 and result.faults[0]["resumed_from_epoch"] == 0
    assert result.faults[0]["recovered_from"] == "checkpoint"
    assert 0 <= result.faults[0]["steps_redone"] <= 19  # at most the epoch's steps, from its checkpoint
    assert (tmp_path / "killed" / "faults.json").exists()
    assert list(result.sink.frame(type(result.final))["epoch"]) == [0, 1, 2, 3]
    assert abs(result.final.test_acc - straight.final.test_acc) <= 0.005
    assert read_checkpoint(tmp_path / "killed", 3).epoch == 3


def test_a_worker_killed_mid_epoch_costs_at_most_the_steps_since_the_last_commit(own_cluster, tmp_path):
    """19 steps an epoch, slowed to about 40 ms each; rank 1 is killed about half-way through epoch 1.
    The replacement takes the model from a survivor's commit and the epoch goes on from there."""
    config = RunConfig.from_flat(**BASE, timeout_s=120, commit_steps=4, straggler="0:0.04")
    straight = train_distributed(config, handle=own_cluster, checkpoint_dir=tmp_path / "straight")
    kill_mid_epoch, _, _ = _kill_rank_after_first_epoch(own_cluster, rank=1, delay_s=0.45)
    result = train_distributed(config, handle=own_cluster, progress=kill_mid_epoch,
                               checkpoint_dir=tmp_path / "killed")  # fmt: skip
    (fault,) = result.faults
    assert fault["recovered_from"] == "commit" and fault["resumed_from_epoch"] == 0
    assert 0 <= fault["steps_redone"] <= 4 and fault["resumed_at_step"] > 19  # inside epoch 1
    steps = result.sink.frame(StepRecord)
    epoch1 = steps[steps["epoch"] == 1]
    for rank in (0, 2):  # the survivors' records hold every step of the epoch once
        assert sorted(epoch1[epoch1["rank"] == rank]["step"]) == list(range(19, 38))
    lost = sorted(epoch1[epoch1["rank"] == 1]["step"])  # the replacement's from the commit on
    assert lost == list(range(fault["resumed_at_step"], 38))
    assert list(result.sink.frame(type(result.final))["epoch"]) == [0, 1, 2, 3]
    assert abs(result.final.test_acc - straight.final.test_acc) <= 0.01


def test_a_server_shard_killed_mid_epoch_goes_on_from_its_commit_and_ends_where_the_uninterrupted_run_does(
    tmp_path,
):
    """A PS whose server owns the parameters and the optimizer state (``update=server``, momentum):
    the server sends a copy of each commit to a replica, so when its worker is killed mid-epoch the
    replacement takes the shard from that copy and no replica loses anything: the run's parameters
    end as the uninterrupted run's."""
    config = RunConfig.from_flat(**{**BASE, "workers": 2}, exchange="ps:servers=1,update=server", momentum=0.9,
                                 timeout_s=120, commit_steps=4, straggler="0:0.04")  # fmt: skip
    with connect(n_workers=3) as handle:
        straight = train_distributed(config, handle=handle, checkpoint_dir=tmp_path / "straight")
        kill_mid_epoch, _, _ = _kill_rank_after_first_epoch(handle, rank=2, delay_s=0.6)  # the server
        result = train_distributed(config, handle=handle, progress=kill_mid_epoch,
                                   checkpoint_dir=tmp_path / "killed")  # fmt: skip
    (fault,) = result.faults
    assert "(rank 2)" in fault["failure"]  # the server
    assert fault["recovered_from"] == "commit" and fault["resumed_from_epoch"] == 0
    steps_per_epoch = 600 // 32 + (600 % 32 > 0)
    assert 0 <= fault["steps_redone"] <= 4 and fault["resumed_at_step"] > steps_per_epoch  # inside epoch 1
    assert list(result.sink.frame(type(result.final))["epoch"]) == [0, 1, 2, 3]
    for mine, theirs in zip(result.parameters, straight.parameters, strict=True):
        assert torch.equal(mine, theirs)


def test_a_diverging_distributed_run_stops_on_every_replica_with_one_line(cluster):
    config = RunConfig.from_flat(**{**BASE, "lr": 100.0, "momentum": 0.99, "epochs": 20, "workers": 2})
    with pytest.raises(Diverged) as caught:
        train_distributed(config, handle=cluster)
    assert "not finite" in str(caught.value) and len(str(caught.value).splitlines()) == 1


def test_a_run_that_loses_a_worker_for_good_goes_on_with_the_others_and_keeps_its_accuracy(tmp_path):
    from adass.runtime.cluster.worker_processes import dask_processes

    with dask_processes(tmp_path / "dask", workers=3) as lab:
        data = "synthetic:n=600,d=8,classes=3,noise=0.0,test=1000"  # 0.1 points a test sample
        config = RunConfig.from_flat(**{**BASE, "epochs": 5, "data": data}, scheduler=lab.address, timeout_s=120,
                                     restarts=1, detect_s=1)  # fmt: skip
        with connect(lab.address, n_workers=3) as handle:  # detect_s=1: 10 s of waiting for a replacement
            straight = train_distributed(config, handle=handle, checkpoint_dir=tmp_path / "straight")
            gone: dict[str, float] = {}

            def kill_a_worker_and_its_nanny(record) -> None:  # no nanny is left to start a replacement
                if record.epoch == 1 and not gone:
                    gone["at"] = time.time()
                    threading.Timer(0.05, os.killpg, (lab.workers[2].pid, signal.SIGKILL)).start()

            result = train_distributed(config, handle=handle, progress=kill_a_worker_and_its_nanny,
                                       checkpoint_dir=tmp_path / "shrunk")  # fmt: skip
    assert len(result.faults) == 1
    fault = result.faults[0]
    assert fault["workers"] == 3 and fault["workers_after"] == 2 and fault["resumed_from_epoch"] == 1
    assert list(result.sink.frame(type(result.final))["epoch"]) == [0, 1, 2, 3, 4]
    assert read_checkpoint(tmp_path / "shrunk").replicas == 2
    assert abs(result.final.test_acc - straight.final.test_acc) <= 0.005


def test_a_worker_that_joins_a_running_job_is_taken_in_as_the_next_epoch_begins(tmp_path):
    from adass.runtime.cluster.worker_processes import dask_processes

    with dask_processes(tmp_path / "dask", workers=2) as lab:
        config = RunConfig.from_flat(**{**BASE, "workers": 2}, scheduler=lab.address, timeout_s=120,
                                     max_workers=3)  # fmt: skip
        with connect(lab.address, n_workers=2) as handle:
            straight = train_distributed(config.replace(max_workers=2), handle=handle)

            def start_a_third_worker(record) -> None:
                if record.epoch == 0 and len(lab.workers) == 2:
                    lab.add_worker()
                    handle.client.wait_for_workers(3, timeout=60)

            result = train_distributed(config, handle=handle, progress=start_a_third_worker,
                                       checkpoint_dir=tmp_path / "grown")  # fmt: skip
    (joined,) = result.faults
    assert joined["joined"] and (joined["workers"], joined["workers_after"]) == (2, 3)
    assert joined["resumed_from_epoch"] == 0
    steps = result.sink.frame(StepRecord)
    ranks = {epoch: sorted(set(group["rank"])) for epoch, group in steps.groupby("epoch")}
    assert ranks == {0: [0, 1], 1: [0, 1, 2], 2: [0, 1, 2], 3: [0, 1, 2]}
    assert list(result.sink.frame(type(result.final))["epoch"]) == [0, 1, 2, 3]
    assert read_checkpoint(tmp_path / "grown").replicas == 3
    assert abs(result.final.test_acc - straight.final.test_acc) <= 0.02  # the same global batch


def test_a_worker_that_joins_mid_epoch_trains_from_the_next_commit_point(tmp_path):
    """A third worker starts while epoch 1 runs (75 steps of about 60 ms): the two replicas pause at
    the next commit point, and three go on from there with the rest of the epoch; every sample the
    epoch selected is trained on once."""
    from adass.runtime.cluster.worker_processes import dask_processes

    with dask_processes(tmp_path / "dask", workers=2) as lab:
        # two warm-up epochs: epoch 1, where the worker joins, holds all 75 steps
        config = RunConfig.from_flat(**{**BASE, "workers": 2, "epochs": 3, "data": "synthetic:n=2400,d=8,classes=3,test=200"},
                                     scheduler=lab.address, timeout_s=120, max_workers=3, commit_steps=4,
                                     straggler="0:0.06", sampler="adass:warmup=2")  # fmt: skip
        with connect(lab.address, n_workers=2) as handle:

            def start_a_third_worker(record) -> None:
                if record.epoch == 0 and len(lab.workers) == 2:
                    threading.Thread(target=lab.add_worker).start()

            result = train_distributed(config, handle=handle, progress=start_a_third_worker,
                                       checkpoint_dir=tmp_path / "grown")  # fmt: skip
    (joined,) = result.faults
    assert joined["joined"] and (joined["workers"], joined["workers_after"]) == (2, 3)
    assert joined["resumed_from_epoch"] == 0 and joined["steps_redone"] == 0
    at = joined["resumed_at_step"]
    steps = result.sink.frame(StepRecord)
    per_epoch = len(steps[(steps["epoch"] == 0) & (steps["rank"] == 0)])
    assert per_epoch < at < 2 * per_epoch and (at - per_epoch) % 4 == 0  # a commit point inside epoch 1
    epoch1 = steps[steps["epoch"] == 1]
    for rank in (0, 1):  # the old replicas' records hold every step of the epoch once
        assert sorted(epoch1[epoch1["rank"] == rank]["step"]) == list(range(per_epoch, 2 * per_epoch))
    assert sorted(epoch1[epoch1["rank"] == 2]["step"]) == list(range(at, 2 * per_epoch))  # the new one's
    kept = result.sink.frame(SelectionRecord)
    kept1 = kept[(kept["epoch"] == 1) & kept["kept"]]
    assert kept1["sample_id"].is_unique and set(kept1["rank"]) == {0, 1, 2}
    assert int(epoch1["samples"].sum()) == len(kept1)  # each kept sample trained on once
    assert read_checkpoint(tmp_path / "grown").replicas == 3
    assert list(result.sink.frame(type(result.final))["epoch"]) == [0, 1, 2]
    assert result.final.test_acc > 0.6  # it learns on (3 classes)


def test_too_few_workers_left_for_min_workers_end_the_run_with_one_line_naming_it(tmp_path):
    from adass.runtime.cluster.worker_processes import dask_processes

    with dask_processes(tmp_path / "dask", workers=3) as lab:
        config = RunConfig.from_flat(**BASE, scheduler=lab.address, timeout_s=120, restarts=1, detect_s=1,
                                     min_workers=3)  # fmt: skip
        with connect(lab.address, n_workers=3) as handle:

            def kill_one_for_good(record) -> None:
                if record.epoch == 0:
                    threading.Timer(0.05, os.killpg, (lab.workers[2].pid, signal.SIGKILL)).start()

            with pytest.raises(RunFailure) as caught:
                train_distributed(config, handle=handle, progress=kill_one_for_good)
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and "--min-workers 3" in message and "2 of the 3" in message
