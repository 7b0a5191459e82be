"""The repeat policy: fixed repeats and Stein's two-stage ``--repeats auto``, checked against
Stein's rule computed by hand."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy.stats import t as student_t

from pytest_modelsweep.core.stats.intervals import log_mean_interval, paired_ratio_interval
from pytest_modelsweep.core.stats.repeats import RepeatPolicy

AUTO = RepeatPolicy(None, 0.05, 10)


def scipy_total(first: list[float], target: float, most: int) -> int:
    """Stein's total by hand: the fewest N whose half-width exp(t(n0-1) s0 / sqrt(N)) - 1
    is within the target, at least n0 and at most ``most``."""
    n0 = len(first)
    s0 = statistics.stdev(math.log(v) for v in first)
    needed = (float(student_t.ppf(0.975, n0 - 1)) * s0 / math.log1p(target)) ** 2
    return min(most, max(n0, math.ceil(needed - 1e-9)))


def test_fixed_repeats_are_that_many_with_the_t_interval_of_all() -> None:
    policy = RepeatPolicy(3, 0.05, 10)
    assert not policy.auto and policy.at_most == 3
    assert [policy.done([100.0] * n) for n in range(1, 4)] == [False, False, True]
    assert policy.progress([1.0, 2.0]) == "2/3"
    assert (policy.rule, policy.interval_rule) == ("fixed", "log-t")
    values = [900.0, 1000.0, 950.0]
    logs = [math.log(v) for v in values]
    half = student_t.ppf(0.975, 2) * statistics.stdev(logs) / math.sqrt(3)
    centre = statistics.fmean(logs)
    assert policy.interval(values) == pytest.approx(
        (math.exp(centre - half), math.exp(centre + half))
    )


@pytest.mark.parametrize(
    "first",
    [
        [100.0, 101.0, 99.5, 100.5],  # quiet: the first stage is enough
        [100.0, 105.0, 96.0, 103.0],  # a few more (7)
        [100.0, 120.0, 85.0, 110.0],  # noisy: the maximum
    ],
)
def test_auto_takes_the_total_its_first_stage_fixes(first: list[float]) -> None:
    want = scipy_total(first, 0.05, 10)
    for n in range(1, 4):
        assert AUTO.planned(first[:n]) is None and not AUTO.done(first[:n])
        assert AUTO.progress(first[:n]) == f"{n}/≤10 (auto)"
    # later repeats do not move the total: it is fixed by the first stage alone
    for later in ([], [50.0], [500.0, 1.0]):
        assert AUTO.planned(first + later) == want
    assert AUTO.done(first) is (want == 4)
    assert AUTO.progress(first) == f"4/{want} (auto)"


def test_the_three_first_stages_above_reach_three_different_totals() -> None:
    totals = [
        scipy_total(f, 0.05, 10)
        for f in (
            [100.0, 101.0, 99.5, 100.5],
            [100.0, 105.0, 96.0, 103.0],
            [100.0, 120.0, 85.0, 110.0],
        )
    ]
    assert totals == [4, 7, 10]


def test_the_auto_interval_is_steins_first_stage_spread_with_its_df() -> None:
    values = [100.0, 104.0, 97.0, 102.0, 130.0, 70.0]
    first = [math.log(v) for v in values[:4]]
    centre = statistics.fmean(math.log(v) for v in values)
    half = student_t.ppf(0.975, 3) * statistics.stdev(first) / math.sqrt(6)
    low, high = AUTO.interval(values) or (math.nan, math.nan)
    assert low == pytest.approx(math.exp(centre - half), rel=1e-9)
    assert high == pytest.approx(math.exp(centre + half), rel=1e-9)
    assert AUTO.interval_rule == "log-t-two-stage"
    assert AUTO.rule == "auto: two-stage, 4 first, half-width ≤ 5% or 10 repeats"
    # unlike the t interval of all six, which the two outliers widen
    wide = log_mean_interval(values) or (math.nan, math.nan)
    assert wide[1] - wide[0] > high - low
    # the half-width the rule aims for is the interval's own, once the total is reached
    quiet = [100.0, 101.0, 99.5, 100.5]
    q_low, q_high = AUTO.interval(quiet) or (math.nan, math.nan)
    assert AUTO.planned(quiet) == 4
    assert math.sqrt(q_high / q_low) - 1 <= 0.05


def test_auto_pairs_use_the_same_rule_on_the_log_ratios() -> None:
    candidate = [50.0, 52.0, 49.0, 51.0, 50.5]
    reference = [100.0, 101.0, 99.0, 100.0, 100.0]
    ratio = AUTO.paired_ratio(candidate, reference)
    assert ratio.method == "paired-log-t-two-stage" and ratio.df == 3
    logs = [math.log(c / r) for c, r in zip(candidate, reference)]
    half = student_t.ppf(0.975, 3) * statistics.stdev(logs[:4]) / math.sqrt(5)
    assert math.log(ratio.high) == pytest.approx(statistics.fmean(logs) + half, rel=1e-9)
    fixed = RepeatPolicy(5, 0.05, 10).paired_ratio(candidate, reference)
    assert fixed == paired_ratio_interval(candidate, reference)
    assert fixed.method == "paired-log-t" and fixed.df == 4


def test_a_zero_rate_in_the_first_stage_aims_for_nothing() -> None:
    assert AUTO.planned([100.0, 0.0, 90.0, 95.0]) == 4
    assert AUTO.interval([100.0, 0.0, 90.0, 95.0]) is None


def test_auto_needs_room_for_its_first_stage() -> None:
    with pytest.raises(ValueError, match="first stage"):
        RepeatPolicy(None, 0.05, 3)
