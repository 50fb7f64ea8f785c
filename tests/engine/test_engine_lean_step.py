"""The step's own costs kept small without changing a bit: parameters and gradients as views of two
flat buffers, the step's length from a reused scratch buffer (equal to the plain copy-before,
copy-after reference), records turned into rows without a deep copy."""

from dataclasses import asdict, fields

import pytest
import torch
from torch.nn import functional as F

from adass.config import RunConfig
from adass.data import load_dataset
from adass.engine import Counters, ReplicaState, flat_params, flatten_into, state_bytes, state_from_bytes
from adass.engine.step import backprop_batch, optimizer_step, write_flat_params
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


def test_step_length_equals_the_two_copy_reference_bit_for_bit():
    state, twin = state_for(), state_for()
    for s in (state, twin):
        s.flat_grad.copy_(torch.randn(s.flat_grad.numel(), generator=torch.Generator().manual_seed(3)))
    assert state.step_length is not None
    for _ in range(4):  # with momentum, later steps differ from the first
        counters = Counters()
        optimizer_step(state.optimizer, counters, state.step_length)
        expected = _reference_length(twin.model, twin.optimizer.step)
        assert counters.path == expected and counters.path > 0
    assert torch.equal(state.flat_params, twin.flat_params)


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
