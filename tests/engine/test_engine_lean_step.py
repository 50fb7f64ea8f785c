"""The step's own costs kept small without changing a trained bit: parameters and gradients as views of two
flat buffers, the step's length read off SGD's momentum buffer (or from a reused scratch buffer,
equal to the plain copy-before, copy-after reference), records turned into rows without a deep copy, batches gathered a chunk of
steps ahead, losses kept by the sampler until read, and unit weights left out."""

import doctest
from dataclasses import asdict, fields

import pytest
import torch
from torch.nn import functional as F

from adass.config import RunConfig
from adass.data import load_dataset
from adass.engine import (
    Counters,
    Engine,
    ReplicaState,
    flat_params,
    flatten_into,
    in_order,
    spread_evenly,
    state_bytes,
    state_from_bytes,
)
from adass.engine import rows as rows_module
from adass.engine.rows import CHUNK_BYTES, EpochRows, consecutive
from adass.engine.step import backprop_batch, optimizer_step, set_lr, write_flat_params
from adass.metrics import EvalRecord, SelectionRecord, StepRecord, TrafficRecord, as_row
from adass.models import build_model
from adass.sampling import build_sampler

DATA = "synthetic:n=300,d=7,classes=3,test=50"


def state_for(sampler: str = "adass", **changes) -> ReplicaState:
    config = RunConfig.from_flat(data=DATA, model="mlp:hidden=13,layers=2", sampler=sampler, epochs=2,
                                 momentum=0.9, weight_decay=1e-3, **changes)  # fmt: skip
    return ReplicaState.whole(config, load_dataset(DATA))


def shares_memory(views: list[torch.Tensor], flat: torch.Tensor) -> bool:
    """Whether ``views`` lie one after another in ``flat``, from its start to its end."""
    offset, base = 0, flat.data_ptr()
    for v in views:
        if v.untyped_storage().data_ptr() != flat.untyped_storage().data_ptr():
            return False
        if v.data_ptr() != base + offset * flat.element_size():
            return False
        offset += v.numel()
    return offset == flat.numel()


def test_parameters_and_gradients_are_views_of_the_flat_buffers():
    state = state_for()
    params = list(state.model.parameters())
    assert shares_memory(params, state.flat_params)
    assert shares_memory([p.grad for p in params], state.flat_grad)
    assert torch.equal(state.flat_params, flat_params(state.model))


def test_flatten_into_keeps_values_objects_and_keys():
    model = build_model("mlp:hidden=5", (4,), 3, seed=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    params = list(model.parameters())
    flat = torch.empty(sum(p.numel() for p in params))
    flatten_into(params, flat)
    assert list(model.parameters()) == params  # the same Parameter objects
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert shares_memory(params, flat)
    flat.fill_(2.0)  # writes through to the model
    assert all(bool((p == 2.0).all()) for p in model.parameters())


def test_a_loaded_checkpoint_writes_into_the_flat_buffer():
    state, other = state_for(), state_for(seed=5)
    trained = state_from_bytes(state_bytes(other.state_dict()))
    state.load_state_dict(trained)
    assert torch.equal(state.flat_params, flat_params(other.model))
    assert shares_memory(list(state.model.parameters()), state.flat_params)


def _reference_length(model: torch.nn.Module, change) -> float:
    """The step's length as it was measured before the scratch buffer: two flat copies."""
    before = flat_params(model)
    change()
    return float(torch.linalg.vector_norm(flat_params(model) - before))


def test_an_sgd_step_length_is_read_off_its_momentum_buffer_and_training_is_unchanged():
    """lr * ||momentum buffer|| against the two-copy reference, steps bit for bit torch's own SGD."""
    state, twin = state_for(), state_for()
    for s in (state, twin):
        s.flat_grad.copy_(torch.randn(s.flat_grad.numel(), generator=torch.Generator().manual_seed(3)))
    assert state.step_length is not None
    for _ in range(4):  # with momentum, later steps differ from the first
        counters = Counters()
        optimizer_step(state.optimizer, counters, state.step_length, state.flat_sgd)
        expected = _reference_length(twin.model, twin.optimizer.step)
        assert counters.path == pytest.approx(expected, rel=1e-5) and counters.path > 0
        assert torch.equal(state.flat_params, twin.flat_params)
    buffers = [state.optimizer.state[p]["momentum_buffer"] for p in state.model.parameters()]
    assert shares_memory(buffers, buffers[0]._base)  # one flat buffer, read with one norm
    lr = state.optimizer.param_groups[0]["lr"]
    assert counters.path == lr * float(torch.linalg.vector_norm(buffers[0]._base))


def test_a_loaded_optimizer_state_goes_back_into_the_flat_momentum_buffer():
    state, twin = state_for(), state_for()
    for s in (state, twin):
        s.flat_grad.copy_(torch.randn(s.flat_grad.numel(), generator=torch.Generator().manual_seed(8)))
        for _ in range(2):
            optimizer_step(s.optimizer, Counters(), s.step_length, s.flat_sgd)
    saved = state_from_bytes(state_bytes(state.optimizer.state_dict()))
    for _ in range(3):  # moved on, then back to the saved momentum
        optimizer_step(state.optimizer, Counters(), state.step_length, state.flat_sgd)
    state.flat_params.copy_(twin.flat_params)
    state.optimizer.load_state_dict(saved)
    counters = Counters()
    optimizer_step(state.optimizer, counters, state.step_length, state.flat_sgd)
    expected = _reference_length(twin.model, twin.optimizer.step)
    assert counters.path == pytest.approx(expected, rel=1e-5)
    assert torch.equal(state.flat_params, twin.flat_params)


@pytest.mark.parametrize("make", [
    lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True),
    lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.0, weight_decay=0.01),
    lambda params: torch.optim.Adam(params, lr=0.01),
])  # fmt: skip
def test_other_optimizers_take_the_two_copy_length_bit_for_bit(make):
    state, twin = state_for(), state_for()
    for s in (state, twin):
        s.optimizer = make(s.model.parameters())
        s.flat_grad.copy_(torch.randn(s.flat_grad.numel(), generator=torch.Generator().manual_seed(3)))
    for _ in range(3):
        counters = Counters()
        optimizer_step(state.optimizer, counters, state.step_length, state.flat_sgd)
        assert counters.path == _reference_length(twin.model, twin.optimizer.step) and counters.path > 0
    assert torch.equal(state.flat_params, twin.flat_params)


@pytest.mark.parametrize("sampler", ["full", "random:ratio=0.6", "infobatch", "selective_backprop"])
def test_steps_on_the_flat_buffers_train_bit_for_bit_as_torchs_sgd(sampler):
    """Two epochs of the engine stepping SGD on its flat buffers against the same run stepped by
    torch's own SGD, parameters and momentum alike."""
    runs = []
    for flat in (True, False):
        state = state_for(sampler)
        if not flat:
            state.flat_sgd = None
        engine = Engine(state, split=in_order)
        for epoch in range(2):
            engine.run_epoch(engine.plan(epoch), selection_records=False)
        runs.append(state)
    ours, torchs = runs
    assert torch.equal(ours.flat_params, torchs.flat_params)
    momentum = [[s.optimizer.state[p]["momentum_buffer"] for p in s.model.parameters()] for s in runs]
    assert all(torch.equal(a, b) for a, b in zip(*momentum, strict=True))
    assert shares_memory(momentum[0], momentum[0][0]._base)  # ours: views of one flat buffer
    assert not shares_memory(momentum[1], momentum[0][0]._base)


def test_gradients_that_are_no_longer_views_step_through_torch():
    state, twin = state_for("full"), state_for("full")
    for s in (state, twin):
        for p in s.model.parameters():
            p.grad = torch.full_like(p, 0.5)  # fresh tensors, not views of the flat gradient
    for _ in range(3):
        optimizer_step(state.optimizer, Counters(), state.step_length, state.flat_sgd)
        twin.optimizer.step()
    assert not state.flat_sgd.ready(state.optimizer)
    assert torch.equal(state.flat_params, twin.flat_params)
    assert not torch.equal(state.flat_params, state_for("full").flat_params)  # it did step


def test_a_second_parameter_group_steps_through_torch():
    state = state_for("full")
    assert state.flat_sgd.ready(state.optimizer)
    state.optimizer.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))]})
    assert not state.flat_sgd.ready(state.optimizer)


def test_written_parameters_add_their_length_and_a_sampler_without_path_measures_nothing():
    state = state_for()
    pulled = torch.randn(state.flat_params.numel(), generator=torch.Generator().manual_seed(4))
    start = state.flat_params.clone()
    counters = Counters()
    write_flat_params(state.flat_params, pulled, counters, state.step_length)
    assert torch.equal(flat_params(state.model), pulled)
    assert counters.path == float(torch.linalg.vector_norm(pulled - start))
    assert state_for("full").step_length is None


@pytest.mark.parametrize("sampler", ["full", "selective_backprop"])
def test_zeroing_the_flat_gradient_matches_zeroing_each_gradient(sampler):
    states = [state_for(sampler), state_for(sampler)]
    idx, weights = torch.arange(40), torch.ones(40)
    results = []
    for s, flat in zip(states, (True, False), strict=True):
        s.flat_grad.fill_(7.0)  # left over from a previous step
        s.sampler = build_sampler(sampler, n=s.n, seed=0, epochs=2)
        results.append(backprop_batch(s.model, s.sampler, s.x, s.y, idx, weights, Counters(),
                                      s.flat_grad if flat else None))  # fmt: skip
    assert results[0] == results[1]
    assert torch.equal(states[0].flat_grad, states[1].flat_grad)
    reference = states[0].model
    reference.zero_grad(set_to_none=True)
    x, y = states[0].x[idx], states[0].y[idx]
    if sampler == "full":  # the gradient is the mean loss's
        F.cross_entropy(reference(x), y).backward()
        assert torch.allclose(torch.cat([p.grad.reshape(-1) for p in reference.parameters()]),
                              states[1].flat_grad, atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("kind", [StepRecord, TrafficRecord, SelectionRecord, EvalRecord])
def test_a_record_row_is_its_asdict(kind):
    record = kind(**{f.name: i for i, f in enumerate(fields(kind))})
    row = as_row(record)
    assert row == asdict(record) and list(row) == [f.name for f in fields(kind)]
    first = fields(kind)[0].name
    row[first] = "changed"  # a copy: the record keeps its value
    assert getattr(record, first) == 0


# -- batches gathered ahead, losses kept until read, unit weights left out ------------------------


def test_the_rows_module_doctest_holds():
    assert doctest.testmod(rows_module).failed == 0


@pytest.mark.parametrize("split", [in_order, spread_evenly])
@pytest.mark.parametrize("chunk_bytes", [1, 500, CHUNK_BYTES])  # a batch, a few batches, the whole epoch
def test_epoch_rows_are_the_rows_a_per_step_gather_takes(split, chunk_bytes):
    state = state_for("full")
    order = torch.randperm(state.n, generator=torch.Generator().manual_seed(2))[:250]
    batches = split(250, 8, 32)
    for first in (0, 4):  # from the epoch's start, and resumed after four steps
        rows = EpochRows(state.x, state.y, order, batches[first:], torch.device("cpu"), chunk_bytes)
        for part in batches[first:]:
            x, y = rows.next()
            assert torch.equal(x, state.x.index_select(0, order[part]))
            assert torch.equal(y, state.y.index_select(0, order[part]))


def test_epoch_rows_take_only_consecutive_batches():
    assert consecutive([slice(0, 3), slice(3, 3), slice(3, 8)]) and consecutive([])
    assert not consecutive([slice(0, 3), slice(4, 8)])
    assert not consecutive(
        in_order(250, 9, 32)
    )  # steps past the selection's end: the steps gather themselves
    with pytest.raises(ValueError, match="consecutive"):
        EpochRows(
            torch.zeros(8, 2),
            torch.zeros(8),
            torch.arange(8),
            [slice(0, 3), slice(4, 8)],
            torch.device("cpu"),
        )


def test_an_epoch_on_gathered_rows_trains_as_steps_that_gather_their_own():
    """The plain loop (each step gathers its batch, every weight given) beside run_epoch."""
    fast, plain = (Engine(state_for("adass:warmup=1,final=0"), split=in_order) for _ in range(2))
    for epoch in range(3):
        report = fast.run_epoch(fast.plan(epoch), selection_records=False)
        plan = plain.plan(epoch)
        set_lr(plain.state.optimizer, plain.state.config, epoch)
        selection = plain.selection
        rows = [plain.step(epoch, selection.indices[part], selection.weights[part], total)[0]
                for part, total in zip(plan.batches, plan.totals, strict=True)]  # fmt: skip
        plain.state.sampler.settle()
        assert [r["loss"] for r in report.steps] == [r["loss"] for r in rows]
        assert torch.equal(fast.state.flat_params, plain.state.flat_params)
        assert fast.state.counters.path == plain.state.counters.path
        assert torch.equal(fast.state.sampler.bounds(), plain.state.sampler.bounds())


@pytest.mark.parametrize("sampler", ["full", "selective_backprop"])
def test_unit_weights_left_out_give_the_same_loss_and_gradient(sampler):
    states = [state_for(sampler), state_for(sampler)]
    idx = torch.randperm(states[0].n, generator=torch.Generator().manual_seed(6))[:48]
    results = []
    for s, weights in zip(states, (torch.ones(48), None), strict=True):
        s.sampler = build_sampler(sampler, n=s.n, seed=0, epochs=2)
        results.append(backprop_batch(s.model, s.sampler, s.x, s.y, idx, weights, Counters(), s.flat_grad))
    assert results[0] == results[1]
    assert torch.equal(states[0].flat_grad, states[1].flat_grad)
    if sampler == "full":
        losses = F.cross_entropy(states[0].model(states[0].x[idx]), states[0].y[idx], reduction="none")
        assert results[1][0] == float(losses.detach().mean())  # the step's mean loss, bit for bit


def test_a_weighted_step_backpropagates_the_weighted_sum_over_the_count_bit_for_bit():
    state, twin = state_for("full"), state_for("full")
    gen = torch.Generator().manual_seed(2)
    idx = torch.randperm(state.n, generator=gen)[:40]
    weights = torch.where(torch.rand(40, generator=gen) < 0.5, 1.0, 2.0)
    loss, used = backprop_batch(state.model, state.sampler, state.x, state.y, idx, weights, Counters(),
                                state.flat_grad)  # fmt: skip
    losses = F.cross_entropy(twin.model(twin.x[idx]), twin.y[idx], reduction="none")
    twin.flat_grad.zero_()
    (losses * weights).sum().div(40).backward()  # the reference: the weighted sum over the count
    assert used == 40 and torch.equal(state.flat_grad, twin.flat_grad)
    assert loss == float(losses.detach().mean())  # the record keeps the plain mean loss


def test_kept_losses_fold_in_as_writing_every_batch_in_turn():
    sampler = build_sampler("full", n=10, seed=0, epochs=1)
    reference = torch.full((10,), float("nan"))
    batches = [(torch.tensor([3, 1, 4]), torch.tensor([0.5, 1.5, 2.5])),
               (torch.tensor([1, 5]), torch.tensor([9.0, 3.0])),  # sample 1 again: its later loss wins
               (torch.tensor([3]), torch.tensor([7.0]))]  # fmt: skip
    for idx, losses in batches:
        sampler.observe(idx, losses, {"path": 0.0})
        reference[idx] = losses
    bounds = sampler.bounds()
    assert torch.equal(bounds.isnan(), reference.isnan()) and torch.equal(
        bounds.nan_to_num(), reference.nan_to_num()
    )
    assert sampler.bounds()[[1, 3]].tolist() == [9.0, 7.0]
    sampler.observe(torch.tensor([0]), torch.tensor([4.0]), {"path": 0.0})
    assert sampler.state_dict()["last_loss"][0] == 4.0  # a checkpoint holds what was observed so far


def test_a_step_row_holds_the_step_record_fields_in_order_then_the_bytes():
    engine = Engine(state_for("full"), split=in_order)
    report = engine.run_epoch(engine.plan(0), selection_records=False)
    row = report.steps[0]
    assert list(row) == [f.name for f in fields(StepRecord)] + ["wire_bytes", "raw_bytes"]
    assert StepRecord(**{k: row[k] for k in list(row)[:-2]}).samples == row["samples"] > 0
    assert (row["wire_bytes"], row["raw_bytes"]) == (0, 0)
