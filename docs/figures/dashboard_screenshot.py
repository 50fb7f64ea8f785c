"""Take docs/dashboard.png: the dashboard in Chromium during a run of ADASS on four virtual replicas.

Run from the checkout: ``python docs/figures/dashboard_screenshot.py`` (Playwright and a Chromium at
``$ADASS_CHROMIUM``, default ``/usr/bin/chromium``). It serves ``adass dashboard`` on a free port of
127.0.0.1, starts a run from the page, waits until it has finished, and saves the page
reduced to a 256-colour PNG (a few hundred KB at most).
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

OUT = Path(__file__).resolve().parents[1] / "dashboard.png"
CHROMIUM = os.environ.get("ADASS_CHROMIUM", "/usr/bin/chromium")
RUN = {"data": "mnist5k", "model": "mlp:hidden=128", "sampler": "adass:eps=0.2,warmup=2,resample=0,min_keep=0.1", "epochs": "8",
       "replicas": "4", "codec": "qsgd:bits=8"}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    port = _free_port()
    with tempfile.TemporaryDirectory() as runs:
        server = subprocess.Popen([sys.executable, "-m", "adass.cli", "dashboard", "--port", str(port),
                                   "--runs", runs], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1760, "height": 1000})
                deadline = time.monotonic() + 60
                while True:
                    try:
                        page.goto(f"http://127.0.0.1:{port}/")
                        break
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.5)
                page.locator(".adass-start button").wait_for(timeout=60_000)
                for option, value in RUN.items():
                    box = page.locator(f".adass-opt-{option} input")
                    if not box.is_visible():  # codec and exchange cards start collapsed
                        page.locator(".card-header", has_text=option).first.click()
                    box.fill(value)
                    box.press("Enter")
                page.locator(".adass-start button").click()
                page.get_by_text("status: finished").first.wait_for(timeout=600_000)
                time.sleep(3)  # the views' last redraw
                png = page.screenshot(full_page=False)
                browser.close()
        finally:
            server.terminate()
            server.wait(30)
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256)
    image.save(OUT, optimize=True)
    print(f"{OUT}: {OUT.stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
