"""Shared fixtures: tiny datasets and configs so tests stay fast and offline."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

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


#: the browser of the tests that open pages: Debian's chromium unless ``$ADASS_CHROMIUM`` names another
CHROMIUM = Path(os.environ.get("ADASS_CHROMIUM", "/usr/bin/chromium"))


def _unavailable(why: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser test cannot run in CI: {why}")
    pytest.skip(why)


@pytest.fixture
def browser() -> Iterator:
    """A headless Chromium through Playwright; without one a test skips, or fails under ``CI=true``."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed")
    if not CHROMIUM.exists():
        _unavailable(f"no browser at {CHROMIUM}")
    with sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        except Exception as err:  # a browser that is there but does not start
            _unavailable(f"{CHROMIUM} did not start: {err}")
        yield chromium
        chromium.close()
