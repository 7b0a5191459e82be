"""The capacity search and the comparison of two searches, on deterministic steps (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_modelsweep.core.measurements import CapacityStats, SearchBracket, StepOutcome
from pytest_modelsweep.core.slo import Goodput
from pytest_modelsweep.core.stats import Verdict
from pytest_modelsweep.core.stats.attainment import attainment_interval, windows_attainment
from pytest_modelsweep.workloads.slo_search import (
    INTERVAL_CONFIDENCE,
    Knob,
    StepPolicy,
    capacity_ratio,
    decide_capacity_verdict,
    find_capacity,
    server_max_concurrency,
    step_line,
)

REQUESTS = 10


@dataclass
class FixedWindow:
    """A window whose figures the step function sets."""

    output_tokens_per_s: float
    violations: list[str] = field(default_factory=list)
    offered_rps: float | None = None
    achieved_rps: float | None = None
    saturation_reason: str | None = None


class Curve:
    """A server whose share of good requests falls as concurrency rises: at ``c`` in
    flight, ``good(c)`` of 10 requests meet the SLO; windows last one second per request
    in flight. Records every concurrency measured."""

    def __init__(
        self,
        good: dict[int, int] | None = None,
        *,
        capacity: int | None = None,
        broken_at: int | None = None,
    ) -> None:
        self.good = good or {}
        self.capacity = capacity
        self.broken_at = broken_at
        self.tried: list[int] = []

    def __call__(self, concurrency: int) -> tuple[Goodput, FixedWindow]:
        self.tried.append(concurrency)
        if self.capacity is not None:
            good = REQUESTS if concurrency <= self.capacity else 0
        else:
            good = self.good[concurrency]
        violations = (
            ["request 3 produced 12 of 256 tokens (finish_reason=stop)"]
            if concurrency == self.broken_at
            else []
        )
        return (
            Goodput(good=good, requests=REQUESTS, duration_s=float(concurrency)),
            FixedWindow(100.0 * concurrency, violations),
        )


PASS_WINDOWS = 5  # all-good windows of 10 a pass needs: 42 good requests at 97.5%
MISS_WINDOWS = 2  # all-bad windows of 10 a miss needs: the least a step takes


@pytest.mark.parametrize(
    ("capacity", "maximum", "navigated", "bracket"),
    [
        (5, 16, [1, 2, 4, 8, 6, 5], (5, 6)),
        (4, 16, [1, 2, 4, 8, 6, 5], (4, 5)),
        (11, 16, [1, 2, 4, 8, 16, 12, 10, 11], (11, 12)),
        (1, 16, [1, 2], (1, 2)),
        (2, 3, [1, 2, 3], (2, 3)),
        (16, 16, [1, 2, 4, 8, 16], (16, None)),
        (100, 6, [1, 2, 4, 6], (6, None)),
        (100, 1, [1], (1, None)),
    ],
)
def test_navigates_by_single_windows_then_decides_the_boundary_with_more(
    capacity: int,
    maximum: int,
    navigated: list[int],
    bracket: tuple[int, int | None],
) -> None:
    curve = Curve(capacity=capacity)
    result = find_capacity(curve, knob=Knob.concurrency(maximum), target=0.9)
    last_pass, first_fail = bracket
    decided = ([] if first_fail is None else [first_fail] * (MISS_WINDOWS - 1)) + [last_pass] * (
        PASS_WINDOWS - 1
    )
    assert curve.tried == navigated + decided
    assert [s.concurrency for s in result.steps] == curve.tried
    assert result.capacity == last_pass and result.bracket == bracket and result.error is None
    # a window passes when its step, over its windows so far, surely passes: only the last
    outcomes = [(s.concurrency, s.outcome) for s in result.steps if s.interval]
    assert outcomes[: len(navigated)] == [(c, "undecided") for c in navigated]
    assert outcomes[-1] == (last_pass, "pass")
    assert [s.passed for s in result.steps] == [False] * (len(curve.tried) - 1) + [True]
    if first_fail is not None:
        assert (first_fail, "miss") in outcomes
    step = result.capacity_step
    assert step is not None and step.concurrency == last_pass and step.passed
    assert step.interval is not None and step.interval.windows == PASS_WINDOWS
    assert (step.interval.good, step.interval.requests) == (50, 50)
    assert step.slo_attainment == 1.0 and step.goodput_rps == REQUESTS / last_pass
    if first_fail is None:
        assert result.reason is not None
        assert result.reason.startswith(
            f"meets the SLO at the server's maximum concurrency "
            f"{maximum}: the capacity is at least {maximum}"
        )
    else:
        assert result.reason is None


def test_surely_missing_at_concurrency_one_is_capacity_zero_with_a_reason() -> None:
    curve = Curve({1: 5})
    result = find_capacity(curve, knob=Knob.concurrency(16), target=0.9)
    assert curve.tried == [1, 1]
    assert (result.capacity, result.bracket, result.capacity_step) == (0, (0, 1), None)
    assert result.reason == (
        "surely misses the SLO even at concurrency 1: 50% of its requests "
        "met it (10/20), 90% needed"
    )


def test_a_step_at_the_target_stays_inconclusive_and_widens_the_interval() -> None:
    # 9 of 10 at c2 and c3 is exactly the target: no number of windows shows it is reached
    curve = Curve({1: 10, 2: 9, 4: 0, 3: 9})
    result = find_capacity(curve, knob=Knob.concurrency(8), target=0.9)
    windows = 6  # a step's most windows where 10 requests a window need 5 to pass: 5 + 1
    assert curve.tried == [1, 2, 4, 3, 4] + [3] * (windows - 1) + [2] * (windows - 1) + [1] * (
        PASS_WINDOWS - 1
    )
    assert result.bracket == (1, 4) and result.inconclusive == (2, 3)
    assert result.interval_text() == "1–3"
    assert result.reason == (
        "the capacity lies in 1–3; inconclusive at c2, c3 after their most windows"
    )
    last = result.steps[-1 - (PASS_WINDOWS - 1)]
    assert last.interval is not None and last.outcome == "inconclusive"
    assert last.to_dict()["attainment_interval"] == [last.interval.low, last.interval.high]


def test_windows_that_disagree_count_as_fewer_requests() -> None:
    # 10 and 4 of 10: the spread between windows is a design effect of 8.6, so the 20
    # requests weigh as 2.3 independent ones and the step cannot be decided from them
    alike, apart = (
        windows_attainment([(7, 10), (7, 10)], 0.975),
        windows_attainment([(10, 10), (4, 10)], 0.975),
    )
    assert alike.design_effect == 1.0 and alike.share == apart.share == 0.7
    assert apart.design_effect == pytest.approx(8.5714, rel=1e-4)
    assert apart.low < alike.low and apart.high > alike.high
    assert alike.decide(0.9) is StepOutcome.MISS and apart.decide(0.9) is StepOutcome.INCONCLUSIVE
    assert windows_attainment([(9, 10)], 0.9) == attainment_interval(9, 10, 0.9)
    assert apart.text() == (
        "70.0% (14/20 in 2 windows, design effect 8.57), 97.5% CI "
        f"[{apart.low:.1%}, {apart.high:.1%}]"
    )


def test_a_curve_that_is_not_monotonic_gives_the_crossing_the_bisection_meets() -> None:
    # passes at 1, 2, misses at 4, passes again at 8: growth stops at the first miss
    curve = Curve({1: 10, 2: 10, 4: 0, 3: 10, 8: 10})
    result = find_capacity(curve, knob=Knob.concurrency(16), target=0.9)
    assert curve.tried[:4] == [1, 2, 4, 3] and result.bracket == (3, 4)


@pytest.mark.parametrize(
    ("broken_at", "tried", "last_pass"), [(1, [1], 0), (4, [1, 2, 4], 2), (6, [1, 2, 4, 8, 6], 4)]
)
def test_a_broken_window_stops_the_search_without_a_capacity(
    broken_at: int,
    tried: list[int],
    last_pass: int,
) -> None:
    curve = Curve(capacity=5, broken_at=broken_at)
    result = find_capacity(curve, knob=Knob.concurrency(16), target=0.9)
    assert curve.tried == tried
    assert result.capacity is None and result.bracket is None and result.capacity_step is None
    assert result.last_pass == last_pass
    assert result.error == (
        f"the window at concurrency {broken_at} broke its rules: request 3 "
        "produced 12 of 256 tokens (finish_reason=stop); no capacity is "
        "concluded from a broken window"
    )
    assert result.reason == result.error
    assert result.steps[-1].broken and not result.steps[-1].passed


def test_each_window_is_reported_as_it_is_measured() -> None:
    seen: list[tuple[int, int]] = []
    curve = Curve(capacity=2)
    find_capacity(
        curve,
        knob=Knob.concurrency(4),
        target=0.9,
        on_step=lambda step: seen.append((step.concurrency, len(curve.tried))),
    )
    assert seen == [(c, i + 1) for i, c in enumerate(curve.tried)]
    assert curve.tried[:4] == [1, 2, 4, 3]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="max_concurrency must be a positive integer"):
        find_capacity(Curve(capacity=1), knob=Knob.concurrency(0), target=0.9)
    with pytest.raises(ValueError, match=r"attainment target must be a share in \(0, 1\]"):
        find_capacity(Curve(capacity=1), knob=Knob.concurrency(4), target=1.5)
    with pytest.raises(ValueError, match="min_windows <= max_windows"):
        find_capacity(
            Curve(capacity=1),
            knob=Knob.concurrency(4),
            target=0.9,
            policy=StepPolicy(min_windows=3, max_windows=2),
        )


def test_step_line() -> None:
    result = find_capacity(Curve({1: 10, 2: 0}), knob=Knob.concurrency(4), target=0.9)
    assert step_line("m", 2, result.steps[1], 0.9) == (
        "capacity m: window 2, c2 (its 1st): SLO met by 0.0% (0/10); navigating: below the 90% "
        "needed; 200.0 tokens/s, goodput 0.00 req/s"
    )
    decided = result.steps[2]
    assert decided.interval is not None
    assert step_line("m", 3, decided, 0.9) == (
        "capacity m: window 3, c2 (its 2nd): SLO met by 0.0% (0/10); step c2 0/20 = 0.0%, "
        f"97.5% CI [0.0%, {decided.interval.high:.1%}] (design effect 1.00), 90% needed: miss; "
        "200.0 tokens/s, goodput 0.00 req/s"
    )


def test_the_server_s_own_limit_wins_over_the_sweep() -> None:
    assert server_max_concurrency({"total_slots": 4}, 16) == (4, "the server's total_slots")
    assert server_max_concurrency({"max_num_seqs": 8}, 16) == (8, "the server's max_num_seqs")
    assert server_max_concurrency({"total_slots": None, "model_entry": {}}, 16) == (
        16,
        "the sweep's max_num_seqs",
    )
    assert server_max_concurrency({"total_slots": True}, 2) == (2, "the sweep's max_num_seqs")


# --------------------------------------------------------------------------- comparing


def bracket(
    last_pass: int, first_fail: int | None, confidence: float | None = INTERVAL_CONFIDENCE
) -> SearchBracket:
    return SearchBracket(last_pass, last_pass, first_fail, confidence)


@pytest.mark.parametrize(
    ("candidate", "reference", "ratio", "low", "high", "verdict"),
    [
        (bracket(3, 4), bracket(1, 2), 3.0, 1.5, 4.0, Verdict.BETTER),
        (bracket(1, 2), bracket(3, 4), 1 / 3, 0.25, 2 / 3, Verdict.WORSE),
        (bracket(3, 4), bracket(3, 4), 1.0, 0.75, 4 / 3, Verdict.MATCHES),
        (bracket(0, 1), bracket(8, 9), 0.0, 0.0, 1 / 8, Verdict.WORSE),
        (bracket(16, None), bracket(8, 9), 2.0, 16 / 9, None, Verdict.BETTER),
        (bracket(4, 5), bracket(16, None), 0.25, 0.0, 5 / 16, Verdict.WORSE),
        (bracket(16, None), bracket(16, None), 1.0, 0.0, None, Verdict.INCONCLUSIVE),
        # ratio bracket 1.06–1.27: above 1, but not wholly beyond the 10% tolerance
        (bracket(17, 18), bracket(14, 16), 17 / 14, 17 / 16, 18 / 14, Verdict.INCONCLUSIVE),
    ],
)
def test_the_ratio_bracket_and_its_verdict(
    candidate: SearchBracket,
    reference: SearchBracket,
    ratio: float,
    low: float,
    high: float | None,
    verdict: Verdict,
) -> None:
    found = capacity_ratio(candidate, reference)
    assert found.ratio == pytest.approx(ratio)
    assert found.low == pytest.approx(low)
    assert found.high == (math.inf if high is None else pytest.approx(high))
    assert found.as_dict()["bracket_high"] == (None if high is None else pytest.approx(high))
    assert decide_capacity_verdict(found, 0.10) is verdict


def test_the_ratio_interval_is_at_the_bonferroni_level_and_an_old_bracket_has_none() -> None:
    found = capacity_ratio(bracket(3, 4), bracket(1, 2))
    assert found.confidence == pytest.approx(0.90)
    assert found.as_dict()["confidence"] == pytest.approx(0.90)
    # brackets of older one-window searches: the same bounds, no level, no verdict
    old = capacity_ratio(bracket(3, 4, None), bracket(1, 2, None))
    assert (old.low, old.high, old.confidence) == (found.low, found.high, None)
    assert "confidence" not in old.as_dict()
    assert decide_capacity_verdict(old, 0.10) is Verdict.INCONCLUSIVE


def test_verdict_rules_follow_the_throughput_ratio_rules() -> None:
    # 1.06–1.27 with no tolerance: wholly above 1, better
    found = capacity_ratio(bracket(17, 18), bracket(14, 16))
    assert decide_capacity_verdict(found, 0.0) is Verdict.BETTER
    # 1.02–1.08: inside ±10% without covering 1, equivalent
    close = capacity_ratio(bracket(51, 52), bracket(48, 50))
    assert close.low > 1.0 and close.high < 1.1
    assert decide_capacity_verdict(close, 0.10) is Verdict.EQUIVALENT
    with pytest.raises(ValueError, match="ratio tolerance"):
        decide_capacity_verdict(found, 1.0)


def test_a_reference_with_capacity_zero_cannot_be_divided_by() -> None:
    with pytest.raises(ValueError, match="the reference meets the SLO at no concurrency"):
        capacity_ratio(bracket(3, 4), bracket(0, 1))


def measured_bracket(stats: dict[str, Any]) -> SearchBracket:
    return CapacityStats.from_dict(stats).measured_bracket()


def test_brackets_read_back_from_stats() -> None:
    assert measured_bracket({"capacity": 3, "bracket": [3, 4]}) == bracket(3, 4, None)
    assert measured_bracket({"capacity": 16, "bracket": [16, None], "confidence": 0.95}) == bracket(
        16, None, 0.95
    )
    assert bracket(16, None).text() == "[16, open]" and bracket(3, 4).text() == "[3, 4]"
    for stats in (
        {"capacity": None, "bracket": None},
        {"capacity": 3, "bracket": [2, 4]},
        {"capacity": 3, "bracket": [3, 3]},
        {"capacity": 3},
    ):
        with pytest.raises(ValueError):
            measured_bracket(stats)
