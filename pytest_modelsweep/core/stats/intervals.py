"""Intervals of throughput on the log scale, of ratios between two models, and of a proportion.

Throughput noise is multiplicative, so every interval here is a Student t interval on log
tokens/s, exponentiated: :func:`log_mean_interval` (one setting over its repeats; with
``first_stage``, Stein's two-stage interval that ``--repeats auto`` makes, see
``core.stats.repeats``), :func:`ratio_interval` (Welch, two models' repeats),
:func:`paired_ratio_interval` (interleaved windows) and :func:`ratio_interval_between_runs`
(against a baseline of several runs). Student's t is scipy's (``scipy.special.stdtrit`` and
``stdtr``, what ``scipy.stats.t`` calls, without loading all of ``scipy.stats``).
:func:`wilson_interval` is one model's accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .verdicts import check_confidence

FloatArray = NDArray[np.float64]
_Z_975 = 1.959963984540054
"""The standard normal's 97.5% quantile: z of a two-sided 95% interval."""


def finite_array(values: ArrayLike, what: str) -> FloatArray:
    """``values`` as a one-dimensional, non-empty array of finite floats (ValueError otherwise)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{what} is empty")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} contains a value that is not a finite number")
    return array


def _check_df(df: float) -> float:
    if not (math.isfinite(df) and df > 0.0):
        raise ValueError(f"degrees of freedom must be a finite number > 0, got {df!r}")
    return float(df)


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (any real > 0) degrees of freedom."""
    from scipy.special import stdtr

    return float(stdtr(_check_df(df), t))


def t_half_width(standard_error: float, df: float, confidence: float = 0.95) -> float:
    """Half-width of a two-sided Student t interval: t(df, (1 + confidence) / 2) × its
    standard error (the one t of every interval here and of ``--repeats auto``'s rule)."""
    from scipy.special import stdtrit

    return float(stdtrit(_check_df(df), 0.5 + check_confidence(confidence) / 2)) * standard_error


@dataclass(frozen=True)
class RatioInterval:
    """Interval of candidate ÷ reference throughput: ``ratio`` of geometric means, bounds from
    the t interval ``method`` names; ``*_mean`` the repeats' arithmetic means. ``degenerate``
    (a side has one repeat): the bounds, ``df`` and ``log_standard_error`` are NaN."""

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

    def at_confidence(self, confidence: float) -> RatioInterval:
        """The same estimate with its interval at another confidence level."""
        confidence = check_confidence(confidence)
        if self.degenerate:
            return replace(self, confidence=confidence)
        half = t_half_width(self.log_standard_error, self.df, confidence)
        centre = math.log(self.ratio)
        return replace(
            self, confidence=confidence, low=math.exp(centre - half), high=math.exp(centre + half)
        )


def _logs(values: Sequence[float], what: str) -> FloatArray:
    """The values (finite, all > 0) and their logs."""
    array = finite_array(values, what)
    if np.any(array <= 0.0):
        raise ValueError(f"{what} must all be > 0 tokens/s for a ratio on the log scale")
    return np.log(array)


def _term(logs: FloatArray) -> tuple[float, float]:
    """A side's variance of its mean log, and its df."""
    return float(np.var(logs, ddof=1)) / logs.size, logs.size - 1


def _welch(*terms: tuple[float, float]) -> tuple[float, float]:
    """The variance of a sum of independent means (each term: its variance and df) and its
    Welch-Satterthwaite df; with no spread at all, a zero-width interval, df as if pooled."""
    variance = sum(term for term, _ in terms)
    if variance > 0:
        return variance, variance**2 / sum(term**2 / df for term, df in terms)
    return variance, float(sum(df for _, df in terms))


_NO_SPREAD = (math.nan, math.nan)
"""The variance and df of a side with one repeat (or of fewer than two pairs): degenerate."""


def _ratio_from_log(
    log_ratio: float,
    variance: float,
    df: float,
    confidence: float,
    *,
    candidate: Sequence[float],
    reference: Sequence[float],
    method: str,
) -> RatioInterval:
    degenerate = not (math.isfinite(variance) and math.isfinite(df) and df > 0)
    standard_error = math.nan if degenerate else math.sqrt(variance)
    half = math.nan if degenerate else t_half_width(standard_error, df, confidence)
    low, high = math.exp(log_ratio - half), math.exp(log_ratio + half)
    return RatioInterval(
        ratio=math.exp(log_ratio),
        low=low,
        high=high,
        confidence=confidence,
        candidate_mean=float(np.mean(candidate)),
        reference_mean=float(np.mean(reference)),
        candidate_n=len(candidate),
        reference_n=len(reference),
        degenerate=degenerate,
        method=method,
        df=math.nan if degenerate else df,
        log_standard_error=standard_error,
    )


def log_mean_interval(
    values: Sequence[float], *, first_stage: int | None = None, confidence: float = 0.95
) -> tuple[float, float] | None:
    """The interval of one setting's throughput over its repeats, as (low, high) tokens/s.

    exp(mean log x ± t · s / √n); with ``first_stage`` (Stein's rule) s is the sd of those
    first repeats, with ``first_stage`` − 1 df, exact whatever n they chose. None with fewer
    than two values or a value not positive; ValueError for infinite ones.
    """
    confidence = check_confidence(confidence)
    spread = len(values) if first_stage is None else min(first_stage, len(values))
    if spread < 2 or not all(value > 0 for value in values):
        return None
    logs = np.log(finite_array(values, "repeats"))
    sd = float(np.std(logs[:spread], ddof=1))
    half = t_half_width(sd / math.sqrt(logs.size), float(spread - 1), confidence)
    centre = float(logs.mean())
    return math.exp(centre - half), math.exp(centre + half)


def ratio_interval(
    candidate: Sequence[float], reference: Sequence[float], *, confidence: float = 0.95
) -> RatioInterval:
    """Welch t interval of candidate ÷ reference throughput on the log scale.

    Unlike a bootstrap of 3 values it has its stated coverage at 2 repeats and up
    (``benches/perf/throughput_gate_simulation.py``). Every value must be > 0 (ValueError
    otherwise); a side with a single repeat gives the ratio with NaN bounds.
    """
    confidence = check_confidence(confidence)
    log_c = _logs(candidate, "candidate repeats")
    log_r = _logs(reference, "reference repeats")
    one_repeat = min(log_c.size, log_r.size) == 1
    variance, df = _NO_SPREAD if one_repeat else _welch(_term(log_c), _term(log_r))
    return _ratio_from_log(
        float(log_c.mean() - log_r.mean()),
        variance,
        df,
        confidence,
        candidate=candidate,
        reference=reference,
        method="welch-log-t",
    )


def paired_ratio_interval(
    candidate: Sequence[float],
    reference: Sequence[float],
    *,
    first_stage: int | None = None,
    confidence: float = 0.95,
) -> RatioInterval:
    """Interval of candidate ÷ reference from windows measured in pairs (interleaved).

    A drift in machine speed cancels in each pair's log ratio d_i = log c_i - log r_i. The
    estimate is exp(mean d), the interval Student's t on the d_i with n - 1 df; with
    ``first_stage`` (Stein's interval) the spread is the first pairs' (their count - 1 df).
    Fewer than two pairs: degenerate.
    """
    confidence = check_confidence(confidence)
    if len(candidate) != len(reference):
        raise ValueError(
            f"paired windows: {len(candidate)} candidate and {len(reference)} reference windows"
        )
    differences = _logs(candidate, "candidate windows") - _logs(reference, "reference windows")
    n = differences.size
    spread = n if first_stage is None else min(first_stage, n)
    variance, df = (
        _NO_SPREAD
        if spread < 2
        else (float(np.var(differences[:spread], ddof=1)) / n, float(spread - 1))
    )
    return _ratio_from_log(
        float(differences.mean()),
        variance,
        df,
        confidence,
        candidate=candidate,
        reference=reference,
        method="paired-log-t" if first_stage is None else "paired-log-t-two-stage",
    )


def ratio_interval_between_runs(
    candidate: Sequence[float],
    reference_runs: Sequence[Sequence[float]],
    *,
    confidence: float = 0.95,
) -> RatioInterval:
    """Candidate run ÷ a baseline of several runs, with run-to-run variance in the interval
    (the model: docs/ci.md, "The interval against a baseline of several runs")."""
    confidence = check_confidence(confidence)
    runs = [list(run) for run in reference_runs]
    if not runs:
        raise ValueError("no baseline runs to compare with")
    if len(runs) == 1:
        return ratio_interval(candidate, runs[0], confidence=confidence)
    log_c = _logs(candidate, "candidate repeats")
    run_logs = [_logs(run, f"baseline run {i + 1} repeats") for i, run in enumerate(runs)]
    k = len(run_logs)
    run_means = np.array([float(logs.mean()) for logs in run_logs])
    between = float(np.var(run_means, ddof=1))
    within_terms = [_term(logs)[0] for logs in run_logs if logs.size > 1]
    tau_squared = max(0.0, between - (float(np.mean(within_terms)) if within_terms else 0.0))
    variance, df = (
        _NO_SPREAD if log_c.size == 1 else _welch((between / k + tau_squared, k - 1), _term(log_c))
    )
    return _ratio_from_log(
        float(log_c.mean() - run_means.mean()),
        variance,
        df,
        confidence,
        candidate=candidate,
        reference=[x for run in runs for x in run],
        method="between-runs-log-t",
    )


def wilson_interval(successes: int, n: int) -> tuple[float, float]:
    """Wilson score interval of a proportion at 95%; (0, 1) when n is 0. The closed form
    (scipy's is ``binomtest(...).proportion_ci``, which would load all of scipy.stats for a
    report's six lines of arithmetic)."""
    if n <= 0:
        return 0.0, 1.0
    z = _Z_975
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
