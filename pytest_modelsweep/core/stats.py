"""Paired statistics for comparing a candidate model with a reference model.

Pure numpy and the standard library: no pytest, no scipy.

* :func:`paired_bootstrap` -- interval of the mean per-item difference
  (candidate minus reference, items matched by id).  When the differences take
  few distinct values (0/1 scores give only -1, 0, +1) a resample is drawn as
  multinomial counts of those values, which is exactly the distribution of index
  resampling at O(resamples) cost; otherwise indices are resampled in chunks so
  memory stays bounded.
* Interval methods: ``"percentile"`` (default), ``"basic"`` (reverse percentile)
  and ``"bca"`` (bias-corrected and accelerated; the jackknife of a mean is
  closed-form, so it costs O(n) more).  All three use numpy's linear quantiles,
  as ``scipy.stats.bootstrap`` does.
* :func:`decide_verdict` -- better / worse / matches / equivalent / inconclusive.
* :func:`holm_adjust`, :func:`holm_intervals` -- Holm-Bonferroni across candidates.
* :func:`ratio_interval` -- Welch t interval of a throughput ratio on log scale
  (ratio of geometric means over repeats); :func:`ratio_interval_between_runs`
  widens it by run-to-run variance against a baseline of several runs.
* :func:`log_mean_interval` -- one setting's throughput interval over its repeats:
  the t interval of the mean of log tokens/s, exponentiated (with ``first_stage``,
  Stein's two-stage interval that ``--repeats auto`` makes: see ``core.repeats``).
* :func:`t_half_width` -- the one Student t half-width every interval here and the
  ``--repeats auto`` rule use; :func:`student_t_cdf`, :func:`student_t_quantile` --
  Student's t for real df.
* :func:`wilson_interval` -- one model's accuracy: the Wilson score interval of a proportion.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from statistics import NormalDist
from typing import Any, Literal, Protocol, cast, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "MAX_EXACT_CATEGORIES",
    "MIN_DISCORDANT",
    "MIN_PAIRED_ITEMS",
    "RULE_COVERS_ZERO",
    "RULE_EQUIVALENCE_MARGIN",
    "HolmComparison",
    "IntervalMethod",
    "PairedInterval",
    "RatioBounds",
    "RatioInterval",
    "Verdict",
    "VerdictRecord",
    "bootstrap_mean_distribution",
    "decide_verdict",
    "holm_adjust",
    "holm_intervals",
    "log_mean_interval",
    "normal_p_value",
    "paired_bootstrap",
    "paired_p_value",
    "ratio_interval",
    "ratio_interval_between_runs",
    "student_t_cdf",
    "student_t_quantile",
    "sign_test_p_value",
    "t_half_width",
    "wilson_interval",
]

FloatArray = NDArray[np.float64]
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

RULE_COVERS_ZERO = "covers-zero"
RULE_EQUIVALENCE_MARGIN = "equivalence-margin"
RULE_RATIO_COVERS_ONE = "ratio-covers-one"

_STANDARD_NORMAL = NormalDist()


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class PairedInterval:
    """Bootstrap interval of mean(candidate - reference) over matched items.

    ``candidate_ahead`` / ``reference_ahead`` count items where that side scored
    higher (for 0/1 scores: right where the other was wrong); ``discordant`` is
    their sum.  ``standard_error`` is the closed-form paired SE, sd(d, ddof=1)/sqrt(n)
    (NaN when n == 1); ``bootstrap_standard_error`` is the SD of the bootstrap
    distribution.  ``min_detectable_difference`` is (z_{1-alpha/2} + z_{0.8}) * SE:
    the true difference this n detects with 80% power at two-sided alpha = 1 - confidence.
    ``p_value`` is the two-sided bootstrap p-value of :func:`paired_p_value`.
    """

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
        found = (f"only {self.n} items paired" if self.n < MIN_PAIRED_ITEMS
                 else f"only {self.discordant} of {self.n} items scored differently")
        return (f"{found} (the interval holds its {self.confidence:.0%} coverage from "
                f"{MIN_PAIRED_ITEMS} items with {MIN_DISCORDANT} scored differently on): score "
                "more items (raise --limit)")

    @property
    def covers_zero(self) -> bool:
        """Whether zero lies inside the closed interval [low, high]."""
        return self.low <= 0.0 <= self.high

    @property
    def width(self) -> float:
        """high - low."""
        return self.high - self.low

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy of the fields."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairedInterval:
        """Inverse of :meth:`as_dict`; extra keys are ignored."""
        return cls(**{f.name: data[f.name] for f in fields(cls)})


class Verdict(StrEnum):
    """Outcome of comparing a candidate with the reference on one metric."""

    BETTER = "better"
    WORSE = "worse"
    MATCHES = "matches"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class VerdictRecord:
    """A verdict with the interval it came from; :meth:`as_dict` flattens the interval."""

    candidate: str
    reference: str
    metric: str
    verdict: Verdict
    interval: PairedInterval
    margin: float | None
    rule: str

    @classmethod
    def decide(
        cls,
        candidate: str,
        reference: str,
        metric: str,
        interval: PairedInterval,
        margin: float | None = None,
        rule: str | None = None,
    ) -> VerdictRecord:
        """Apply :func:`decide_verdict`; ``rule`` defaults to the rule the margin selects."""
        if rule is None:
            rule = RULE_COVERS_ZERO if margin is None else RULE_EQUIVALENCE_MARGIN
        return cls(
            candidate=candidate,
            reference=reference,
            metric=metric,
            verdict=decide_verdict(interval, margin),
            interval=interval,
            margin=margin,
            rule=rule,
        )

    def as_dict(self) -> dict[str, Any]:
        """Flat JSON-friendly dict: names, verdict, every interval field, margin, rule."""
        return _flat_verdict(self, self.interval.as_dict(), margin=self.margin)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VerdictRecord:
        """Inverse of :meth:`as_dict`."""
        return cls(
            candidate=data["candidate"],
            reference=data["reference"],
            metric=data["metric"],
            verdict=Verdict(data["verdict"]),
            interval=PairedInterval.from_dict(data),
            margin=data["margin"],
            rule=data["rule"],
        )


@dataclass(frozen=True)
class HolmComparison:
    """One candidate's result within a Holm step-down over several candidates.

    ``rank`` is the 0-based position in ascending p-value order; ``interval`` is
    recomputed at the step-down confidence level (``interval.confidence``).
    """

    name: str
    rank: int
    adjusted_p_value: float
    rejected: bool
    interval: PairedInterval

    @property
    def p_value(self) -> float:
        """The unadjusted bootstrap p-value."""
        return self.interval.p_value

    def as_dict(self) -> dict[str, Any]:
        """Flat JSON-friendly dict: Holm fields then every interval field."""
        return {
            "name": self.name,
            "rank": self.rank,
            "adjusted_p_value": self.adjusted_p_value,
            "rejected": self.rejected,
            **self.interval.as_dict(),
        }


@dataclass(frozen=True)
class RatioInterval:
    """Interval of candidate ÷ reference throughput over repeats (unpaired).

    ``ratio`` is the ratio of geometric means, exp(mean log candidate - mean log
    reference); ``low``/``high`` come from a Welch t interval on log throughput
    (``method`` ``"welch-log-t"``; ``df`` the Welch-Satterthwaite degrees of
    freedom), or, against a baseline of several runs, from the random-effects
    interval of :func:`ratio_interval_between_runs` (``"between-runs-log-t"``).
    ``log_standard_error`` is the standard error of log(ratio).
    ``candidate_mean``/``reference_mean`` are the arithmetic means of the repeats
    (the figures a reader sees as mean tokens/s).

    ``degenerate`` is True when a side has a single repeat: its spread is unknown,
    so no interval is claimed and ``low``, ``high``, ``df`` and
    ``log_standard_error`` are NaN (every comparison with NaN is False, so no rule
    can conclude from it).
    """

    ratio: float
    low: float
    high: float
    confidence: float
    candidate_mean: float
    reference_mean: float
    candidate_n: int
    reference_n: int
    degenerate: bool
    method: str = "welch-log-t"
    df: float = math.nan
    log_standard_error: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy of the fields; a bound that is not a number (no interval) is None,
        so that strict JSON readers can read the results."""
        return {key: (None if isinstance(value, float) and math.isnan(value) else value)
                for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RatioInterval:
        """Inverse of :meth:`as_dict` (None back to NaN); extra keys are ignored."""
        def number(name: str) -> float:
            value = data[name]
            return math.nan if value is None else float(value)

        return cls(
            ratio=float(data["ratio"]), low=number("low"), high=number("high"),
            confidence=float(data["confidence"]), candidate_mean=float(data["candidate_mean"]),
            reference_mean=float(data["reference_mean"]), candidate_n=int(data["candidate_n"]),
            reference_n=int(data["reference_n"]), degenerate=bool(data["degenerate"]),
            method=str(data.get("method", "welch-log-t")),
            df=number("df") if "df" in data else math.nan,
            log_standard_error=(number("log_standard_error") if "log_standard_error" in data
                                else math.nan),
        )

    def at_confidence(self, confidence: float) -> RatioInterval:
        """The same estimate with its interval at another confidence level."""
        confidence = _check_confidence(confidence)
        if self.degenerate:
            return replace(self, confidence=confidence)
        half = t_half_width(self.log_standard_error, self.df, confidence)
        centre = math.log(self.ratio)
        return replace(self, confidence=confidence, low=math.exp(centre - half),
                       high=math.exp(centre + half))


@dataclass(frozen=True)
class RatioVerdictRecord:
    """A throughput verdict with the ratio interval it came from; :meth:`as_dict` flattens it."""

    candidate: str
    reference: str
    metric: str
    verdict: Verdict
    interval: RatioInterval
    tolerance: float = 0.0
    rule: str = RULE_RATIO_COVERS_ONE

    def as_dict(self) -> dict[str, Any]:
        """Flat JSON-friendly dict: names, verdict, every interval field, tolerance, rule."""
        return _flat_verdict(self, self.interval.as_dict(), tolerance=self.tolerance)


def _flat_verdict(record: VerdictRecord | RatioVerdictRecord, interval: dict[str, Any],
                  **setting: Any) -> dict[str, Any]:
    """A verdict record as one flat dict: names, verdict, the interval's fields, its setting,
    the rule (the shape results files and reports read)."""
    return {"candidate": record.candidate, "reference": record.reference, "metric": record.metric,
            "verdict": record.verdict.value, **interval, **setting, "rule": record.rule}


# --------------------------------------------------------------------------- validation


def _check_confidence(confidence: float) -> float:
    if not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    return float(confidence)


def _check_resamples(resamples: int) -> int:
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 2:
        raise ValueError(f"resamples must be an integer of at least 2, got {resamples!r}")
    return int(resamples)


def _check_method(method: str) -> IntervalMethod:
    if method not in get_args(IntervalMethod):
        known = ", ".join(get_args(IntervalMethod))
        raise ValueError(f"unknown interval method {method!r}; use one of: {known}")
    return cast(IntervalMethod, method)


def _as_finite_array(values: ArrayLike, what: str) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{what} is empty")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} contains a value that is not a finite number")
    return array


def _id_examples(ids: set[str]) -> str:
    shown = ", ".join(repr(item) for item in sorted(ids)[:_MAX_IDS_IN_MESSAGE])
    return shown + (", ..." if len(ids) > _MAX_IDS_IN_MESSAGE else "")


def _aligned_scores(candidate: Mapping[str, float], reference: Mapping[str, float]) -> tuple[FloatArray, FloatArray]:
    """Candidate and reference scores as arrays in sorted item-id order."""
    candidate_ids, reference_ids = set(candidate), set(reference)
    if candidate_ids != reference_ids:
        parts = []
        only_candidate = candidate_ids - reference_ids
        only_reference = reference_ids - candidate_ids
        if only_candidate:
            parts.append(f"{len(only_candidate)} only in candidate ({_id_examples(only_candidate)})")
        if only_reference:
            parts.append(f"{len(only_reference)} only in reference ({_id_examples(only_reference)})")
        raise ValueError("candidate and reference were scored on different items: " + "; ".join(parts))
    if not candidate_ids:
        raise ValueError("no items to compare: both score sets are empty")
    ids = sorted(candidate_ids)
    candidate_scores = np.fromiter((float(candidate[i]) for i in ids), dtype=np.float64, count=len(ids))
    reference_scores = np.fromiter((float(reference[i]) for i in ids), dtype=np.float64, count=len(ids))
    for name, scores in (("candidate", candidate_scores), ("reference", reference_scores)):
        bad = np.flatnonzero(~np.isfinite(scores))
        if bad.size:
            raise ValueError(f"{name} score of item {ids[int(bad[0])]!r} is not a finite number")
    return candidate_scores, reference_scores


# --------------------------------------------------------------------------- resampling


def _multinomial_means(
    distinct: FloatArray, counts: NDArray[np.int64], resamples: int, rng: np.random.Generator
) -> FloatArray:
    """Bootstrap means when the data take only the values ``distinct`` (with ``counts``)."""
    n = int(counts.sum())
    if distinct.size == 1:
        return np.full(resamples, distinct[0], dtype=np.float64)
    probabilities = counts / n
    means = np.empty(resamples, dtype=np.float64)
    rows = max(1, _CHUNK_ELEMENTS // distinct.size)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        drawn = rng.multinomial(n, probabilities, size=stop - start)
        means[start:stop] = (drawn @ distinct) / n
    return means


def _index_resampled_means(values: FloatArray, resamples: int, rng: np.random.Generator) -> FloatArray:
    """Bootstrap means by resampling indices, a bounded chunk of resamples at a time."""
    n = values.size
    means = np.empty(resamples, dtype=np.float64)
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        indices = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[indices].mean(axis=1)
    return means


def _resampled_means(values: FloatArray, resamples: int, rng: np.random.Generator, exact: bool | None) -> FloatArray:
    distinct, counts = np.unique(values, return_counts=True)
    if exact is None:
        exact = distinct.size <= MAX_EXACT_CATEGORIES
    if exact:
        return _multinomial_means(distinct, counts.astype(np.int64), resamples, rng)
    return _index_resampled_means(values, resamples, rng)


def bootstrap_mean_distribution(
    values: ArrayLike, *, resamples: int = 10_000, seed: int = 0, exact: bool | None = None
) -> FloatArray:
    """Bootstrap distribution of the mean of ``values`` (``resamples`` draws, seeded).

    ``exact=None`` picks multinomial counts when there are at most
    :data:`MAX_EXACT_CATEGORIES` distinct values and chunked index resampling
    otherwise; ``True`` / ``False`` force one.  Both draw from the same distribution.
    """
    array = _as_finite_array(values, "values")
    return _resampled_means(array, _check_resamples(resamples), np.random.default_rng(seed), exact)


# --------------------------------------------------------------------------- paired bootstrap


@dataclass(frozen=True)
class _PairedSample:
    """Everything about one paired comparison that does not depend on the confidence level."""

    differences: FloatArray
    means: FloatArray
    difference: float
    candidate_mean: float
    reference_mean: float
    candidate_ahead: int
    reference_ahead: int
    standard_error: float
    bootstrap_standard_error: float
    p_value: float
    seed: int


def _paired_sample(
    candidate: Mapping[str, float], reference: Mapping[str, float], resamples: int, seed: int
) -> _PairedSample:
    candidate_scores, reference_scores = _aligned_scores(candidate, reference)
    differences = candidate_scores - reference_scores
    n = differences.size
    means = _resampled_means(differences, resamples, np.random.default_rng(seed), exact=None)
    standard_error = float(np.std(differences, ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    fraction_at_or_below = float(np.count_nonzero(means <= 0.0)) / resamples
    fraction_at_or_above = float(np.count_nonzero(means >= 0.0)) / resamples
    p_value = min(1.0, max(1.0 / resamples, 2.0 * min(fraction_at_or_below, fraction_at_or_above)))
    return _PairedSample(
        differences=differences,
        means=means,
        difference=float(differences.sum()) / n,
        candidate_mean=float(candidate_scores.mean()),
        reference_mean=float(reference_scores.mean()),
        candidate_ahead=int(np.count_nonzero(differences > 0)),
        reference_ahead=int(np.count_nonzero(differences < 0)),
        standard_error=standard_error,
        bootstrap_standard_error=float(np.std(means, ddof=1)),
        p_value=p_value,
        seed=seed,
    )


def _bca_levels(sample: _PairedSample, alpha: float) -> tuple[float, float]:
    """BCa quantile levels for the mean (Efron & Tibshirani 14.3), as scipy computes them.

    z0 uses the mid-rank fraction of bootstrap means below the estimate, clipped to
    [1/(2B), 1 - 1/(2B)] so it stays finite; the jackknife acceleration of a mean is
    sum(u^3) / (6 * sum(u^2)^1.5) with u = d - mean(d) (0 when all d are equal).
    """
    means = sample.means
    resamples = means.size
    below = np.count_nonzero(means < sample.difference) + np.count_nonzero(means <= sample.difference)
    fraction = min(max(below / (2.0 * resamples), 0.5 / resamples), 1.0 - 0.5 / resamples)
    z0 = _STANDARD_NORMAL.inv_cdf(fraction)
    centred = sample.differences - sample.difference
    second = float(np.sum(centred**2))
    acceleration = float(np.sum(centred**3)) / (6.0 * second**1.5) if second > 0.0 else 0.0
    levels = []
    for z_alpha in (_STANDARD_NORMAL.inv_cdf(alpha / 2), _STANDARD_NORMAL.inv_cdf(1 - alpha / 2)):
        shifted = z0 + z_alpha
        levels.append(_STANDARD_NORMAL.cdf(z0 + shifted / (1.0 - acceleration * shifted)))
    return levels[0], levels[1]


def _interval(sample: _PairedSample, confidence: float, method: str) -> PairedInterval:
    alpha = 1.0 - confidence
    if method == "bca":
        level_low, level_high = _bca_levels(sample, alpha)
    else:
        level_low, level_high = alpha / 2, 1.0 - alpha / 2
    quantile_low, quantile_high = (float(q) for q in np.quantile(sample.means, [level_low, level_high]))
    if method == "basic":
        low, high = 2.0 * sample.difference - quantile_high, 2.0 * sample.difference - quantile_low
    else:
        low, high = quantile_low, quantile_high
    z_sum = _STANDARD_NORMAL.inv_cdf(1.0 - alpha / 2) + _STANDARD_NORMAL.inv_cdf(DETECTION_POWER)
    return PairedInterval(
        difference=sample.difference,
        low=low,
        high=high,
        confidence=confidence,
        n=sample.differences.size,
        resamples=sample.means.size,
        method=method,
        seed=sample.seed,
        discordant=sample.candidate_ahead + sample.reference_ahead,
        candidate_ahead=sample.candidate_ahead,
        reference_ahead=sample.reference_ahead,
        candidate_mean=sample.candidate_mean,
        reference_mean=sample.reference_mean,
        standard_error=sample.standard_error,
        bootstrap_standard_error=sample.bootstrap_standard_error,
        min_detectable_difference=z_sum * sample.standard_error,
        p_value=sample.p_value,
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
    """Bootstrap interval of the mean per-item difference, candidate minus reference.

    Items are matched by id; differing id sets raise ``ValueError`` naming a few
    of the ids.  Seeded: the same inputs and seed give the same interval.
    """
    return _interval(
        _paired_sample(candidate, reference, _check_resamples(resamples), seed),
        _check_confidence(confidence),
        _check_method(method),
    )


def sign_test_p_value(ahead: int, behind: int) -> float:
    """Two-sided exact sign test (McNemar's exact test for 0/1 scores): the chance, if either
    side were as likely to be ahead on each differing item, of a split at least as uneven as
    ``ahead`` : ``behind``. Exact at any count, so its false-alarm rate is at most its level
    where the bootstrap's interval holds no coverage (:data:`MIN_DISCORDANT`)."""
    if ahead < 0 or behind < 0:
        raise ValueError(f"counts must be >= 0, got {ahead} and {behind}")
    total = ahead + behind
    if total == 0:
        return 1.0
    tail = sum(math.comb(total, i) for i in range(min(ahead, behind) + 1))
    return min(1.0, 2.0 * tail / 2.0 ** total)


def paired_p_value(
    candidate: Mapping[str, float],
    reference: Mapping[str, float],
    *,
    resamples: int = 10_000,
    seed: int = 0,
) -> float:
    """Two-sided bootstrap p-value for "no mean difference".

    2 * min(fraction of bootstrap means <= 0, fraction >= 0), clipped to
    [1/resamples, 1].  It uses the same draws as :func:`paired_bootstrap` with the
    same seed, so p < 1 - confidence goes with a percentile interval that excludes
    zero (up to one resample at the boundary).
    """
    return _paired_sample(candidate, reference, _check_resamples(resamples), seed).p_value


def normal_p_value(interval: PairedInterval) -> float:
    """Two-sided normal-approximation p-value, 2 * Phi(-|difference| / standard_error)."""
    if math.isnan(interval.standard_error):
        return math.nan
    if interval.standard_error == 0.0:
        return 1.0 if interval.difference == 0.0 else 0.0
    return 2.0 * _STANDARD_NORMAL.cdf(-abs(interval.difference) / interval.standard_error)


# --------------------------------------------------------------------------- verdicts


def decide_verdict(interval: PairedInterval, margin: float | None = None) -> Verdict:
    """Verdict from the interval of candidate minus reference.

    Fewer than :data:`MIN_PAIRED_ITEMS` items, or fewer than :data:`MIN_DISCORDANT` scored
    differently: inconclusive (the interval does not hold its coverage).  Entirely above 0: better; entirely below 0: worse.  Covering 0: ``matches``
    when ``margin`` is None (the seed's rule); with a margin, ``equivalent`` when
    the whole interval lies within [-margin, +margin], else ``inconclusive``.
    (Equivalence is judged on the interval as given; a TOST at level alpha would
    use the 1 - 2*alpha interval, so this is the stricter reading.)
    """
    if margin is not None and not (math.isfinite(margin) and margin >= 0.0):
        raise ValueError(f"equivalence margin must be a finite number >= 0, got {margin!r}")
    if interval.too_few_items:
        return Verdict.INCONCLUSIVE
    if interval.low > 0.0:
        return Verdict.BETTER
    if interval.high < 0.0:
        return Verdict.WORSE
    if margin is None:
        return Verdict.MATCHES
    if -margin <= interval.low and interval.high <= margin:
        return Verdict.EQUIVALENT
    return Verdict.INCONCLUSIVE


class RatioBounds(Protocol):
    """An interval of candidate ÷ reference (throughput, capacity, capacity in req/s);
    ``degenerate``: it has no spread to judge by."""

    @property
    def low(self) -> float: ...

    @property
    def high(self) -> float: ...

    @property
    def degenerate(self) -> bool: ...


def decide_ratio_verdict(interval: RatioBounds, tolerance: float = 0.0) -> Verdict:
    """Verdict from an interval of candidate ÷ reference (every ratio comparison's rule).

    Wholly below ``1 - tolerance``: worse (significantly slower than the tolerance
    allows); wholly above ``1 + tolerance``: better; covering 1: matches; else
    (significantly different from 1 but not beyond the tolerance) equivalent when the
    whole interval lies within ``[1 - tolerance, 1 + tolerance]``, inconclusive when
    it straddles a bound. With ``tolerance`` 0: below 1 worse, above 1 better. A
    degenerate interval (a side with one repeat, so no spread is known) is
    inconclusive whatever the ratio.
    """
    if not (math.isfinite(tolerance) and 0.0 <= tolerance < 1.0):
        raise ValueError(f"ratio tolerance must be in [0, 1), got {tolerance!r}")
    if interval.degenerate:
        return Verdict.INCONCLUSIVE
    if interval.high < 1.0 - tolerance:
        return Verdict.WORSE
    if interval.low > 1.0 + tolerance:
        return Verdict.BETTER
    if interval.low <= 1.0 <= interval.high:
        return Verdict.MATCHES
    if 1.0 - tolerance <= interval.low and interval.high <= 1.0 + tolerance:
        return Verdict.EQUIVALENT
    return Verdict.INCONCLUSIVE


# --------------------------------------------------------------------------- Holm


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values, in the input order.

    The k-th smallest (0-based) of m becomes max over j <= k of (m - j) * p_(j),
    capped at 1; ties keep their input order.
    """
    values = [float(p) for p in p_values]
    for p in values:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must lie in [0, 1], got {p!r}")
    m = len(values)
    adjusted = [0.0] * m
    running_max = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: values[i])):
        running_max = max(running_max, min(1.0, (m - rank) * values[index]))
        adjusted[index] = running_max
    return adjusted


def holm_intervals(
    comparisons: Mapping[str, tuple[Mapping[str, float], Mapping[str, float]]],
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    method: IntervalMethod = "percentile",
) -> dict[str, HolmComparison]:
    """Holm step-down over m candidates, each given as ``name: (candidate, reference)``.

    Candidates are ranked by bootstrap p-value (ties in input order).  While no
    step has failed, the k-th (0-based) gets its interval at confidence
    1 - alpha/(m - k) and is rejected (a real difference) when that interval
    excludes 0.  At the first interval that covers 0 the procedure stops: that
    candidate and all later ones keep that step's confidence and are not rejected.
    Testing by the interval keeps ``rejected`` and the interval's verdict in step;
    ``adjusted_p_value`` (:func:`holm_adjust`) is reported beside it.  Each interval
    equals :func:`paired_bootstrap` at its confidence with the same seed.
    """
    alpha = 1.0 - _check_confidence(confidence)
    resamples = _check_resamples(resamples)
    method = _check_method(method)
    names = list(comparisons)
    samples = {
        name: _paired_sample(candidate, reference, resamples, seed)
        for name, (candidate, reference) in comparisons.items()
    }
    adjusted = dict(zip(names, holm_adjust([samples[name].p_value for name in names]), strict=True))
    order = sorted(names, key=lambda name: samples[name].p_value)
    m = len(names)
    results: dict[str, HolmComparison] = {}
    stepping = True
    level = confidence
    for rank, name in enumerate(order):
        if stepping:
            level = 1.0 - alpha / (m - rank)
        interval = _interval(samples[name], level, method)
        rejected = stepping and not interval.covers_zero
        stepping = rejected
        results[name] = HolmComparison(
            name=name, rank=rank, adjusted_p_value=adjusted[name], rejected=rejected, interval=interval
        )
    return {name: results[name] for name in names}


# --------------------------------------------------------------------------- Student t


def _continued_fraction_beta(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 400):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return result


def _regularized_beta(a: float, b: float, x: float, complement: float) -> float:
    """I_x(a, b) for a, b > 0 and 0 <= x <= 1; ``complement`` is 1 - x computed without
    cancellation."""
    if x <= 0.0:
        return 0.0
    if complement <= 0.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log(complement))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction_beta(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction_beta(b, a, complement) / b


def _check_df(df: float) -> float:
    if not (math.isfinite(df) and df > 0.0):
        raise ValueError(f"degrees of freedom must be a finite number > 0, got {df!r}")
    return float(df)


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (any real > 0) degrees of freedom."""
    df = _check_df(df)
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * _regularized_beta(df / 2.0, 0.5, df / (df + t * t), t * t / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def _student_t_pdf(t: float, df: float) -> float:
    log_density = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                   - (df + 1) / 2 * math.log1p(t * t / df))
    return math.exp(log_density)


def student_t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (Newton's method from the normal quantile, bisection-guarded)."""
    df = _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be strictly between 0 and 1, got {p!r}")
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        low, high = high, 2.0 * high
    t = min(max(_STANDARD_NORMAL.inv_cdf(p), low), high)
    for _ in range(100):
        error = student_t_cdf(t, df) - p
        if error == 0.0:
            break
        if error > 0:
            high = t
        else:
            low = t
        step = error / _student_t_pdf(t, df)
        if abs(step) < 1e-13 * t:
            t -= step
            break
        candidate = t - step
        t = candidate if low < candidate < high else (low + high) / 2.0
        if high - low < 1e-13 * t:
            break
    return t


# --------------------------------------------------------------------------- ratio


def _positive_logs(values: Sequence[float], what: str) -> FloatArray:
    array = _as_finite_array(values, what)
    if np.any(array <= 0.0):
        raise ValueError(f"{what} must all be > 0 tokens/s for a ratio on the log scale")
    return np.log(array)


def _ratio_from_log(
    log_ratio: float, variance: float, df: float, confidence: float, *,
    candidate: FloatArray, reference: FloatArray, method: str,
) -> RatioInterval:
    degenerate = not (math.isfinite(variance) and math.isfinite(df) and df > 0)
    standard_error = math.sqrt(variance) if not degenerate else math.nan
    ratio = math.exp(log_ratio)
    low = high = math.nan
    if not degenerate:
        half = t_half_width(standard_error, df, confidence)
        low, high = math.exp(log_ratio - half), math.exp(log_ratio + half)
    return RatioInterval(
        ratio=ratio, low=low, high=high, confidence=confidence,
        candidate_mean=float(candidate.mean()), reference_mean=float(reference.mean()),
        candidate_n=int(candidate.size), reference_n=int(reference.size),
        degenerate=degenerate, method=method,
        df=df if not degenerate else math.nan, log_standard_error=standard_error,
    )


def t_half_width(standard_error: float, df: float, confidence: float = 0.95) -> float:
    """Half-width of a two-sided Student t interval: t(df, (1 + confidence) / 2) × its
    standard error."""
    return student_t_quantile(0.5 + _check_confidence(confidence) / 2, df) * standard_error


def log_mean_interval(
    values: Sequence[float], *, first_stage: int | None = None, confidence: float = 0.95
) -> tuple[float, float] | None:
    """The interval of one setting's throughput over its repeats, as (low, high) tokens/s.

    The same treatment as the ratios: throughput noise is multiplicative, so the
    interval is a Student t interval of the mean of log values, exponentiated (an
    interval of the geometric mean): exp(mean log x ± t · s / √n). Without
    ``first_stage`` s is the sd of all n logs, with n − 1 df; with it (Stein's
    two-stage rule, where the first ``first_stage`` repeats chose n) s is the sd of
    those first repeats, with ``first_stage`` − 1 df, which is exact whatever n they
    chose. None with fewer than two values (or first-stage values) or any value that
    is not positive (no interval is claimed); ValueError for infinite ones.
    """
    confidence = _check_confidence(confidence)
    spread = len(values) if first_stage is None else min(first_stage, len(values))
    if spread < 2 or not all(value > 0 for value in values):
        return None
    logs = np.log(_as_finite_array(values, "repeats"))
    sd = float(np.std(logs[:spread], ddof=1))
    half = t_half_width(sd / math.sqrt(logs.size), float(spread - 1), confidence)
    centre = float(logs.mean())
    return math.exp(centre - half), math.exp(centre + half)


def ratio_interval(
    candidate: Sequence[float], reference: Sequence[float], *, confidence: float = 0.95
) -> RatioInterval:
    """Welch t interval of candidate ÷ reference throughput on the log scale.

    Throughput repeats are positive and their noise is multiplicative, so the
    comparison is made on log tokens/s: the estimate is the difference of the mean
    logs (a ratio of geometric means), its variance s_c²/n_c + s_r²/n_r, and the
    interval uses Student's t with Welch-Satterthwaite degrees of freedom, then
    is exponentiated.  Unlike a bootstrap of 3 values it has its stated coverage
    at 2 repeats and up (``benches/perf/throughput_gate_simulation.py``).  Every
    value must be > 0 (ValueError otherwise).  A side with a single repeat gives a
    degenerate result: the ratio, no interval (NaN bounds).
    """
    confidence = _check_confidence(confidence)
    candidate_values = _as_finite_array(candidate, "candidate repeats")
    reference_values = _as_finite_array(reference, "reference repeats")
    log_c = _positive_logs(candidate, "candidate repeats")
    log_r = _positive_logs(reference, "reference repeats")
    log_ratio = float(log_c.mean() - log_r.mean())
    if min(log_c.size, log_r.size) == 1:
        variance = df = math.nan
    else:
        a = float(np.var(log_c, ddof=1)) / log_c.size
        b = float(np.var(log_r, ddof=1)) / log_r.size
        variance = a + b
        if variance > 0:
            df = variance**2 / (a**2 / (log_c.size - 1) + b**2 / (log_r.size - 1))
        else:  # identical repeats on both sides: a zero-width interval, df as if pooled
            df = float(log_c.size + log_r.size - 2)
    return _ratio_from_log(log_ratio, variance, df, confidence, candidate=candidate_values,
                           reference=reference_values, method="welch-log-t")


def paired_ratio_interval(
    candidate: Sequence[float], reference: Sequence[float], *, first_stage: int | None = None,
    confidence: float = 0.95,
) -> RatioInterval:
    """Interval of candidate ÷ reference from windows measured in pairs (interleaved).

    Window i of the candidate and window i of the reference were measured next to
    each other (A B, then B A, ...), so a drift in machine speed hits both alike and
    cancels in each pair's log ratio d_i = log c_i - log r_i.  The estimate is
    exp(mean d), the interval a Student t interval on the d_i with n - 1 degrees of
    freedom (``method`` ``"paired-log-t"``); with ``first_stage`` (``--repeats auto``:
    those first pairs chose n) the spread is theirs, with ``first_stage`` - 1 df
    (``"paired-log-t-two-stage"``, Stein's interval).  Fewer than two pairs: degenerate.
    """
    confidence = _check_confidence(confidence)
    candidate_values = _as_finite_array(candidate, "candidate windows")
    reference_values = _as_finite_array(reference, "reference windows")
    if candidate_values.size != reference_values.size:
        raise ValueError(f"paired windows: {candidate_values.size} candidate and "
                         f"{reference_values.size} reference windows")
    differences = (_positive_logs(candidate, "candidate windows")
                   - _positive_logs(reference, "reference windows"))
    n = differences.size
    spread = n if first_stage is None else min(first_stage, n)
    if spread < 2:
        variance = df = math.nan
    else:
        variance, df = float(np.var(differences[:spread], ddof=1)) / n, float(spread - 1)
    return _ratio_from_log(float(differences.mean()), variance, df, confidence,
                           candidate=candidate_values, reference=reference_values,
                           method="paired-log-t" if first_stage is None
                           else "paired-log-t-two-stage")


def ratio_interval_between_runs(
    candidate: Sequence[float], reference_runs: Sequence[Sequence[float]], *,
    confidence: float = 0.95,
) -> RatioInterval:
    """Candidate run ÷ a baseline of several runs, with run-to-run variance in the interval.

    Model (log tokens/s): repeat j of run i is mu + b_i + e_ij, with a run effect b_i
    ~ N(0, tau²) shared by the repeats of one server process and within-run noise
    e_ij ~ N(0, sigma_i²).  The candidate run gets its own run effect.  With k >= 2
    baseline runs of means m_i and within variances s_i² over n_i repeats:

    * baseline level: the mean of the run means, variance S_b²/k where S_b² is the
      sample variance of the m_i (it contains tau² + sigma²/n, df k - 1);
    * tau² = max(0, S_b² - mean(s_i²/n_i)) (method of moments, truncated at 0);
    * the candidate run's mean has variance tau² + s_c²/n_c.

    The interval is log ratio ± t · sqrt(S_b²/k + tau² + s_c²/n_c) with
    Satterthwaite df, the two baseline terms counted as one (both come from S_b²,
    df k - 1).  With one baseline run this is :func:`ratio_interval`; a candidate
    with a single repeat, or a baseline whose runs all have one repeat and agree
    exactly, is degenerate.
    """
    confidence = _check_confidence(confidence)
    runs = [list(run) for run in reference_runs]
    if not runs:
        raise ValueError("no baseline runs to compare with")
    if len(runs) == 1:
        return ratio_interval(candidate, runs[0], confidence=confidence)
    candidate_values = _as_finite_array(candidate, "candidate repeats")
    log_c = _positive_logs(candidate, "candidate repeats")
    run_logs = [_positive_logs(run, f"baseline run {i + 1} repeats") for i, run in enumerate(runs)]
    k = len(run_logs)
    run_means = np.array([float(logs.mean()) for logs in run_logs])
    between = float(np.var(run_means, ddof=1))
    within_terms = [float(np.var(logs, ddof=1)) / logs.size for logs in run_logs if logs.size > 1]
    within_mean = float(np.mean(within_terms)) if within_terms else 0.0
    tau_squared = max(0.0, between - within_mean)
    log_ratio = float(log_c.mean() - run_means.mean())
    reference_values = np.concatenate([_as_finite_array(run, "baseline repeats") for run in runs])
    if log_c.size == 1:
        variance = df = math.nan
    else:
        candidate_term = float(np.var(log_c, ddof=1)) / log_c.size
        baseline_term = between / k + tau_squared
        variance = baseline_term + candidate_term
        if variance > 0:
            df = variance**2 / (baseline_term**2 / (k - 1) + candidate_term**2 / (log_c.size - 1))
        else:
            df = float(k - 1 + log_c.size - 1)
    result = _ratio_from_log(log_ratio, variance, df, confidence, candidate=candidate_values,
                             reference=reference_values, method="between-runs-log-t")
    return result


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a proportion (95% by default: ``z`` the normal's 97.5%
    quantile); (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
