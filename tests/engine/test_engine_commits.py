"""In-memory commits inside an epoch: a replica that goes on from its own commit ends the epoch as the
uninterrupted one did, bit for bit; one that takes a peer's gets the peer's model and optimizer."""

import torch

from adass.config import RunConfig
from adass.data import load_dataset
from adass.engine import Commits, Engine, ReplicaState

DATA = "synthetic:n=400,d=8,classes=3,noise=0.0,hard=0.3,test=80"


def engine_for(sampler: str = "adass:eps=0.4,warmup=1,final=0", every: int = 3, seed: int = 2) -> Engine:
    config = RunConfig.from_flat(data=DATA, model="mlp:hidden=16", sampler=sampler, epochs=6, batch_size=32,
                                 lr=0.1, momentum=0.9, seed=seed)  # fmt: skip
    engine = Engine(ReplicaState.whole(config, load_dataset(config.data.data, seed=seed)))
    engine.commits = Commits(every)
    return engine


def params(engine: Engine) -> list[torch.Tensor]:
    return [p.detach().clone() for p in engine.state.model.parameters()]


def test_commits_fall_every_k_steps_inside_the_epoch_and_the_last_two_are_kept():
    engine = engine_for(every=3)
    plan = engine.plan(0)  # a full epoch: 13 steps of 32 samples
    engine.run_epoch(plan)
    steps = len(plan.batches)
    last = (steps - 1) // 3 * 3  # none after the epoch's last step: that is the epoch checkpoint's
    assert steps == 13 and engine.commits.held() == [(0, last - 3), (0, last)]
    commit = engine.commits.get(0, last)
    assert (
        commit.step == commit.resume.base["step"] + last == last
        and len(commit.resume.report["steps"]) == last
    )


def test_going_on_from_an_own_commit_ends_the_epoch_bit_for_bit_as_without_the_loss():
    straight = engine_for(every=2)
    for epoch in range(3):  # ADASS drops samples from epoch 1: the sampler's state matters
        plan = straight.plan(epoch)
        if epoch == 2:
            before = straight.state_dict()
        report = straight.run_epoch(plan)
    (epoch, at), commit = straight.commits.held()[-1], straight.commits.kept[-1]
    assert epoch == 2 and 0 < at < len(plan.batches)

    again = engine_for(every=2)
    again.load_state_dict(before)  # the epoch checkpoint, then the same plan
    plan = again.plan(2)
    resume = again.recover(commit, own=True)
    redone = again.run_epoch(plan, resume=resume)
    for a, b in zip(params(straight), params(again), strict=True):
        assert torch.equal(a, b)
    assert [r["step"] for r in redone.steps] == [r["step"] for r in report.steps]
    assert redone.backprops == report.backprops and redone.samples == report.samples
    assert torch.equal(straight.state.sampler.bounds(), again.state.sampler.bounds())


def test_a_replica_that_lost_its_state_takes_model_optimizer_and_step_from_a_peer():
    peer = engine_for(seed=2)
    for epoch in range(2):
        plan = peer.plan(epoch)
        peer.run_epoch(plan)
    commit = peer.commits.held()[-1]
    lost = engine_for(seed=2)
    lost.plan(0)
    resume = lost.recover(peer.commits.get(*commit), own=False)
    assert resume.at == commit[1] and resume.report == {}
    committed = peer.commits.get(*commit)
    assert lost.state.step == committed.step
    theirs = committed.state
    for name, value in lost.state.model.state_dict().items():
        assert torch.equal(value, theirs["model"][name])
    moment = lost.state.optimizer.state_dict()["state"]
    assert moment and all(torch.equal(moment[k]["momentum_buffer"], theirs["optimizer"]["state"][k]["momentum_buffer"])
                          for k in moment)  # fmt: skip
    assert lost.state.counters.backprops < theirs["counters"]["backprops"]  # its own counts stay its own
