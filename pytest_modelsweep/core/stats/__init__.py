"""The statistics, in one place (a module per concept). Pure: no pytest, no I/O.

scipy does the distributions (Student t, binomial, beta); the code kept here is the
paired bootstrap's speed-up (``benches/perf/bootstrap_speed.py``) and what scipy has no
function for. ``from pytest_modelsweep.core.stats import Verdict`` is what a
``pytest_modelsweep_verdict`` hook imports (docs/verdicts.md).
"""

from .verdicts import Verdict, decide_ratio_verdict, decide_verdict

__all__ = ["Verdict", "decide_ratio_verdict", "decide_verdict"]
