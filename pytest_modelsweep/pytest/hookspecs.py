"""Hooks of pytest-modelsweep that users implement in ``conftest.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..core.measurements import CapacityRatio, RateCapacityRatio
    from ..core.stats import PairedInterval, RatioInterval, Verdict
    from ..judging.comparisons import ComparisonKind

hookspec = pytest.hookspec


@hookspec(firstresult=True)
def pytest_modelsweep_verdict(
    candidate: str,
    reference: str,
    metric: str,
    interval: PairedInterval | RatioInterval | CapacityRatio | RateCapacityRatio,
    margin: float | None,
    config: pytest.Config,
    kind: ComparisonKind,
) -> Verdict | None:
    """Decide a candidate's verdict on one metric from the interval of its comparison.

    ``kind`` says which interval it is:

    * ``"accuracy"`` (``metric`` is ``gsm8k``, ``bfcl`` or a declared benchmark):
      ``interval`` is the bootstrap interval of candidate minus reference, item by item
      (:class:`~pytest_modelsweep.core.stats.PairedInterval`: difference, low, high,
      n, discordant pairs, min detectable difference...); ``margin`` is
      ``--margin``. The default rule is the seed's: *matches* when the interval
      covers zero, *better*/*worse* when it lies above/below; with ``--margin``,
      *equivalent* when it lies inside ±margin and *inconclusive* when it covers
      zero but is wider. Fewer than ``core.stats.MIN_PAIRED_ITEMS`` (30) items, or fewer
      than ``core.stats.MIN_DISCORDANT`` (10) scored differently: *inconclusive* whatever
      the interval, which then does not hold its coverage
      (``interval.too_few_items``). A verdict in ``--fail-on`` fails the test. Where a
      side's items were chosen sequentially (``--until-decided``) the verdict is the
      confidence sequence's, and this hook is not asked: the items stopped by that rule.
    * ``"throughput"`` (``metric`` is ``throughput``, ``long_prompt`` or a declared
      throughput benchmark): ``interval`` is the interval of candidate ÷ reference
      output tokens/s at one setting, Welch t on log tokens/s over the repeats (or over
      interleaved pairs with ``--interleave``)
      (:class:`~pytest_modelsweep.core.stats.RatioInterval`: ratio, low, high,
      repeats, ``degenerate``); ``margin`` is ``--ratio-tolerance``. The default rule
      (:func:`~pytest_modelsweep.core.stats.decide_ratio_verdict`): *worse* when high <
      1 - margin, *better* when low > 1 + margin, *matches* when it covers 1,
      *equivalent* inside 1 ± margin, else *inconclusive*; *inconclusive* when a side
      has a single repeat. A verdict in ``--fail-on`` fails the test.
    * ``"capacity"`` (``metric`` is ``capacity``): ``interval`` is the 90% interval
      of candidate ÷ reference capacity under ``--slo`` from both searches' 95%
      capacity intervals
      (:class:`~pytest_modelsweep.core.measurements.CapacityRatio`: ratio, low,
      high — infinite when open above —, ``confidence``, ``degenerate``);
      ``margin`` is ``--ratio-tolerance``. The default rule is the throughput
      rule on the interval; *inconclusive* when both searches reached their
      server's maximum, or for a bracket of older one-window searches
      (``confidence`` None).
    * ``"rate_capacity"`` (``metric`` is ``rate_capacity``): ``interval`` is the
      interval of candidate ÷ reference capacity in requests/s the two rate sweeps'
      brackets give (:class:`~pytest_modelsweep.core.measurements.RateCapacityRatio`:
      ratio, low, high — infinite when open above —, ``degenerate``); each bracket end
      is a step decided from its Clopper-Pearson attainment interval. ``margin`` is
      ``--ratio-tolerance``. The default rule is the throughput rule on that interval;
      *inconclusive* when both sweeps passed at their maximum rate.

    Return a :class:`~pytest_modelsweep.core.stats.Verdict`, or None to leave the
    decision to the next implementation (the default rule runs last); the
    first non-None result wins. An implementation may take any subset of the
    arguments; one written before ``kind`` existed sees both kinds, so check
    ``kind`` (or ``metric``) before reading kind-specific interval fields.
    """
    raise NotImplementedError
