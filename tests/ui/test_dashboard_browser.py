"""The dashboard in a real browser: serve it, start a tiny distributed run from the page, watch it arrive.

Drives Debian's chromium (or ``$ADASS_CHROMIUM``) through Playwright. Without a browser the test is
skipped, except with ``CI=true``, where a missing browser fails it.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

TINY = {
    "data": "synthetic:n=200,d=6,classes=3,test=50",
    "model": "mlp:hidden=8",
    "sampler": "adass:eps=0.2",
    "epochs": "4",
    "batch_size": "16",
    "workers": "2",
}
# points the figures of this name hold in the page (their data sources, as the browser has them); a pane
# whose plot was replaced can briefly hold an old figure of the same name, so take the largest
POINTS_JS = """(name) => {
  let best = -1;
  for (const model of Bokeh.documents[0].all_models) {
    if (model.name !== name || !model.renderers) continue;
    let n = 0;
    for (const r of model.renderers) { if (r.data_source) n += r.data_source.get_length() || 0; }
    best = Math.max(best, n);
  }
  return best;
}"""


# the threshold line of the bound histogram (a Bokeh Span): its place, or null while it is hidden
THRESHOLD_JS = """() => {
  for (const model of Bokeh.documents[0].all_models) {
    if (model.name !== "adass-bounds" || !model.renderers) continue;
    for (const a of [...model.renderers, ...(model.center || [])]) {
      if ("dimension" in a && "location" in a && a.line_alpha > 0 && a.location !== null) return a.location;
    }
  }
  return null;
}"""
# the samples strip of this name: how many of its pixels are not blank white, and its tick labels
STRIP_JS = """(name) => {
  let best = {inked: 0, labels: []};
  for (const model of Bokeh.documents[0].all_models) {
    if (model.name !== name || !model.renderers) continue;
    for (const r of model.renderers) {
      const image = r.data_source && r.data_source.data.image;
      if (!image || !image.length) continue;
      const pixels = image[0];
      let inked = 0;
      for (let i = 0; i < pixels.length; i++) { if (pixels[i] !== 0xFFFFFFFF) inked += 1; }
      const overrides = model.below[0].major_label_overrides || {};  // a Map in BokehJS 3
      const labels = (overrides instanceof Map ? [...overrides.values()] : Object.values(overrides)).map(String);
      if (inked > best.inked) best = {inked: inked, labels: labels};
    }
  }
  return best;
}"""
TITLE_JS = """(name) => {
  for (const model of Bokeh.documents[0].all_models) {
    if (model.name === name && model.title && model.title.text) return model.title.text;
  }
  return "";
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the dashboard exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError("the dashboard did not start listening")


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[SimpleNamespace]:
    """``adass dashboard`` in its own process; whatever it started is gone afterwards."""
    port, runs, log = _free_port(), tmp_path / "runs", tmp_path / "server.log"
    runs.mkdir()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "adass.cli", "dashboard", "--port", str(port), "--runs", str(runs)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    server = SimpleNamespace(
        url=f"http://127.0.0.1:{port}/", port=port, proc=proc, runs=runs, log=log, seen=set()
    )
    try:
        _wait_listening(port, proc, timeout_s=60)
        yield server
    finally:
        server.seen |= _descendants(proc)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for child in server.seen:
            if child.is_running():
                child.kill()


def _descendants(proc: subprocess.Popen) -> set[psutil.Process]:
    try:
        return set(psutil.Process(proc.pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return set()


def _fill(page, option: str, value: str) -> None:
    box = page.locator(f".adass-opt-{option} input")
    box.fill(value)
    box.press("Enter")


def _open_card(page, title: str) -> None:
    """Expand a collapsed card of options (codec, exchange and each section's "more" start collapsed)."""
    page.locator(".card-header", has_text=title).first.click()


def _wait_for(check, timeout_s: float, what: str, server: SimpleNamespace):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        server.seen |= _descendants(server.proc)  # the run's Dask workers, to check they end too
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; server log:\n{server.log.read_text()[-3000:]}")


def test_a_run_started_from_the_page_fills_the_live_views(browser, dashboard, tmp_path):
    page = browser.new_page(viewport={"width": 1700, "height": 1300})
    page.goto(dashboard.url)
    page.locator(".adass-start button").wait_for(timeout=60_000)

    # a bad option is shown in the page, and nothing starts
    _fill(page, "sampler", "bogus")
    page.locator(".adass-start button").click()
    page.locator(".adass-error").get_by_text("--sampler").wait_for(timeout=30_000)
    # a number out of its bounds stays in its box, is named beside it, and Start refuses it
    _fill(page, "epochs", "-3")
    page.locator(".adass-invalid-optim").get_by_text("--epochs: -3 is not allowed").wait_for(timeout=30_000)
    assert page.locator(".adass-opt-epochs input").input_value() == "-3"
    _fill(page, "sampler", TINY["sampler"])
    page.locator(".adass-start button").click()
    page.locator(".adass-error").get_by_text("--epochs").wait_for(timeout=30_000)

    for option, value in TINY.items():
        _fill(page, option, value)
    page.locator(".adass-invalid-optim").wait_for(state="hidden", timeout=30_000)  # 4 epochs: taken
    _open_card(page, "more cluster options")  # its boxes are sent when it is first opened
    page.locator(".adass-opt-dask_dashboard input").check()  # Dask's own dashboard is served only when asked
    page.locator(".adass-start button").click()
    # a link while the run's cluster lives (read at once: a short run may end between two looks)
    hrefs = lambda: page.locator(".adass-dask-link a").evaluate_all("links => links.map(a => a.href)")  # noqa: E731
    (href,) = _wait_for(hrefs, 60, "the Dask link", dashboard)
    assert href.startswith("http://127.0.0.1:")
    points = lambda name: page.evaluate(POINTS_JS, name)  # noqa: E731
    # accuracy gains a point per epoch; the heatmap starts with one blank cell
    _wait_for(lambda: points("adass-test_acc") > 0 and points("adass-traffic") > 1, 150,
              "accuracy and traffic points", dashboard)  # fmt: skip
    _wait_for(lambda: page.locator(".adass-status").get_by_text("finished").count(), 120, "the run to finish",
              dashboard)  # fmt: skip
    _wait_for(
        lambda: page.locator(".adass-start button").is_enabled(), 30, "Start to be enabled again", dashboard
    )
    assert page.locator(".adass-stop button").is_disabled()
    assert points("adass-test_acc") == 2 * 4  # a line and a marker per epoch
    assert points("adass-topology") > 0 and points("adass-timeline") > 0
    # a synchronous ring: every step's staleness is 0, and the caption says why
    assert points("adass-staleness") > 0
    assert page.evaluate(TITLE_JS, "adass-staleness").startswith("staleness 0 on every step (synchronous)")
    # the Dask dashboard went with the run's cluster: its address is shown, no longer as a link
    assert page.locator(".adass-dask-link a").count() == 0
    assert page.locator(".adass-dask-link").get_by_text("closed with its run (was http://127.0.0.1:").count()
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)

    # the finished run was saved under --runs and the Compare tab overlays it
    page.get_by_text("Compare", exact=True).click()
    _wait_for(lambda: points("adass-compare") > 0, 30, "the saved run's curve", dashboard)
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    page.close()

    # SIGTERM stops the server; no process it started (the run's Dask workers included) is left behind
    dashboard.proc.send_signal(signal.SIGTERM)
    assert dashboard.proc.wait(60) == 0
    gone, alive = psutil.wait_procs(list(dashboard.seen), timeout=30)
    assert not alive, f"left running: {alive}"
    assert len(dashboard.seen) >= 2  # the run did use worker processes
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000


def test_image_data_shows_its_extreme_samples_and_the_selection_threshold(browser, dashboard, tmp_path):
    """mnist5k in this process: the samples views draw digits and the histogram its threshold."""
    page = browser.new_page(viewport={"width": 1700, "height": 1300})
    page.goto(dashboard.url)
    page.locator(".adass-start button").wait_for(timeout=60_000)
    for option, value in {
        "data": "mnist5k",
        "sampler": "adass:eps=0.2,warmup=1,final=0",
        "epochs": "3",
    }.items():
        _fill(page, option, value)
    page.locator(".adass-start button").click()
    # the link to a Dask dashboard is not shown for a run without a cluster
    assert not page.locator(".adass-dask-link").is_visible()
    _wait_for(lambda: page.locator(".adass-status").get_by_text("finished").count(), 240, "the run to finish",
              dashboard)  # fmt: skip
    page.screenshot(path=str(tmp_path / "in-process-mnist5k-finished.png"), full_page=True)
    threshold = _wait_for(lambda: page.evaluate(THRESHOLD_JS), 30, "the threshold line", dashboard)
    assert -6 < threshold < 3  # log10 of a bound
    for which in ("hardest", "easiest"):
        strip = _wait_for(lambda w=which: page.evaluate(STRIP_JS, f"adass-{w}")["inked"] > 0, 30,
                          f"{which} images", dashboard)  # fmt: skip
        strip = page.evaluate(STRIP_JS, f"adass-{which}")
        assert strip["inked"] > 100 and sum("y=" in label for label in strip["labels"]) == 8
    # switching the x axis starts the range afresh (epochs 0..2 -> backprops in the thousands)
    page.locator(".adass-x-axis select").select_option(label="backprops")
    _wait_for(
        lambda: "backprops" in page.evaluate(TITLE_JS, "adass-test_acc"), 30, "the new x axis", dashboard
    )
    page.screenshot(path=str(tmp_path / "in-process-mnist5k.png"), full_page=True)
    assert "DynamicMap must only contain one type" not in dashboard.log.read_text()
    assert "Traceback" not in dashboard.log.read_text()
    page.close()


def test_a_parameter_server_run_is_drawn_as_a_star_with_its_codec(browser, dashboard, tmp_path):
    page = browser.new_page(viewport={"width": 1700, "height": 1300})
    page.goto(dashboard.url)
    page.locator(".adass-start button").wait_for(timeout=60_000)
    for option, value in TINY.items():
        _fill(page, option, value)
    _open_card(page, "exchange")
    _open_card(page, "codec")
    _fill(page, "exchange", "ps:servers=1")
    _fill(page, "codec", "qsgd:bits=4")
    page.locator(".adass-start button").click()
    # a star from the first drawing on: the run's configuration says there is a server
    _wait_for(
        lambda: page.evaluate(TITLE_JS, "adass-topology").startswith("PS star"), 150, "the star", dashboard
    )
    _wait_for(lambda: page.locator(".adass-status").get_by_text("finished").count(), 150, "the run to finish",
              dashboard)  # fmt: skip
    chunks = _wait_for(lambda: "wire/raw" in page.evaluate(TITLE_JS, "adass-chunks") and
                       page.evaluate(TITLE_JS, "adass-chunks"), 30, "the chunk bytes", dashboard)  # fmt: skip
    ratio = float(chunks.split("wire/raw ")[1].rstrip(")"))
    # 4-bit pushes, fp32 pulls (~0.56), plus the budget agreement's few raw bytes (agree phase)
    assert ratio < 0.7
    assert page.evaluate(TITLE_JS, "adass-topology").endswith("steps")
    page.screenshot(path=str(tmp_path / "ps.png"), full_page=True)
    page.close()


def _saved_epochs(runs: Path) -> list[int]:
    """Epochs in the eval records of the one run saved under ``runs`` (empty until the run ends)."""
    import pandas as pd

    files = list(runs.glob("*/eval.parquet"))
    return list(pd.read_parquet(files[0])["epoch"]) if files else []


def test_a_run_of_fast_epochs_outlives_its_page_and_stops_when_asked(browser, dashboard):
    page = browser.new_page(viewport={"width": 1700, "height": 1300})
    page.goto(dashboard.url)
    page.locator(".adass-start button").wait_for(timeout=60_000)
    # tens of epochs a second (a run of hundreds a second outpaces a page on two cores)
    fast = {"data": "synthetic:n=2000,d=8,classes=2,test=64", "model": "mlp:hidden=32", "sampler": "full",
            "epochs": "100000", "batch_size": "64"}  # fmt: skip
    for option, value in fast.items():
        _fill(page, option, value)
    page.locator(".adass-start button").click()
    points = lambda name: page.evaluate(POINTS_JS, name)  # noqa: E731
    _wait_for(lambda: points("adass-test_acc") > 0, 120, "the first epochs", dashboard)
    page.close()  # the run is the server's: it goes on without the page
    time.sleep(5)  # the closed page has stopped polling (its connection is gone)
    assert not _saved_epochs(dashboard.runs)  # nothing was stopped and saved
    page = browser.new_page(viewport={"width": 1700, "height": 1300})
    page.goto(dashboard.url)  # a page that opens shows the run in progress, from its first epoch
    _wait_for(lambda: page.locator(".adass-stop button:not([disabled])").count(), 120,
              "the run in progress on the reopened page", dashboard)  # fmt: skip
    _wait_for(lambda: points("adass-test_acc") > 20, 60, "the replayed epochs", dashboard)
    assert "running" in page.locator(".adass-runs select").inner_text()
    page.locator(".adass-stop button").click()  # any page stops the run, not only the one that started it
    _wait_for(lambda: page.locator(".adass-status").get_by_text("stopped").count(), 60, "the run to stop",
              dashboard)  # fmt: skip
    epochs = _wait_for(lambda: _saved_epochs(dashboard.runs), 90, "the stopped run's records", dashboard)
    assert 0 < len(epochs) < 100_000 and epochs == list(range(len(epochs)))
    time.sleep(3)  # nothing is trained after the stop
    assert _saved_epochs(dashboard.runs) == epochs
    # Compare marks the run as one that did not finish
    page.get_by_text("Compare", exact=True).click()
    page.locator(".adass-compare-runs").wait_for(timeout=30_000)
    _wait_for(lambda: page.get_by_text("STOPPED after").count(), 30, "the stopped run's mark", dashboard)
    # no failure of the toolkit's own (under load Bokeh may log a patch that beat its page's session)
    assert "adass/" not in "".join(t for t in dashboard.log.read_text().split("Traceback")[1:])
