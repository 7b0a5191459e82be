"""The paired bootstrap of accuracy comparisons: candidate minus reference, item by item.

Differences of few distinct values (0/1 scores give -1, 0, +1) are resampled as multinomial
counts of those values, exactly the distribution of index resampling at O(resamples) cost;
others by indices in chunks (``benches/perf/bootstrap_speed.py`` times both against
``scipy.stats.bootstrap``). Intervals: ``percentile``, ``basic`` or ``bca``, on numpy's linear
quantiles as scipy's; Holm's step-down across candidates; the exact sign test where the
bootstrap holds no coverage.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, cast, get_args

import numpy as np
from numpy.typing import ArrayLike

from .holm import holm_step_down
from .intervals import FloatArray, finite_array
from .verdicts import check_confidence

IntervalMethod = Literal["percentile", "basic", "bca"]

#: Differences with at most this many distinct values are resampled exactly as
#: multinomial counts; more distinct values fall back to chunked index resampling.
MAX_EXACT_CATEGORIES = 16
#: Fewest paired items, and fewest of them scored differently by the two sides (discordant),
#: for the paired bootstrap's 95% interval to hold its coverage. Below either, simulated
#: coverage falls to 85-92% (and to 0 with no discordant item: the interval is [0, 0]
#: whatever the truth), so no verdict or gate decision is drawn from it
#: (``python benches/perf/coverage_simulation.py --small-samples``).
MIN_PAIRED_ITEMS = 30
MIN_DISCORDANT = 10
#: Power used for :attr:`PairedInterval.min_detectable_difference`.
DETECTION_POWER = 0.8
#: Largest number of array elements one resampling chunk allocates (16 MiB of int64).
_CHUNK_ELEMENTS = 1 << 21
_MAX_IDS_IN_MESSAGE = 3
_STANDARD_NORMAL = NormalDist()


@dataclass(frozen=True)
class PairedInterval:
    """Bootstrap interval of mean(candidate - reference) over matched items. ``discordant``:
    items either side scored higher on; ``standard_error``: sd(d, ddof=1)/sqrt(n);
    ``min_detectable_difference``: (z_{1-alpha/2} + z_{0.8}) * SE (80% power);
    ``p_value``: 2 * min(share of bootstrap means <= 0, >= 0), within [1/resamples, 1]."""

    difference: float
    low: float
    high: float
    confidence: float
    n: int
    resamples: int
    method: str
    seed: int
    discordant: int
    candidate_ahead: int
    reference_ahead: int
    candidate_mean: float
    reference_mean: float
    standard_error: float
    bootstrap_standard_error: float
    min_detectable_difference: float
    p_value: float

    @property
    def too_few_items(self) -> bool:
        """Whether fewer than :data:`MIN_PAIRED_ITEMS` items were paired or fewer than
        :data:`MIN_DISCORDANT` scored differently: the interval does not hold its stated
        coverage, so it supports no verdict."""
        return self.n < MIN_PAIRED_ITEMS or self.discordant < MIN_DISCORDANT

    def too_few_reason(self) -> str:
        """One line: why this interval supports no verdict (empty when it does)."""
        if not self.too_few_items:
            return ""
        found = (
            f"only {self.n} items paired"
            if self.n < MIN_PAIRED_ITEMS
            else f"only {self.discordant} of {self.n} items scored differently"
        )
        return (
            f"{found} (the interval holds its {self.confidence:.0%} coverage from "
            f"{MIN_PAIRED_ITEMS} items with {MIN_DISCORDANT} scored differently on): score "
            "more items (raise --limit)"
        )

    @property
    def covers_zero(self) -> bool:
        """Whether zero lies inside the closed interval [low, high]."""
        return self.low <= 0.0 <= self.high


@dataclass(frozen=True)
class HolmComparison:
    """One candidate of a Holm step-down: ``rank`` (0-based) in ascending p-value order, and
    its interval at the step-down's confidence level."""

    name: str
    rank: int
    rejected: bool
    interval: PairedInterval


# --------------------------------------------------------------------------- inputs


def _check_resamples(resamples: int) -> int:
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 2:
        raise ValueError(f"resamples must be an integer of at least 2, got {resamples!r}")
    return int(resamples)


def _check_method(method: str) -> IntervalMethod:
    if method not in get_args(IntervalMethod):
        raise ValueError(
            f"unknown interval method {method!r}; use one of: {', '.join(get_args(IntervalMethod))}"
        )
    return cast(IntervalMethod, method)


def id_examples(ids: Iterable[str]) -> str:
    """A few of ``ids`` (sorted, quoted) for a one-line message, ``...`` when there are more."""
    listed = sorted(ids)
    shown = ", ".join(repr(item) for item in listed[:_MAX_IDS_IN_MESSAGE])
    return shown + (", ..." if len(listed) > _MAX_IDS_IN_MESSAGE else "")


def _aligned_scores(
    candidate: Mapping[str, float], reference: Mapping[str, float]
) -> tuple[FloatArray, FloatArray]:
    """Candidate and reference scores as arrays in sorted item-id order."""
    candidate_ids, reference_ids = set(candidate), set(reference)
    if candidate_ids != reference_ids:
        parts = [
            f"{len(ids)} only in {side} ({id_examples(ids)})"
            for side, ids in (
                ("candidate", candidate_ids - reference_ids),
                ("reference", reference_ids - candidate_ids),
            )
            if ids
        ]
        raise ValueError(
            "candidate and reference were scored on different items: " + "; ".join(parts)
        )
    if not candidate_ids:
        raise ValueError("no items to compare: both score sets are empty")
    ids = sorted(candidate_ids)

    def scores_of(side: str, scores: Mapping[str, float]) -> FloatArray:
        array = np.fromiter((float(scores[i]) for i in ids), dtype=np.float64, count=len(ids))
        bad = np.flatnonzero(~np.isfinite(array))
        if bad.size:
            raise ValueError(f"{side} score of item {ids[int(bad[0])]!r} is not a finite number")
        return array

    return scores_of("candidate", candidate), scores_of("reference", reference)


# --------------------------------------------------------------------------- resampling


def _chunked_means(resamples: int, width: int, draw: Callable[[int], FloatArray]) -> FloatArray:
    """``resamples`` bootstrap means, ``draw(rows)`` making each chunk of rows of at most
    :data:`_CHUNK_ELEMENTS` elements of ``width``: memory stays bounded."""
    means = np.empty(resamples, dtype=np.float64)
    rows = max(1, _CHUNK_ELEMENTS // width)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        means[start:stop] = draw(stop - start)
    return means


def bootstrap_mean_distribution(
    values: ArrayLike, *, resamples: int = 10_000, seed: int = 0, exact: bool | None = None
) -> FloatArray:
    """Bootstrap distribution of the mean of ``values`` (``resamples`` draws, seeded).

    ``exact=None``: multinomial counts up to :data:`MAX_EXACT_CATEGORIES` distinct values,
    else chunked index resampling (the same distribution); ``True``/``False`` force one.
    """
    array = finite_array(values, "values")
    resamples = _check_resamples(resamples)
    rng = np.random.default_rng(seed)
    n = array.size
    distinct, counts = np.unique(array, return_counts=True)
    if not (distinct.size <= MAX_EXACT_CATEGORIES if exact is None else exact):
        return _chunked_means(
            resamples, n, lambda rows: np.mean(array[rng.integers(0, n, size=(rows, n))], axis=1)
        )
    if distinct.size == 1:
        return np.full(resamples, distinct[0], dtype=np.float64)
    shares = counts / n
    return _chunked_means(
        resamples,
        distinct.size,
        lambda rows: (rng.multinomial(n, shares, size=rows) @ distinct) / n,
    )


# --------------------------------------------------------------------------- paired bootstrap


_PairedSample = tuple[FloatArray, FloatArray, FloatArray]
"""Candidate and reference scores by item, and the bootstrap means of their differences:
everything about one comparison that does not depend on the confidence level."""


def _paired_sample(
    candidate: Mapping[str, float], reference: Mapping[str, float], resamples: int, seed: int
) -> _PairedSample:
    candidate_scores, reference_scores = _aligned_scores(candidate, reference)
    means = bootstrap_mean_distribution(
        candidate_scores - reference_scores, resamples=resamples, seed=seed
    )
    return candidate_scores, reference_scores, means


def _bca_levels(
    differences: FloatArray, difference: float, means: FloatArray, alpha: float
) -> tuple[float, float]:
    """BCa quantile levels for the mean (Efron & Tibshirani 14.3), as scipy computes them: z0
    from the mid-rank fraction, clipped to [1/(2B), 1 - 1/(2B)]; a closed-form acceleration."""
    resamples = means.size
    below = np.count_nonzero(means < difference) + np.count_nonzero(means <= difference)
    fraction = min(max(below / (2.0 * resamples), 0.5 / resamples), 1.0 - 0.5 / resamples)
    z0 = _STANDARD_NORMAL.inv_cdf(fraction)
    centred = differences - difference
    second = float(np.sum(centred**2))
    acceleration = float(np.sum(centred**3)) / (6.0 * second**1.5) if second > 0.0 else 0.0

    def level(z_alpha: float) -> float:
        shifted = z0 + z_alpha
        return _STANDARD_NORMAL.cdf(z0 + shifted / (1.0 - acceleration * shifted))

    return level(_STANDARD_NORMAL.inv_cdf(alpha / 2)), level(
        _STANDARD_NORMAL.inv_cdf(1 - alpha / 2)
    )


def _interval(sample: _PairedSample, confidence: float, method: str, seed: int) -> PairedInterval:
    candidate_scores, reference_scores, means = sample
    differences = candidate_scores - reference_scores
    n, resamples = differences.size, means.size
    difference = float(differences.sum()) / n
    standard_error = float(np.std(differences, ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    alpha = 1.0 - confidence
    levels = (
        _bca_levels(differences, difference, means, alpha)
        if method == "bca"
        else (alpha / 2, 1.0 - alpha / 2)
    )
    low, high = (float(q) for q in np.quantile(means, levels))
    if method == "basic":
        low, high = 2.0 * difference - high, 2.0 * difference - low
    z_sum = _STANDARD_NORMAL.inv_cdf(1.0 - alpha / 2) + _STANDARD_NORMAL.inv_cdf(DETECTION_POWER)
    ahead = int(np.count_nonzero(differences > 0)), int(np.count_nonzero(differences < 0))
    at_or_below = float(np.count_nonzero(means <= 0.0)) / resamples
    at_or_above = float(np.count_nonzero(means >= 0.0)) / resamples
    return PairedInterval(
        difference=difference,
        low=low,
        high=high,
        confidence=confidence,
        n=n,
        resamples=resamples,
        method=method,
        seed=seed,
        discordant=sum(ahead),
        candidate_ahead=ahead[0],
        reference_ahead=ahead[1],
        candidate_mean=float(candidate_scores.mean()),
        reference_mean=float(reference_scores.mean()),
        standard_error=standard_error,
        bootstrap_standard_error=float(np.std(means, ddof=1)),
        min_detectable_difference=z_sum * standard_error,
        p_value=min(1.0, max(1.0 / resamples, 2.0 * min(at_or_below, at_or_above))),
    )


def paired_bootstrap(
    candidate: Mapping[str, float],
    reference: Mapping[str, float],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    method: IntervalMethod = "percentile",
) -> PairedInterval:
    """Seeded bootstrap interval of the mean per-item difference, candidate minus reference;
    items are matched by id (differing id sets: ``ValueError`` naming a few)."""
    return _interval(
        _paired_sample(candidate, reference, _check_resamples(resamples), seed),
        check_confidence(confidence),
        _check_method(method),
        seed,
    )


def sign_test_p_value(ahead: int, behind: int) -> float:
    """Two-sided exact sign test (McNemar's exact test for 0/1 scores): the chance, if either
    side were as likely to be ahead on each differing item, of a split at least as uneven as
    ``ahead`` : ``behind``. Exact at any count, so its false-alarm rate is at most its level
    where the bootstrap's interval holds no coverage (:data:`MIN_DISCORDANT`)."""
    if ahead < 0 or behind < 0:
        raise ValueError(f"counts must be >= 0, got {ahead} and {behind}")
    from scipy.special import bdtr  # the binomial CDF, without loading all of scipy.stats

    return min(1.0, 2.0 * float(bdtr(min(ahead, behind), ahead + behind, 0.5)))


# --------------------------------------------------------------------------- Holm


def holm_intervals(
    comparisons: Mapping[str, tuple[Mapping[str, float], Mapping[str, float]]],
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    method: IntervalMethod = "percentile",
) -> dict[str, HolmComparison]:
    """Holm step-down over m candidates, each given as ``name: (candidate, reference)``.

    Candidates are ranked by bootstrap p-value (ties in input order). While no step has
    failed, the k-th (0-based) gets its interval at confidence 1 - alpha/(m - k) and is
    rejected when that interval excludes 0; from the first that covers 0 on, every candidate
    keeps that step's confidence and is not rejected.
    """
    alpha = 1.0 - check_confidence(confidence)
    resamples = _check_resamples(resamples)
    method = _check_method(method)
    samples = {
        name: _paired_sample(candidate, reference, resamples, seed)
        for name, (candidate, reference) in comparisons.items()
    }

    def test(name: str, level: float) -> tuple[bool, PairedInterval]:
        interval = _interval(samples[name], 1.0 - level, method, seed)
        return not interval.covers_zero, interval

    p_values = {
        name: _interval(sample, 1.0 - alpha, method, seed).p_value
        for name, sample in samples.items()
    }
    return {
        name: HolmComparison(name, step.rank, step.rejected, step.result)
        for name, step in holm_step_down(p_values, alpha, test).items()
    }
