"""Sphinx configuration of the adass documentation (``make docs``; ``sphinx-build -W docs docs/_build/html``).

The tutorials are copied from ``tutorials/`` with the outputs they are stored with; with
``ADASS_DOCS_EXECUTE=cache|force`` MyST-NB runs them while building (``make docs`` passes ``EXECUTE``,
``cache`` unless told otherwise); unset, a build needs no kernel (the test suite's build). The command-line and record references are written from the option declarations and
the record classes on every build (``_ext/adass_reference.py``), so they cannot fall out of step.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT / "toolkit"))  # the checkout's own package, also where it is not installed

project = "adass"
author = "the adass authors"
copyright = "the adass authors"
release = metadata.version("adass")

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "adass_reference",
    "adass_tutorials",
]

exclude_patterns = ["_build", "_generated", "**/_generated", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
suppress_warnings = ["mystnb.unknown_mime_type"]

# --- MyST and notebooks ------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = os.environ.get("ADASS_DOCS_EXECUTE", "off")
nb_execution_timeout = 1800
nb_execution_raise_on_error = True
nb_merge_streams = True

# --- the Python API: numpydoc docstrings through napoleon ----------------------------------------
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"members": True, "show-inheritance": False}
# the API pages document what each module exports; names in signatures that Sphinx cannot resolve
# (third-party types without intersphinx, which needs the network) are not cross-reference errors
nitpicky = False

# --- HTML --------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "adass"
html_static_path = ["_static"]
html_css_files = ["adass.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_show_sourcelink = False
