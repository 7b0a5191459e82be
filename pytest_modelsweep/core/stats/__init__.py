"""The statistics, in one place. Pure: no pytest, no I/O.

* :mod:`.verdicts` -- :class:`Verdict` and the rules from an interval to a verdict (no numpy).
* :mod:`.bootstrap` -- the paired bootstrap of accuracy comparisons, Holm, the sign test.
* :mod:`.intervals` -- Student t intervals of throughput on the log scale and of ratios
  between models; the Wilson interval of one model's accuracy.
* :mod:`.sequences` -- anytime-valid confidence sequences (``--until-decided``).
* :mod:`.repeats` -- how many repeats a throughput setting takes (``--repeats``).
* :mod:`.attainment` -- an SLO search step's attainment interval and decision.

scipy does the distributions (Student t, binomial, beta); the code kept here is the
paired bootstrap's speed-up (``benches/perf/bootstrap_speed.py``) and what scipy has no
function for. ``from pytest_modelsweep.core.stats import Verdict`` is what a
``pytest_modelsweep_verdict`` hook imports (docs/verdicts.md).
"""

from .verdicts import Verdict, decide_ratio_verdict, decide_verdict

__all__ = ["Verdict", "decide_ratio_verdict", "decide_verdict"]
