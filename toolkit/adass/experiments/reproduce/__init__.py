"""``adass reproduce``: the experiments behind the thesis's three claims, with computed verdicts.

Layout: ``arms.py`` (every arm list, plain data), ``plan.py`` (sizes: full, quick, tiny),
``claim_dml.py``, ``claim_quantize.py``, ``claim_sparsify.py`` (one claim each; claim 1's runs in
``dml_runs.py``, its PowerSGD part in ``dml_powersgd.py``), ``grid.py`` and
``replicas.py`` (runs on virtual replicas with modelled link times), ``available.py`` (arms this
build can run), ``verdict.py`` (checks to a verdict), ``progress.py``, ``section.py``, ``plots.py``
and ``report.py`` (writing it all).
"""

from .plan import FULL, PLANS, QUICK, TINY, Plan, plan_for
from .report import CLAIMS, REPORT, reproduce
from .section import Section
from .verdict import Check, verdict

__all__ = ["CLAIMS", "FULL", "PLANS", "QUICK", "REPORT", "TINY", "Check", "Plan", "Section", "plan_for",
           "reproduce", "verdict"]  # fmt: skip
