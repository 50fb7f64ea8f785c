"""The adass live dashboard, as a page ``panel serve`` takes from a checkout of the repository:

    panel serve dashboards/app.py --args --runs runs --data-dir data

It is the same page as ``adass dashboard`` (``adass.dashboard.build_app``, views from ``adass.viz``);
the arguments after ``--args`` are those of ``adass dashboard``.
"""

import sys

from adass.dashboard import app_options, build_app

build_app(**app_options(sys.argv[1:])).servable(title="adass dashboard")
