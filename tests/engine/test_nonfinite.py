"""Non-finite losses or gradients: the step is skipped on every replica alike; K in a row stop the run."""

import dataclasses

import pytest
import torch

from adass.config import RunConfig
from adass.data import load_dataset
from adass.failures import Diverged
from adass.metrics import EvalRecord, StepRecord
from adass.runtime import train

BASE = dict(data="synthetic:n=256,d=6,classes=3,test=64", model="mlp:hidden=8", epochs=2, batch_size=32,
            lr=0.05, schedule="constant", seed=3)  # fmt: skip


def _poisoned(samples: list[int]):
    data = load_dataset(BASE["data"], seed=BASE["seed"])
    x = data.x_train.clone()
    x[samples, 0] = float("nan")
    return dataclasses.replace(data, x_train=x)


def test_a_nan_sample_skips_its_step_and_the_model_stays_finite():
    data = _poisoned([5])
    result = train(RunConfig.from_flat(**BASE), dataset=data)
    steps = result.sink.frame(StepRecord)
    assert steps["loss"].isna().sum() == 2  # the step holding sample 5, once per epoch
    assert all(torch.isfinite(p).all() for p in result.model.parameters())
    assert torch.isfinite(torch.tensor(result.final.test_loss))


def test_k_non_finite_steps_in_a_row_stop_the_run_with_one_line():
    data = _poisoned(list(range(256)))
    with pytest.raises(Diverged) as caught:
        train(RunConfig.from_flat(**BASE, max_nonfinite=3), dataset=data)
    assert "3 steps in a row" in str(caught.value) and len(str(caught.value).splitlines()) == 1


def test_replicas_agree_to_skip_a_step_only_one_of_them_saw_non_finite():
    """One replica's NaN gradient must not reach the exchange: every replica skips that step, so all
    replicas keep equal, finite weights."""
    data = _poisoned([0])  # sample 0 lives on one replica's shard only
    result = train(RunConfig.from_flat(**BASE), dataset=data, replicas=2)
    first, second = result.extra["parameters"]
    for a, b in zip(first, second, strict=True):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b)
    assert result.final.test_acc > 0.5
    assert isinstance(result.final, EvalRecord)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_the_one_sum_finiteness_check_agrees_with_the_elementwise_one(dtype):
    from adass.engine.loop import all_finite

    big = torch.finfo(dtype).max
    cases = {
        "empty": torch.zeros(0, dtype=dtype),
        "plain": torch.randn(1000).to(dtype),
        "sum overflows, all finite": torch.full((8,), big, dtype=dtype),
        "nan": torch.tensor([1.0, float("nan"), 2.0], dtype=dtype),
        "+inf": torch.tensor([0.0, float("inf")], dtype=dtype),
        "+inf and -inf": torch.tensor([float("inf"), 3.0, float("-inf")], dtype=dtype),
        "overflow and nan": torch.cat(
            [torch.full((8,), big, dtype=dtype), torch.tensor([float("nan")], dtype=dtype)]
        ),
    }
    for name, t in cases.items():
        assert all_finite(t) == bool(torch.isfinite(t).all()), name
