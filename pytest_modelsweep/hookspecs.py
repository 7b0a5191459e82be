"""Hooks of pytest-modelsweep that users implement in ``conftest.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .stats import PairedInterval, Verdict

hookspec = pytest.hookspec


@hookspec(firstresult=True)
def pytest_modelsweep_verdict(
    candidate: str,
    reference: str,
    metric: str,
    interval: PairedInterval,
    margin: float | None,
    config: pytest.Config,
) -> Verdict | None:
    """Decide a candidate's verdict on one metric from the paired interval.

    ``interval`` is the bootstrap interval of candidate minus reference, item by
    item (:class:`~pytest_modelsweep.stats.PairedInterval`: difference, low, high,
    n, discordant pairs, min detectable difference...). Return a
    :class:`~pytest_modelsweep.stats.Verdict`; the first non-None result wins.
    The default implementation is the seed's rule: *matches* when the interval
    covers zero, *better*/*worse* when it lies above/below; with ``--margin``,
    *equivalent* when it lies inside ±margin and *inconclusive* when it covers
    zero but is wider.
    """
    raise NotImplementedError
