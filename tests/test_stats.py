"""Tests of pytest_modelsweep.core.stats: known answers, agreement with scipy, verdicts, Holm, ratios."""

from __future__ import annotations

import json
import math
import tracemalloc
from dataclasses import replace
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats as scipy_stats

from pytest_modelsweep.core.codec import converter
from pytest_modelsweep.core.stats import Verdict, decide_ratio_verdict, decide_verdict
from pytest_modelsweep.core.stats.bootstrap import (
    PairedInterval,
    bootstrap_mean_distribution,
    holm_intervals,
    paired_bootstrap,
    sign_test_p_value,
)
from pytest_modelsweep.core.stats.intervals import (
    ratio_interval,
    ratio_interval_between_runs,
    student_t_cdf,
    t_half_width,
    wilson_interval,
)

RESAMPLES = 10_000
Z = NormalDist()


def keyed(scores: np.ndarray) -> dict[str, float]:
    return {f"item-{i:04d}": float(v) for i, v in enumerate(scores)}


def counted_pair(
    n: int, candidate_only: int, reference_only: int, both_right: int
) -> tuple[dict[str, float], dict[str, float]]:
    """0/1 scores with exact cell counts; the remaining items are wrong for both."""
    candidate, reference = {}, {}
    for i in range(n):
        key = f"item-{i:04d}"
        if i < candidate_only:
            candidate[key], reference[key] = 1.0, 0.0
        elif i < candidate_only + reference_only:
            candidate[key], reference[key] = 0.0, 1.0
        elif i < candidate_only + reference_only + both_right:
            candidate[key], reference[key] = 1.0, 1.0
        else:
            candidate[key], reference[key] = 0.0, 0.0
    return candidate, reference


def correlated_binary(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Paired 0/1 scores: reference ~45%, candidate ~43%, ~18% discordant."""
    cells = np.random.default_rng(seed).choice(4, size=n, p=[0.35, 0.10, 0.08, 0.47])
    candidate = np.isin(cells, (0, 2)).astype(float)  # both right, candidate only
    reference = np.isin(cells, (0, 1)).astype(float)  # both right, reference only
    return candidate, reference


def quantile_mc_tolerance(bootstrap_sd: float, q: float, resamples: int, lattice: float) -> float:
    """Tolerance for the q-quantile of a bootstrap distribution estimated twice, independently.

    SD of a sample quantile is sqrt(q(1-q)/B) / f(x_q); f from the normal
    approximation of the bootstrap distribution.  Two independent estimates: x sqrt(2).
    Five such SDs, plus one lattice step where the bootstrap means are discrete.
    """
    density = math.exp(-(Z.inv_cdf(q) ** 2) / 2) / math.sqrt(2 * math.pi) / bootstrap_sd
    single = math.sqrt(q * (1 - q) / resamples) / density
    return 5 * math.sqrt(2) * single + lattice


def scipy_paired_interval(
    candidate: np.ndarray, reference: np.ndarray, method: str, seed: int = 12345
) -> tuple[float, float]:
    """scipy's paired, vectorised bootstrap interval of mean(candidate - reference)."""
    interval = scipy_stats.bootstrap(
        (candidate, reference),
        lambda c, r, axis: np.mean(c - r, axis=axis),
        paired=True,
        vectorized=True,
        method=method,
        n_resamples=RESAMPLES,
        batch=2_000,
        random_state=seed,
    ).confidence_interval
    return float(interval.low), float(interval.high)


# --------------------------------------------------------------------------- known answers


def test_identical_scores_give_exact_zero_interval() -> None:
    scores = keyed((np.arange(500) % 3 == 0).astype(float))
    interval = paired_bootstrap(scores, dict(scores))
    assert (interval.difference, interval.low, interval.high) == (0.0, 0.0, 0.0)
    assert interval.discordant == 0
    assert interval.standard_error == 0.0
    assert interval.p_value == 1.0
    # [0, 0] holds no coverage: no item tells the two apart, so no verdict
    assert interval.too_few_items
    assert decide_verdict(interval, None) is Verdict.INCONCLUSIVE
    assert interval.too_few_reason() == (
        "only 0 of 500 items scored differently (the interval holds its 95% coverage from 30 "
        "items with 10 scored differently on): score more items (raise --limit)"
    )


@pytest.mark.parametrize(
    ("n", "candidate_only", "expected"),
    [
        (40, 9, Verdict.INCONCLUSIVE),
        (40, 10, Verdict.BETTER),
        (29, 12, Verdict.INCONCLUSIVE),
        (30, 12, Verdict.BETTER),
    ],
)
def test_a_verdict_needs_thirty_items_and_ten_scored_differently(
    n: int,
    candidate_only: int,
    expected: Verdict,
) -> None:
    # the candidate right wherever they differ: the interval lies above 0 in every case
    candidate, reference = counted_pair(
        n, candidate_only=candidate_only, reference_only=0, both_right=10
    )
    interval = paired_bootstrap(candidate, reference)
    assert interval.low > 0.0 and interval.discordant == candidate_only
    assert decide_verdict(interval, None) is expected
    assert decide_verdict(interval, 0.9) is expected  # and with a margin
    reason = interval.too_few_reason()
    assert bool(reason) is (expected is Verdict.INCONCLUSIVE)
    if n < 30:
        assert reason.startswith(f"only {n} items paired (")


def test_candidate_fixing_every_reference_error_is_better() -> None:
    reference = (np.random.default_rng(3).random(300) < 0.7).astype(float)
    candidate = np.ones_like(reference)
    interval = paired_bootstrap(keyed(candidate), keyed(reference))
    wrong = int((reference == 0).sum())
    assert interval.difference == pytest.approx(wrong / 300)
    assert interval.low > 0.0
    assert (interval.candidate_ahead, interval.reference_ahead, interval.discordant) == (
        wrong,
        0,
        wrong,
    )
    assert interval.candidate_mean == 1.0
    assert interval.reference_mean == pytest.approx(1 - wrong / 300)
    assert interval.p_value == 1 / RESAMPLES
    assert decide_verdict(interval, None) is Verdict.BETTER


def test_discordant_counts_and_means_from_cell_counts() -> None:
    candidate, reference = counted_pair(200, candidate_only=12, reference_only=30, both_right=80)
    interval = paired_bootstrap(candidate, reference)
    assert (interval.candidate_ahead, interval.reference_ahead, interval.discordant) == (12, 30, 42)
    assert interval.candidate_mean == pytest.approx(92 / 200)
    assert interval.reference_mean == pytest.approx(110 / 200)
    assert interval.difference == pytest.approx(-18 / 200)
    assert interval.n == 200


def test_items_are_matched_by_id_not_by_order() -> None:
    candidate, reference = counted_pair(100, candidate_only=10, reference_only=2, both_right=40)
    shuffled = dict(reversed(list(reference.items())))
    assert paired_bootstrap(candidate, shuffled) == paired_bootstrap(candidate, reference)


def test_mismatched_ids_raise_one_line_error_naming_ids() -> None:
    candidate = {"a": 1.0, "b": 0.0, "only-cand": 1.0}
    reference = {"a": 1.0, "b": 1.0, "only-ref": 0.0}
    with pytest.raises(ValueError) as raised:
        paired_bootstrap(candidate, reference)
    message = str(raised.value)
    assert "'only-cand'" in message and "'only-ref'" in message
    assert "\n" not in message


def test_mismatch_message_lists_only_a_few_ids() -> None:
    candidate = {f"id-{i}": 1.0 for i in range(50)}
    with pytest.raises(
        ValueError, match=r"50 only in candidate \('id-0', 'id-1', 'id-10', \.\.\.\)"
    ):
        paired_bootstrap(candidate, {"other": 1.0})


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("confidence", 1.0), ("confidence", 0.0), ("resamples", 1), ("method", "bootstrap-t")],
)
def test_bad_settings_raise(keyword: str, value: object) -> None:
    scores = {"a": 1.0, "b": 0.0}
    with pytest.raises(ValueError, match=keyword.rstrip("s")):
        paired_bootstrap(scores, scores, **{keyword: value})  # type: ignore[arg-type]


def test_non_finite_score_names_the_item() -> None:
    with pytest.raises(ValueError, match="'b'"):
        paired_bootstrap({"a": 1.0, "b": math.nan}, {"a": 1.0, "b": 0.0})
    with pytest.raises(ValueError, match="empty"):
        paired_bootstrap({}, {})


def test_single_item_collapses_and_has_no_standard_error() -> None:
    interval = paired_bootstrap({"a": 1.0}, {"a": 0.0})
    assert (interval.low, interval.high, interval.difference) == (1.0, 1.0, 1.0)
    assert math.isnan(interval.standard_error)


# --------------------------------------------------------------------------- agreement with scipy


@pytest.mark.parametrize("method", ["percentile", "basic", "bca"])
def test_binary_interval_agrees_with_scipy(method: str) -> None:
    n = 1319
    candidate, reference = correlated_binary(n, seed=7)
    ours = paired_bootstrap(keyed(candidate), keyed(reference), method=method)  # type: ignore[arg-type]
    theirs_low, theirs_high = scipy_paired_interval(candidate, reference, method)
    tolerance = quantile_mc_tolerance(
        ours.bootstrap_standard_error, 0.025, RESAMPLES, lattice=1 / n
    )
    assert tolerance < 0.003  # the honest bound is far tighter than 0.01
    assert abs(ours.low - theirs_low) < tolerance
    assert abs(ours.high - theirs_high) < tolerance


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_continuous_interval_agrees_with_scipy(method: str) -> None:
    rng = np.random.default_rng(11)
    reference = rng.beta(2, 5, size=300)
    candidate = np.clip(reference + rng.exponential(0.05, size=300) - 0.04, 0, 1)
    ours = paired_bootstrap(keyed(candidate), keyed(reference), method=method)  # type: ignore[arg-type]
    theirs_low, theirs_high = scipy_paired_interval(candidate, reference, method)
    tolerance = quantile_mc_tolerance(ours.bootstrap_standard_error, 0.025, RESAMPLES, lattice=0.0)
    assert abs(ours.low - theirs_low) < tolerance
    assert abs(ours.high - theirs_high) < tolerance


def test_bca_levels_follow_efron_with_explicit_jackknife() -> None:
    # skewed differences, small n: BCa moves the endpoints well away from percentile
    rng = np.random.default_rng(11)
    reference = rng.uniform(0, 1, size=30)
    candidate = reference + rng.lognormal(0, 1.5, size=30) * 0.05
    differences = candidate - reference  # keyed() ids sort in array order
    means = bootstrap_mean_distribution(differences, seed=4)
    theta = differences.mean()
    z0 = scipy_stats.norm.ppf((np.sum(means < theta) + np.sum(means <= theta)) / (2 * RESAMPLES))
    leave_one_out = np.array([np.delete(differences, i).mean() for i in range(differences.size)])
    spread = leave_one_out.mean() - leave_one_out
    acceleration = np.sum(spread**3) / (6 * np.sum(spread**2) ** 1.5)
    levels = [
        scipy_stats.norm.cdf(z0 + (z0 + z) / (1 - acceleration * (z0 + z)))
        for z in scipy_stats.norm.ppf([0.025, 0.975])
    ]
    expected_low, expected_high = np.quantile(means, levels)
    bca = paired_bootstrap(keyed(candidate), keyed(reference), method="bca", seed=4)
    percentile = paired_bootstrap(keyed(candidate), keyed(reference), seed=4)
    assert acceleration > 0.03 and bca.low - percentile.low > 0.002
    assert (bca.low, bca.high) == pytest.approx((expected_low, expected_high), abs=1e-12)


def test_basic_interval_reflects_percentile_interval() -> None:
    candidate, reference = correlated_binary(400, seed=2)
    percentile = paired_bootstrap(keyed(candidate), keyed(reference))
    basic = paired_bootstrap(keyed(candidate), keyed(reference), method="basic")
    assert basic.low == pytest.approx(2 * percentile.difference - percentile.high, abs=1e-12)
    assert basic.high == pytest.approx(2 * percentile.difference - percentile.low, abs=1e-12)


def test_bootstrap_spread_matches_closed_form_standard_error() -> None:
    n = 1319
    candidate, reference = correlated_binary(n, seed=5)
    interval = paired_bootstrap(keyed(candidate), keyed(reference))
    differences = candidate - reference
    closed_form = float(np.std(differences, ddof=1)) / math.sqrt(n)
    assert interval.standard_error == pytest.approx(closed_form, rel=1e-12)
    # the bootstrap SD of a mean is the ddof=0 SD over sqrt(n); its MC error is ~ 1/sqrt(2B)
    expected = closed_form * math.sqrt((n - 1) / n)
    assert interval.bootstrap_standard_error == pytest.approx(
        expected, rel=5 / math.sqrt(2 * RESAMPLES)
    )


def test_min_detectable_difference_is_80_percent_power_formula() -> None:
    candidate, reference = correlated_binary(1319, seed=5)
    interval = paired_bootstrap(keyed(candidate), keyed(reference))
    assert interval.min_detectable_difference == pytest.approx(
        (1.959964 + 0.841621) * interval.standard_error
    )
    wider = paired_bootstrap(keyed(candidate), keyed(reference), confidence=0.99)
    assert wider.min_detectable_difference == pytest.approx(
        (2.575829 + 0.841621) * interval.standard_error
    )


def test_exact_and_index_resampling_draw_the_same_distribution() -> None:
    candidate, reference = correlated_binary(1319, seed=9)
    differences = candidate - reference
    exact = bootstrap_mean_distribution(differences, seed=1, exact=True)
    indexed = bootstrap_mean_distribution(differences, seed=2, exact=False)
    sd = float(np.std(exact))
    assert abs(exact.mean() - indexed.mean()) < 5 * math.sqrt(2 / RESAMPLES) * sd
    assert float(np.std(indexed)) == pytest.approx(sd, rel=5 / math.sqrt(RESAMPLES))
    for q in (0.025, 0.5, 0.975):
        tolerance = quantile_mc_tolerance(sd, q, RESAMPLES, lattice=1 / 1319)
        assert abs(np.quantile(exact, q) - np.quantile(indexed, q)) < tolerance


def test_memory_stays_bounded() -> None:
    candidate, reference = correlated_binary(1319, seed=9)
    differences = candidate - reference
    tracemalloc.start()
    try:
        bootstrap_mean_distribution(differences, resamples=RESAMPLES)
        _, exact_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        bootstrap_mean_distribution(differences, resamples=RESAMPLES, exact=False)
        _, indexed_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert exact_peak < 2 * 2**20  # multinomial counts: O(resamples)
    assert indexed_peak < 64 * 2**20  # unchunked would need > 200 MiB


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_interval_other_seed_slightly_different() -> None:
    candidate, reference = correlated_binary(1319, seed=4)
    first = paired_bootstrap(keyed(candidate), keyed(reference), seed=1)
    again = paired_bootstrap(keyed(candidate), keyed(reference), seed=1)
    other = paired_bootstrap(keyed(candidate), keyed(reference), seed=2)
    assert first == again
    assert (first.low, first.high) != (other.low, other.high)
    tolerance = quantile_mc_tolerance(first.bootstrap_standard_error, 0.025, RESAMPLES, 1 / 1319)
    assert abs(first.low - other.low) < tolerance and abs(first.high - other.high) < tolerance
    assert first.difference == other.difference


def test_interval_round_trips_through_json() -> None:
    candidate, reference = counted_pair(100, 10, 5, 40)
    interval = paired_bootstrap(candidate, reference)
    written = json.loads(json.dumps(converter.unstructure(interval)))
    assert converter.structure(written, PairedInterval) == interval


# --------------------------------------------------------------------------- p-values


def test_p_values() -> None:
    candidate, reference = counted_pair(1000, candidate_only=121, reference_only=90, both_right=400)
    interval = paired_bootstrap(candidate, reference)
    # normal z = 0.031 / SE ~ 2.14, p ~ 0.032; the bootstrap counts ties at 0 on both sides
    normal = 2.0 * Z.cdf(-abs(interval.difference) / interval.standard_error)
    assert normal == pytest.approx(0.032, abs=0.002)
    assert interval.p_value == pytest.approx(normal, abs=0.01)
    assert (interval.p_value < 0.05) == (not interval.covers_zero)
    identical = {"a": 1.0, "b": 0.0}
    assert paired_bootstrap(identical, identical).p_value == 1.0


# --------------------------------------------------------------------------- verdicts


@pytest.fixture(scope="module")
def base_interval() -> PairedInterval:
    candidate, reference = counted_pair(100, 10, 5, 40)
    return paired_bootstrap(candidate, reference)


@pytest.mark.parametrize(
    ("low", "high", "margin", "expected"),
    [
        (0.01, 0.05, None, Verdict.BETTER),
        (0.01, 0.05, 0.10, Verdict.BETTER),
        (-0.05, -0.01, None, Verdict.WORSE),
        (-0.05, -0.01, 0.10, Verdict.WORSE),
        (-0.01, 0.02, None, Verdict.MATCHES),
        (0.0, 0.02, None, Verdict.MATCHES),
        (-0.02, 0.0, None, Verdict.MATCHES),
        (-0.01, 0.02, 0.03, Verdict.EQUIVALENT),
        (-0.02, 0.02, 0.02, Verdict.EQUIVALENT),
        (-0.01, 0.02, 0.015, Verdict.INCONCLUSIVE),
        (-0.04, 0.01, 0.03, Verdict.INCONCLUSIVE),
    ],
)
def test_verdict_rules(
    base_interval: PairedInterval, low: float, high: float, margin: float | None, expected: Verdict
) -> None:
    assert decide_verdict(replace(base_interval, low=low, high=high), margin) is expected


def test_negative_margin_is_refused(base_interval: PairedInterval) -> None:
    with pytest.raises(ValueError, match="margin"):
        decide_verdict(base_interval, -0.01)


# --------------------------------------------------------------------------- Holm


def test_holm_intervals_step_down_and_stop() -> None:
    strong = counted_pair(1000, candidate_only=180, reference_only=90, both_right=400)
    borderline = counted_pair(1000, candidate_only=121, reference_only=90, both_right=400)
    weaker = counted_pair(1000, candidate_only=119, reference_only=90, both_right=400)
    # preconditions: "weaker" alone excludes 0 at 95% but not at 97.5%
    assert not paired_bootstrap(*weaker).covers_zero
    assert paired_bootstrap(*weaker, confidence=0.975).covers_zero
    results = holm_intervals({"weaker": weaker, "strong": strong, "borderline": borderline})
    assert list(results) == ["weaker", "strong", "borderline"]
    assert [results[name].rank for name in ("strong", "borderline", "weaker")] == [0, 1, 2]
    assert results["strong"].rejected and results["strong"].interval.confidence == pytest.approx(
        1 - 0.05 / 3
    )
    assert results["strong"].interval == paired_bootstrap(*strong, confidence=1 - 0.05 / 3)
    assert not results["borderline"].rejected and results[
        "borderline"
    ].interval.confidence == pytest.approx(0.975)
    # the stopping rule: "weaker" keeps the 97.5% level where Holm stopped, not 95%
    assert not results["weaker"].rejected and results[
        "weaker"
    ].interval.confidence == pytest.approx(0.975)


def test_holm_intervals_all_rejected_use_each_rank_level() -> None:
    comparisons = {
        f"c{k}": counted_pair(500, candidate_only=100 + 20 * k, reference_only=20, both_right=200)
        for k in range(3)
    }
    results = holm_intervals(comparisons)
    assert all(result.rejected for result in results.values())
    levels = {results[name].rank: results[name].interval.confidence for name in results}
    assert levels == pytest.approx({0: 1 - 0.05 / 3, 1: 1 - 0.05 / 2, 2: 0.95})


# --------------------------------------------------------------------------- ratio


def test_ratio_of_constant_repeats_is_exact() -> None:
    result = ratio_interval([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert (result.ratio, result.low, result.high, result.degenerate) == (2.0, 2.0, 2.0, False)


def test_ratio_two_point_known_answer() -> None:
    # By design the interval is now Welch t on logs (was: percentile bootstrap of means).
    # Logs of [e, e^3] vs [1, 1]: difference 2, s_c^2 = 2, s_r^2 = 0, SE = 1, df = 1,
    # so the 95% interval is exp(2 +- t_{0.975,1}) with t_{0.975,1} = tan(0.475 pi) = 12.7062...
    e = math.e
    result = ratio_interval([e, e**3], [1.0, 1.0])
    t = math.tan(0.475 * math.pi)
    assert result.ratio == pytest.approx(e**2)
    assert result.df == pytest.approx(1.0)
    assert (result.low, result.high) == pytest.approx((math.exp(2 - t), math.exp(2 + t)), rel=1e-9)
    assert result.method == "welch-log-t"


def test_ratio_single_repeat_is_degenerate() -> None:
    # By design a single repeat now claims no interval at all: NaN bounds (were ratio, ratio)
    result = ratio_interval([150.0], [100.0, 101.0, 99.0])
    assert result.degenerate
    assert math.isnan(result.low) and math.isnan(result.high) and math.isnan(result.df)
    assert decide_ratio_verdict(result, 0.1) is Verdict.INCONCLUSIVE
    assert (result.candidate_n, result.reference_n) == (1, 3)
    assert ratio_interval([100.0, 101.0, 99.0], [150.0]).degenerate


def test_ratio_scales_with_candidate() -> None:
    candidate, reference = [101.2, 99.8, 100.5, 102.1, 98.9], [95.1, 96.3, 94.8, 95.9, 96.0]
    base = ratio_interval(candidate, reference)
    doubled = ratio_interval([2 * v for v in candidate], reference)
    assert (doubled.low, doubled.high) == pytest.approx((2 * base.low, 2 * base.high), rel=1e-12)
    assert base.low < base.ratio < base.high


def test_ratio_interval_agrees_with_scipy_welch() -> None:
    rng = np.random.default_rng(21)
    candidate, reference = rng.normal(110, 4, size=8), rng.normal(100, 3, size=6)
    ours = ratio_interval(candidate.tolist(), reference.tolist(), confidence=0.9)
    lc, lr = np.log(candidate), np.log(reference)
    theirs = scipy_stats.ttest_ind(lc, lr, equal_var=False).confidence_interval(0.9)
    assert ours.ratio == pytest.approx(math.exp(lc.mean() - lr.mean()))
    assert (ours.low, ours.high) == pytest.approx(
        (math.exp(theirs.low), math.exp(theirs.high)), rel=1e-9
    )
    assert ours.df == pytest.approx(float(scipy_stats.ttest_ind(lc, lr, equal_var=False).df))


def test_student_t_is_scipys_and_refuses_bad_degrees_of_freedom() -> None:
    assert t_half_width(2.0, 3.37, 0.9) == pytest.approx(
        2.0 * scipy_stats.t.ppf(0.95, 3.37), rel=1e-12
    )
    assert student_t_cdf(0.7, 9.0) == pytest.approx(scipy_stats.t.cdf(0.7, 9.0), abs=1e-15)
    for df in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="degrees of freedom"):
            t_half_width(1.0, df)


def test_ratio_interval_between_runs_adds_the_run_to_run_spread() -> None:
    now = [95.0, 96.0, 94.0]
    runs = [[100.0, 101.0, 99.0], [110.0, 108.0, 109.0], [95.0, 97.0, 96.0]]
    wide = ratio_interval_between_runs(now, runs)
    assert wide.method == "between-runs-log-t" and wide.reference_n == 9
    means = np.array([np.log(r).mean() for r in runs])
    within = np.mean([np.var(np.log(r), ddof=1) / 3 for r in runs])
    tau2 = max(0.0, float(np.var(means, ddof=1)) - float(within))
    expected = float(np.var(means, ddof=1)) / 3 + tau2 + float(np.var(np.log(now), ddof=1)) / 3
    assert wide.log_standard_error == pytest.approx(math.sqrt(expected))
    assert wide.ratio == pytest.approx(math.exp(np.log(now).mean() - means.mean()))
    pooled = ratio_interval(now, [v for r in runs for v in r])
    assert wide.high - wide.low > pooled.high - pooled.low
    # one baseline run: exactly the Welch interval
    assert ratio_interval_between_runs(now, runs[:1]) == ratio_interval(now, runs[0])


def test_ratio_refuses_non_positive_reference() -> None:
    with pytest.raises(ValueError, match="> 0"):
        ratio_interval([1.0, 2.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="> 0"):
        ratio_interval([-1.0, 2.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="empty"):
        ratio_interval([], [1.0])


def test_sign_test_is_exact() -> None:
    from scipy.stats import binomtest

    for ahead, behind in [(0, 0), (5, 0), (8, 0), (3, 4), (9, 1), (2, 7), (30, 12)]:
        expected = binomtest(ahead, ahead + behind, 0.5).pvalue if ahead + behind else 1.0
        assert sign_test_p_value(ahead, behind) == pytest.approx(expected, rel=1e-12)
    # its false-alarm rate at 5% is at most 5% at every count of differing items
    for total in range(1, 40):
        alarms = (
            sum(
                math.comb(total, k)
                for k in range(total + 1)
                if sign_test_p_value(k, total - k) < 0.05
            )
            / 2**total
        )
        assert alarms <= 0.05, total
    with pytest.raises(ValueError, match="counts"):
        sign_test_p_value(-1, 2)


def test_wilson_interval() -> None:
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and math.isclose(high, 0.27753, abs_tol=1e-5)
    low, high = wilson_interval(5, 10)
    assert math.isclose(low, 0.23659, abs_tol=1e-5) and math.isclose(high, 0.76341, abs_tol=1e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)
