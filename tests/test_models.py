"""Models are shaped from the dataset and seeded."""

import pytest
import torch

from adass.models import build_model, is_linear
from adass.registry import SpecError


@pytest.mark.parametrize(
    "spec, shape",
    [
        ("logreg", (7,)),
        ("mlp:hidden=8,layers=2", (7,)),
        ("mlp:hidden=8", (1, 28, 28)),
        ("lenet", (1, 28, 28)),
        ("lenet", (3, 32, 32)),
        ("resnet:depth=8", (3, 32, 32)),
        ("resnet:depth=20,width=8", (1, 28, 28)),
        ("lenet", (1, 12, 12)),  # the smallest images it takes
        ("resnet:depth=8", (3, 2, 5)),
    ],
)
def test_output_shape(spec, shape):
    model = build_model(spec, shape, classes=5)
    out = model(torch.randn(4, *shape))
    assert out.shape == (4, 5)


def test_same_seed_same_weights_and_global_rng_untouched():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = build_model("mlp:hidden=8", (5,), 3, seed=7)
    after = torch.rand(1)
    b = build_model("mlp:hidden=8", (5,), 3, seed=7)
    c = build_model("mlp:hidden=8", (5,), 3, seed=8)
    assert torch.equal(before, after)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert not torch.equal(next(a.parameters()), next(c.parameters()))


def test_image_models_refuse_vector_data():
    with pytest.raises(SpecError, match="image"):
        build_model("lenet", (10,), 3)


@pytest.mark.parametrize("shape", [(1, 11, 28), (3, 8, 8)])
def test_lenet_refuses_images_its_layers_would_shrink_to_nothing(shape):
    with pytest.raises(
        SpecError, match=f"^--model lenet: needs images of at least 12x12 pixels, got {shape[1]}x{shape[2]}"
    ):
        build_model("lenet", shape, 3)


def test_is_linear():
    assert is_linear(build_model("logreg", (4,), 3))
    assert not is_linear(build_model("mlp:hidden=4", (4,), 3))
