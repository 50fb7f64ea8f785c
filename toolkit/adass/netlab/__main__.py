"""``python -m adass.netlab up|down|cluster|run|status`` (the same as ``adass netlab ...``)."""

import sys

from .command import main

sys.exit(main())
