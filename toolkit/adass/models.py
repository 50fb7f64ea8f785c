"""Models by name (``logreg``, ``mlp:hidden=128``, ``lenet``, ``resnet:depth=8``), shaped from the dataset."""

from __future__ import annotations

import math

import torch
from torch import nn

from .registry import Param, Registry, SpecError

__all__ = ["MODELS", "build_model", "is_linear"]

MODELS = Registry("model")


def _flat_dim(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


@MODELS.register("logreg", doc="multinomial logistic regression (one linear layer)")
def make_logreg(*, shape: tuple[int, ...], classes: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat_dim(shape), classes))


@MODELS.register(
    "mlp",
    doc="multi-layer perceptron with ReLU",
    hidden=Param(128, "units per hidden layer", low=1, high=65536),
    layers=Param(1, "number of hidden layers", low=1, high=16),
)
def make_mlp(hidden: int, layers: int, *, shape: tuple[int, ...], classes: int) -> nn.Module:
    mods: list[nn.Module] = [nn.Flatten()]
    width = _flat_dim(shape)
    for _ in range(layers):
        mods += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    mods.append(nn.Linear(width, classes))
    return nn.Sequential(*mods)


_LENET_MIN = 12


@MODELS.register("lenet", doc="LeNet-5-style CNN for (C, H, W) images")
def make_lenet(*, shape: tuple[int, ...], classes: int) -> nn.Module:
    if len(shape) != 3:
        raise SpecError(f"--model lenet: needs image data (C, H, W), got samples of shape {shape}")
    channels, height, width = shape
    if min(height, width) < _LENET_MIN:  # two 2x pools around an unpadded 5x5 convolution
        raise SpecError(f"--model lenet: needs images of at least {_LENET_MIN}x{_LENET_MIN} pixels, "
                        f"got {height}x{width}; use mlp or resnet")  # fmt: skip
    features = nn.Sequential(
        nn.Conv2d(channels, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
    )  # fmt: skip
    with torch.no_grad():
        flat = features(torch.zeros(1, channels, height, width)).numel()
    return nn.Sequential(
        features, nn.Flatten(),
        nn.Linear(flat, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, classes),
    )  # fmt: skip


class _Block(nn.Module):
    """A basic residual block (two 3x3 convolutions) with an optional strided shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
        )  # fmt: skip
        self.short = nn.Identity()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


@MODELS.register(
    "resnet",
    doc="CIFAR-style ResNet (6n+2 layers)",
    depth=Param(8, "total depth: 8 or 20", choices=(8, 20)),
    width=Param(16, "channels of the first stage", low=4, high=256),
)
def make_resnet(depth: int, width: int, *, shape: tuple[int, ...], classes: int) -> nn.Module:
    if len(shape) != 3:
        raise SpecError(f"--model resnet: needs image data (C, H, W), got samples of shape {shape}")
    blocks = (depth - 2) // 6
    layers: list[nn.Module] = [
        nn.Conv2d(shape[0], width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
    ]  # fmt: skip
    cin = width
    for stage in range(3):
        cout = width * 2**stage
        for b in range(blocks):
            layers.append(_Block(cin, cout, 2 if (b == 0 and stage > 0) else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def build_model(spec: str, shape: tuple[int, ...], classes: int, seed: int = 0) -> nn.Module:
    """Build the model named by ``spec`` for samples of ``shape`` and ``classes`` outputs.

    Weights are initialised from a generator seeded by ``seed`` (the global RNG is left alone).
    """
    devices = []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return MODELS.build(spec, shape=tuple(shape), classes=int(classes))


def is_linear(model: nn.Module) -> bool:
    """True when the model is a single affine map of the flattened input (``logreg``)."""
    layers = [m for m in model.modules() if len(list(m.children())) == 0]
    return sum(isinstance(m, nn.Linear) for m in layers) == 1 and all(
        isinstance(m, (nn.Linear, nn.Flatten)) for m in layers
    )
