"""Hooks of pytest-modelsweep that users implement in ``conftest.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..core.measurements import SearchRatio
    from ..core.stats import Verdict
    from ..core.stats.bootstrap import PairedInterval
    from ..core.stats.intervals import RatioInterval
    from ..judging.comparisons import ComparisonKind


@pytest.hookspec(firstresult=True)
def pytest_modelsweep_verdict(
    candidate: str,
    reference: str,
    metric: str,
    interval: PairedInterval | RatioInterval | SearchRatio,
    margin: float | None,
    config: pytest.Config,
    kind: ComparisonKind,
) -> Verdict | None:
    """Decide a candidate's verdict on one metric from the interval of its comparison.

    ``kind`` says which interval it is: ``"accuracy"``, a ``PairedInterval`` of candidate minus
    reference item by item (``margin``: ``--margin``; not asked for ``--until-decided``
    verdicts); ``"throughput"``, a ``RatioInterval`` of candidate ÷ reference tokens/s;
    ``"capacity"`` or ``"rate_capacity"``, the ratio of the capacities under ``--slo``, high
    infinite when open above (``margin``: ``--ratio-tolerance`` for all three ratios). Return a
    :class:`~pytest_modelsweep.core.stats.Verdict`, or None to leave the decision to the next
    implementation; the default rules (docs/verdicts.md) run last, the first non-None result
    wins. Take any subset of the arguments; check ``kind`` before reading its fields.
    """
    raise NotImplementedError
