"""One comparison's way, written once: find the sides → refuse → interval → verdict → record.

:func:`judge` runs a :class:`Comparison`'s steps in order; ``decide`` gives the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ..core.errors import ModelsweepError
from ..core.measurements import (
    AccuracyVerdictStats,
    SearchRatio,
    SearchRatioStats,
    ThroughputRatioStats,
)
from ..core.stats import Verdict
from ..core.stats.bootstrap import PairedInterval
from ..core.stats.intervals import RatioInterval
from .comparisons import ComparisonKind, Failed, Found, Missing, Skipped
from .sequential import SequentialJudgement

SidesT = TypeVar("SidesT")
IntervalT = TypeVar("IntervalT", PairedInterval, RatioInterval, SearchRatio, SequentialJudgement)


@dataclass(frozen=True)
class Judged:
    """What a comparison concluded: its verdict, the measurement it records, its line."""

    verdict: Verdict
    benchmark: str
    value: float
    unit: str
    n: int
    stats: AccuracyVerdictStats | ThroughputRatioStats | SearchRatioStats
    summary: str
    params: dict[str, Any] = field(default_factory=dict)


class Comparison(Protocol[SidesT, IntervalT]):
    """One candidate against the reference on one metric (``kind`` says which interval)."""

    candidate: str
    reference: str

    @property
    def kind(self) -> ComparisonKind: ...

    @property
    def metric(self) -> str: ...

    @property
    def margin(self) -> float | None: ...

    def find(self) -> Found[SidesT] | Missing | Skipped | Failed:
        """Both sides (``Found(sides)``), or why there is nothing to compare."""

    def refuse(self, sides: SidesT) -> str | None:
        """Why these sides cannot be compared (one line naming the fix), or None."""

    def interval(self, sides: SidesT) -> IntervalT:
        """The interval the verdict is decided on; ModelsweepError (or ValueError) refuses."""

    def judged(self, sides: SidesT, interval: IntervalT, verdict: Verdict) -> Judged:
        """The measurement to record and the line to announce."""


def judge(
    comparison: Comparison[SidesT, IntervalT],
    decide: Callable[[IntervalT], Verdict],
) -> Judged | Missing | Skipped | Failed:
    """Find both sides, refuse unlike ones, compute the interval, decide and judge it; a side
    not found is returned as found, a refusal or a failed interval is :class:`Failed`."""
    found = comparison.find()
    if not isinstance(found, Found):
        return found
    sides = found.side
    refused = comparison.refuse(sides)
    if refused is not None:
        return Failed(refused)
    try:
        interval = comparison.interval(sides)
    except (ModelsweepError, ValueError) as error:
        return Failed(str(error))
    return comparison.judged(sides, interval, decide(interval))
