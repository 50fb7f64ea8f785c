"""The documentation site builds from the checkout with warnings as errors, its generated references
cover every flag and column, the README's links and numbers lead into it, and a tutorial page shows
a live Bokeh plot in a real browser.

The build runs Sphinx once per session with notebook execution off: the tutorials are stored with
their outputs (``make tutorials``), so nothing runs a kernel here. A broken cross-reference, a
docstring autodoc cannot read or a missing image fails the build.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BUILD_TIMEOUT_S = 300

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")
pytest.importorskip("pydata_sphinx_theme")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built into a temporary folder; the build's output is in the assertion on failure."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "ADASS_DOCS_EXECUTE": "off"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / ".doctrees"), str(DOCS), str(out / "html")],
        capture_output=True, text=True, env=env, timeout=BUILD_TIMEOUT_S,
    )  # fmt: skip
    print(f"docs built in {time.perf_counter() - start:.1f} s")
    assert proc.returncode == 0, f"sphinx-build -W failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert not proc.stderr.strip(), f"sphinx-build warned:\n{proc.stderr[-6000:]}"
    return out / "html"


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def test_every_page_of_the_site_is_built(site: Path):
    for page in ("index", "getting-started", "concepts/adass", "concepts/exchanges", "concepts/q-adass",
                 "concepts/rs-adass", "concepts/powersgd", "concepts/memory", "howto/your-data",
                 "howto/dask-cluster", "howto/network-lab", "howto/dashboard", "howto/reproduce", "reference/cli",
                 "reference/records", "reference/api", "results", "results/benchmarks"):  # fmt: skip
        assert (site / f"{page}.html").is_file(), f"{page} was not built"
    for notebook in sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.ipynb")):
        assert (site / "tutorials" / f"{notebook.stem}.html").is_file(), f"{notebook.name} has no page"


def test_the_cli_reference_names_every_flag_of_every_command(site: Path):
    import argparse

    from adass.cli.main import build_parser

    page = _text(site / "reference" / "cli.html")
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        if name == "netlab":  # its own sub-commands, documented on the network lab page
            continue
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert flag in page, f"adass {name} {flag} is missing from the CLI reference"


def test_the_record_reference_names_every_column_with_its_meaning(site: Path):
    from adass.metrics import RECORD_FILES

    page = _text(site / "reference" / "records.html")
    for kind, filename in RECORD_FILES.items():
        assert filename in page
        for f in fields(kind):
            assert f.metadata.get("doc"), f"{kind.__name__}.{f.name} has no doc"
            assert f'<code class="docutils literal notranslate"><span class="pre">{f.name}</span>' in page


def test_the_readme_is_short_and_its_links_into_the_site_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    links = re.findall(r"\]\(((?:docs|tutorials)/[^)#]+)(?:#[^)]*)?\)", readme)
    assert links, "the README links into the site"
    for link in links:
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_every_number_in_the_readme_has_its_source_in_the_site():
    readme = (ROOT / "README.md").read_text()
    prose = re.sub(r"```.*?```", "", readme, flags=re.S)  # commands are not claims
    site = "\n".join(p.read_text() for p in DOCS.rglob("*.md") if "_build" not in p.parts)
    for number in set(re.findall(r"(?<![\w.])\d+\.\d+x?(?![\w.])|(?<![\w.])\d+(?:\.\d+)?x(?![\w.])", prose)):
        assert number in site, f"README states {number}, which no page of docs/ states"


# --- in a browser ----------------------------------------------------------------------------------


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (as a static host serves it)."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def test_a_tutorial_page_shows_a_live_bokeh_plot(browser, served: str):
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{served}/tutorials/00_quickstart.html")
    page.wait_for_function("() => window.Bokeh !== undefined && Bokeh.documents.length > 0", timeout=60_000)
    # a figure draws on canvases inside its (nested) shadow roots once BokehJS has laid it out
    drawn = """() => {
      let canvases = 0;
      const walk = (root) => {
        for (const el of root.querySelectorAll('*')) {
          if (el.tagName === 'CANVAS' && el.width > 0 && el.height > 0) canvases += 1;
          if (el.shadowRoot) walk(el.shadowRoot);
        }
      };
      walk(document);
      return canvases > 0;
    }"""
    page.wait_for_function(drawn, timeout=60_000)
    assert not errors, f"the page raised: {errors}"
