"""Shared fixtures: tiny datasets and configs so tests stay fast and offline."""

from __future__ import annotations

import signal

import pytest
import torch

from adass.config import RunConfig

# A shell that starts the suite in the background (``make test &`` in a script) ignores SIGINT for it,
# and every command a test starts inherits the ignored signal: the tests that press Ctrl-C on a command
# would see it carry on. The suite takes Ctrl-C as a terminal gives it, wherever it was started from.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

TINY_DATA = "synthetic:n=240,d=6,classes=3,noise=0.0,hard=0.2,test=60"


@pytest.fixture
def tiny_config() -> RunConfig:
    return RunConfig.from_flat(
        data=TINY_DATA, model="mlp:hidden=16", sampler="full", epochs=3, batch_size=32,
        lr=0.1, momentum=0.9, schedule="cosine", seed=3,
    )  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``cuda`` skip, saying why, on a machine without a CUDA GPU."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(
        reason="needs a CUDA GPU (torch.cuda.is_available() is False); run make device-check on one"
    )
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _few_threads():
    # tests compare exact numbers; one intra-op thread keeps reductions in a fixed order
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
