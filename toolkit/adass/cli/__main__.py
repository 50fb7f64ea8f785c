"""``python -m adass.cli ...`` is the ``adass`` command."""

import sys

from .main import main

sys.exit(main())
