"""The rules that turn an interval into a verdict, and the checks every interval shares.

Light on purpose (no numpy): ``--fail-on`` and users' ``pytest_modelsweep_verdict`` hooks
import :class:`Verdict` (docs/verdicts.md).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Protocol

RULE_COVERS_ZERO = "covers-zero"
RULE_EQUIVALENCE_MARGIN = "equivalence-margin"
RULE_RATIO_COVERS_ONE = "ratio-covers-one"


class Verdict(StrEnum):
    """Outcome of comparing a candidate with the reference on one metric."""

    BETTER = "better"
    WORSE = "worse"
    MATCHES = "matches"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"


def check_confidence(confidence: float) -> float:
    """``confidence`` as a float strictly between 0 and 1 (ValueError otherwise)."""
    if not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    return float(confidence)


def check_margin(margin: float | None) -> float | None:
    """An equivalence margin: None, or a finite number >= 0 (ValueError otherwise)."""
    if margin is not None and not (math.isfinite(margin) and margin >= 0.0):
        raise ValueError(f"equivalence margin must be a finite number >= 0, got {margin!r}")
    return None if margin is None else float(margin)


class _Bounds(Protocol):
    """The ends of an interval."""

    @property
    def low(self) -> float: ...

    @property
    def high(self) -> float: ...


class DifferenceBounds(_Bounds, Protocol):
    """An interval of candidate − reference (the paired bootstrap's ``PairedInterval``);
    ``too_few_items``: it does not hold its coverage."""

    @property
    def too_few_items(self) -> bool: ...


def decide_verdict(interval: DifferenceBounds, margin: float | None = None) -> Verdict:
    """Verdict from the interval of candidate minus reference.

    Fewer than ``MIN_PAIRED_ITEMS`` items, or fewer than ``MIN_DISCORDANT`` scored
    differently: inconclusive (no coverage). Above 0: better; below 0: worse. Covering 0:
    ``matches`` without ``margin``; with one, ``equivalent`` when the whole interval lies
    within [-margin, +margin] (stricter than a TOST's 1 - 2*alpha interval), else
    ``inconclusive``.
    """
    margin = check_margin(margin)
    return _first_verdict(
        (Verdict.INCONCLUSIVE, interval.too_few_items),
        (Verdict.BETTER, interval.low > 0.0),
        (Verdict.WORSE, interval.high < 0.0),
        (Verdict.MATCHES, margin is None),
        (
            Verdict.EQUIVALENT,
            margin is not None and -margin <= interval.low and interval.high <= margin,
        ),
    )


class RatioBounds(_Bounds, Protocol):
    """An interval of candidate ÷ reference (throughput, capacity, capacity in req/s);
    ``degenerate``: it has no spread to judge by."""

    @property
    def degenerate(self) -> bool: ...


def decide_ratio_verdict(interval: RatioBounds, tolerance: float = 0.0) -> Verdict:
    """Verdict from an interval of candidate ÷ reference (every ratio comparison's rule).

    Wholly below ``1 - tolerance``: worse; wholly above ``1 + tolerance``: better; covering
    1: matches; else equivalent within ``[1 - tolerance, 1 + tolerance]``, inconclusive
    across a bound. A degenerate interval (a side with one repeat) is inconclusive.
    """
    if not (math.isfinite(tolerance) and 0.0 <= tolerance < 1.0):
        raise ValueError(f"ratio tolerance must be in [0, 1), got {tolerance!r}")
    return _first_verdict(
        (Verdict.INCONCLUSIVE, interval.degenerate),
        (Verdict.WORSE, interval.high < 1.0 - tolerance),
        (Verdict.BETTER, interval.low > 1.0 + tolerance),
        (Verdict.MATCHES, interval.low <= 1.0 <= interval.high),
        (Verdict.EQUIVALENT, 1.0 - tolerance <= interval.low and interval.high <= 1.0 + tolerance),
    )


def _first_verdict(*rules: tuple[Verdict, bool]) -> Verdict:
    """The verdict of the first rule that holds, in order; inconclusive when none does."""
    return next((verdict for verdict, holds in rules if holds), Verdict.INCONCLUSIVE)
