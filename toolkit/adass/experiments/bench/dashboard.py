"""The dashboard under load: N visitors opening the page at once, and Start to the first accuracy point.

``adass dashboard`` runs in a process of its own on 127.0.0.1; a headless Chromium (Playwright) opens
``visitors`` pages at the same instant and times each from its request to a rendered page (the Start
button drawn by BokehJS, which means the whole document arrived and was laid out). Then one page
starts a run with the page's defaults, in this process and on two Dask workers, and times Start to the
first point of the accuracy curve in the browser. Browser and server share this machine's cores, so
the table states the machine: its cores, its load before the run, and the server's CPU time per page.

Needs Playwright (``pip install playwright``) and a Chromium: ``$ADASS_CHROMIUM`` or
``/usr/bin/chromium`` (Debian's package). ``$ADASS_BENCH_LOG`` names a file for the server's output.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil

from ...registry import SpecError
from ...tables import markdown_table
from . import write_report

__all__ = ["run"]

CHROMIUM = Path(os.environ.get("ADASS_CHROMIUM", "/usr/bin/chromium"))
#: the points of the named figure's data sources, as the browser holds them
POINTS_JS = """(name) => {
  let best = -1;
  for (const doc of Bokeh.documents) for (const model of doc.all_models) {
    if (model.name !== name || !model.renderers) continue;
    let n = 0;
    for (const r of model.renderers) { if (r.data_source) n += r.data_source.get_length() || 0; }
    best = Math.max(best, n);
  }
  return best;
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_LOG = open(os.environ["ADASS_BENCH_LOG"], "w") if os.environ.get("ADASS_BENCH_LOG") else subprocess.DEVNULL  # noqa: SIM115


def _serve(runs: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "adass.cli", "dashboard", "--port", str(port), "--runs", str(runs)],
        stdout=_LOG, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"adass dashboard exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}/"
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("adass dashboard did not listen within 120 s")


def _stop(proc: subprocess.Popen) -> None:
    """End the server and whatever it started (its runs' Dask workers), by the PIDs it had."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    for child in children:
        if child.is_running():
            child.kill()


def _machine_cpu_s() -> float:
    """CPU seconds all cores spent busy since boot (every process)."""
    times = psutil.cpu_times()
    return float(times.user + times.system + getattr(times, "nice", 0.0) + getattr(times, "irq", 0.0)
                 + getattr(times, "softirq", 0.0))  # fmt: skip


def _cpu_s(proc: subprocess.Popen) -> float:
    times = psutil.Process(proc.pid).cpu_times()
    return float(times.user + times.system)


async def _visit(browser, url: str, timeout_s: float) -> float:
    """Seconds from the request to the Start button drawn; inf if it never was."""
    context = await browser.new_context(viewport={"width": 1600, "height": 1200})
    page = await context.new_page()
    start = time.perf_counter()
    try:
        await page.goto(url, timeout=timeout_s * 1000)
        await page.locator(".adass-start button").wait_for(timeout=timeout_s * 1000)
        return time.perf_counter() - start
    except Exception:  # noqa: BLE001 - a page that never rendered counts as such
        return float("inf")
    finally:
        await context.close()


def _browser_cpu_s() -> float:
    """CPU seconds of the Chromium processes this process started, with those already ended (a closed
    tab's renderer is counted by the browser process that reaped it)."""
    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" not in proc.name():
                continue
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except psutil.NoSuchProcess:
            continue
    return total


async def _crowd(url: str, visitors: int, timeout_s: float) -> tuple[list[float], float]:
    """Seconds to a rendered page for one visitor, then for ``visitors`` at once; and the browser's CPU
    seconds for the crowd."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            alone = await _visit(browser, url, timeout_s)  # one page first (the server's first-page costs)
            before = _browser_cpu_s()
            crowd = await asyncio.gather(*(_visit(browser, url, timeout_s) for _ in range(visitors)))
            return [alone, *crowd], _browser_cpu_s() - before
        finally:
            await browser.close()


async def _first_point(url: str, options: dict[str, str], timeout_s: float) -> float:
    """Seconds from clicking Start to the first point of the accuracy curve in the page."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = await browser.new_page(viewport={"width": 1600, "height": 1200})
            await page.goto(url)
            await page.locator(".adass-start button").wait_for(timeout=120_000)
            for option, value in options.items():
                box = page.locator(f".adass-opt-{option} input")
                await box.fill(value)
                await box.press("Enter")
            await asyncio.sleep(0.5)  # the values reach the server
            start = time.perf_counter()
            await page.locator(".adass-start button").click()
            elapsed = float("inf")
            while time.perf_counter() - start < timeout_s:
                if await page.evaluate(POINTS_JS, "adass-test_acc") > 0:
                    elapsed = time.perf_counter() - start
                    break
                await asyncio.sleep(0.05)
            # stopped either way, and ended before the next measure opens its page (a page that opens
            # while a run goes on shows that run, its boxes locked)
            await page.locator(".adass-stop button").click()
            await page.locator(".adass-start button:not([disabled])").wait_for(timeout=300_000)
            return elapsed
        finally:
            await browser.close()


def _check_browser() -> None:
    try:
        import playwright  # noqa: F401
    except ImportError:
        raise SpecError("bench dashboard: needs Playwright (pip install playwright) and a Chromium") from None
    if not CHROMIUM.exists():
        raise SpecError(f"bench dashboard: no Chromium at {CHROMIUM}; install one or set ADASS_CHROMIUM")


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Time ``visitors`` pages opened at once and Start to the first accuracy point; write the table."""
    _check_browser()
    visitors = 5 if quick else 20
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="adass-bench-dashboard-") as tmp:
        proc, url = _serve(Path(tmp))
        try:
            start = time.perf_counter()
            server_before, machine_before = _cpu_s(proc), _machine_cpu_s()
            (alone, *times), browser_cpu = asyncio.run(_crowd(url, visitors, timeout_s=300))
            wall = time.perf_counter() - start
            server_cpu = _cpu_s(proc) - server_before
            machine_cpu = _machine_cpu_s() - machine_before
            done = sorted(t for t in times if t != float("inf"))
            rows.append({"measure": "one visitor alone: seconds to a rendered page", "median": alone, "p90": alone,
                         "max": alone, "rendered": "1/1" if alone != float("inf") else "0/1",
                         "server_cpu_s_per_page": None, "browser_cpu_s_per_page": None, "wall_s": alone})  # fmt: skip
            rows.append({
                "measure": f"{visitors} visitors at once: seconds to a rendered page",
                "median": statistics.median(times), "p90": sorted(times)[int(0.9 * (len(times) - 1))],
                "max": max(times), "rendered": f"{len(done)}/{visitors}",
                "server_cpu_s_per_page": server_cpu / (visitors + 1),
                "browser_cpu_s_per_page": browser_cpu / visitors, "wall_s": wall,
            })  # fmt: skip
            # long runs, stopped at their first point (the page's defaults otherwise)
            for label, options in (("in this process", {"epochs": "500"}),
                                   ("on 2 Dask workers", {"epochs": "500", "workers": "2"})):  # fmt: skip
                first = asyncio.run(_first_point(url, options, timeout_s=120))
                rows.append({"measure": f"Start to first accuracy point, page defaults, {label}",
                             "median": first, "p90": first, "max": first, "rendered": "", "server_cpu_s_per_page": None,
                             "browser_cpu_s_per_page": None, "wall_s": first})  # fmt: skip
        finally:
            _stop(proc)
    table = pd.DataFrame(rows)
    machine = (f"{os.cpu_count()} cores, load average {load_before[0]:.2f} (1 min) before the run; "
               "browser and server on the same cores, loopback")  # fmt: skip
    # what the crowd cost the machine: the server, the browser, and everything else that ran meanwhile
    cores = os.cpu_count() or 1
    others = max(0.0, machine_cpu - server_cpu - browser_cpu)
    reading = (f"During the {visitors} visits ({wall:.1f} s, {cores * wall:.0f} core-seconds): the server "
               f"used {server_cpu:.1f} CPU seconds, the browser {browser_cpu:.1f}, other processes "
               f"{others:.1f}. One server process builds the pages one after another: at "
               f"{server_cpu / (visitors + 1):.2f} s a page, {visitors} pages take it "
               f"{server_cpu:.1f} s however many cores the machine has, so the median page can be drawn "
               f"no sooner than about {server_cpu / 2:.1f} s after the crowd arrives.")  # fmt: skip
    lines = ["# adass bench dashboard", "", f"Machine: {machine}.", "",
             markdown_table(table, digits=2), "", reading]  # fmt: skip
    write_report(out_dir, "dashboard", lines, {"dashboard": table})
    return table
