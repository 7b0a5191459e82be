"""One step decision for both SLO searches: a step's attainment with its exact interval.

A step passes when the two-sided Clopper-Pearson interval of the share of its requests that
met the SLO reaches ``--slo-attainment``, misses when it lies below, else is inconclusive.
Requests of one window queue together, so :func:`windows_attainment` pools a step's windows
with the design effect ``deff ≥ 1`` of cluster sampling (Kish): the exact interval of the
effective counts ``n / deff`` and ``share × n / deff`` (docs/throughput.md;
``benches/perf/attainment_interval_simulation.py``, ``capacity_aa_simulation.py``). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ..measurements import AttainmentInterval
from .verdicts import check_confidence

DEFAULT_CONFIDENCE = 0.90
"""Two-sided level of a step's attainment interval: each one-sided error at most 5%."""


def _clopper_pearson(good: float, requests: float, confidence: float) -> tuple[float, float]:
    """The exact two-sided interval of ``good`` of ``requests`` (real counts allowed)."""
    from scipy.stats import beta

    tail = (1.0 - confidence) / 2.0
    low = 0.0 if good <= 0 else float(beta.ppf(tail, good, requests - good + 1))
    high = 1.0 if good >= requests else float(beta.ppf(1.0 - tail, good + 1, requests - good))
    return low, high


def attainment_interval(
    good: int, requests: int, confidence: float = DEFAULT_CONFIDENCE
) -> AttainmentInterval:
    """The exact (Clopper-Pearson) two-sided interval of a binomial share ``good/requests``."""
    check_confidence(confidence)
    if requests < 1 or not 0 <= good <= requests:
        raise ValueError(f"need 0 <= good <= requests and requests >= 1, got {good}/{requests}")
    return AttainmentInterval(
        good, requests, confidence, *_clopper_pearson(good, requests, confidence)
    )


def design_effect(windows: Sequence[tuple[int, int]]) -> float:
    """How much more the pooled share of several windows ``(good, requests)`` varies than a
    binomial share of as many independent requests (≥ 1; 1 for one window, or when every
    request was good, or every one bad)."""
    total = sum(n for _, n in windows)
    good = sum(g for g, _ in windows)
    if len(windows) < 2 or total == 0 or good in (0, total):
        return 1.0
    share = good / total
    k = len(windows)
    clustered = k / (k - 1) * sum((g - share * n) ** 2 for g, n in windows) / total**2
    binomial = share * (1.0 - share) / total
    return max(1.0, clustered / binomial)


def windows_attainment(
    windows: Sequence[tuple[int, int]], confidence: float = DEFAULT_CONFIDENCE
) -> AttainmentInterval:
    """A step's pooled attainment over its windows ``(good, requests)``, with the exact
    interval of the effective counts (:func:`design_effect`); one window: its plain
    :func:`attainment_interval`."""
    check_confidence(confidence)
    if not windows or any(n < 1 or not 0 <= g <= n for g, n in windows):
        raise ValueError(
            f"need windows of 0 <= good <= requests and requests >= 1, got {list(windows)}"
        )
    good, total = sum(g for g, _ in windows), sum(n for _, n in windows)
    deff = design_effect(windows)
    if deff == 1.0:
        return replace(attainment_interval(good, total, confidence), windows=len(windows))
    effective = total / deff
    return AttainmentInterval(
        good,
        total,
        confidence,
        *_clopper_pearson(good / total * effective, effective, confidence),
        windows=len(windows),
        design_effect=deff,
    )


def min_requests_to_pass(target: float, confidence: float = DEFAULT_CONFIDENCE) -> int:
    """The fewest requests a step needs for its interval to be able to reach ``target``:
    with all n good the low end is ((1 − confidence) / 2) ** (1 / n)."""
    check_confidence(confidence)
    if not 0.0 < target < 1.0:
        raise ValueError(
            f"a window can show an attainment target strictly between 0 and 1 "
            f"(a finite sample never proves 100%), got {target!r}"
        )
    return math.ceil(math.log((1.0 - confidence) / 2.0) / math.log(target) - 1e-12)


def requests_per_step_problem(
    requests: int, target: float, confidence: float = DEFAULT_CONFIDENCE
) -> str | None:
    """One line when ``requests`` per step are too few for any step to pass; else None."""
    needed = min_requests_to_pass(target, confidence)
    if requests >= needed:
        return None
    return (
        f"{requests} requests per step can never show {target:.0%} SLO attainment at "
        f"{confidence:.0%} confidence (even all good gives a lower bound below it); "
        f"use at least {needed} timed requests per step"
    )
