"""Sphinx extension: the tutorials as pages, with their stored outputs and live Bokeh plots.

The notebooks live in ``tutorials/`` at the top of the checkout (paired with jupytext ``.py`` files);
each build copies the ``.ipynb`` files into ``docs/tutorials/``, where MyST-NB renders them. Their
HoloViews outputs embed Bokeh documents that need BokehJS (and Panel's models) in the page: the
scripts are served from the build's ``_static`` folder, copied from the installed bokeh and panel,
so the pages work offline and on a code host's static site alike, with no CDN.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["JS_FILES", "setup"]

#: what a page loads, in order: BokehJS and the bundles HoloViews plots and Panel panes use
JS_FILES = (
    ("bokeh", "server/static/js/bokeh.min.js"),
    ("bokeh", "server/static/js/bokeh-gl.min.js"),
    ("bokeh", "server/static/js/bokeh-widgets.min.js"),
    ("bokeh", "server/static/js/bokeh-tables.min.js"),
    ("panel", "dist/panel.min.js"),
)


def _package_file(package: str, relative: str) -> Path:
    module = __import__(package)
    return Path(module.__file__).resolve().parent / relative


def _copy_notebooks(app) -> None:  # noqa: ANN001
    source = Path(app.srcdir).parent / "tutorials"
    target = Path(app.srcdir) / "tutorials"
    target.mkdir(exist_ok=True)
    for notebook in sorted(source.glob("[0-9][0-9]_*.ipynb")):
        copy = target / notebook.name
        if not copy.exists() or copy.read_bytes() != notebook.read_bytes():  # keep unchanged pages cached
            shutil.copyfile(notebook, copy)


def _copy_scripts(app, exception) -> None:  # noqa: ANN001
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static" / "bokeh"
    static.mkdir(parents=True, exist_ok=True)
    for package, relative in JS_FILES:
        shutil.copyfile(_package_file(package, relative), static / Path(relative).name)


def setup(app) -> dict:  # noqa: ANN001
    app.connect("builder-inited", _copy_notebooks)
    app.connect("build-finished", _copy_scripts)
    for _, relative in JS_FILES:
        app.add_js_file(f"bokeh/{Path(relative).name}")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
