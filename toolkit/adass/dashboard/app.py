"""The adass live dashboard page.

Serve it with ``adass dashboard [--runs DIR] [--scheduler ADDR]``, or with
``panel serve "$(python -c 'import adass.dashboard as d; print(d.app_path())')" --args --runs DIR``;
the page is ``adass.dashboard``, its views come from ``adass.viz``. The file ships in the wheel as package
data; the library never imports it.
"""

import sys

from adass.dashboard import app_options, build_app

build_app(**app_options(sys.argv[1:])).servable(title="adass dashboard")
