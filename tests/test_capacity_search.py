"""The capacity search and the comparison of two searches, on deterministic steps (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_modelsweep.core.measurements import CapacityStats
from pytest_modelsweep.core.slo import Goodput
from pytest_modelsweep.core.stats import Verdict
from pytest_modelsweep.workloads.capacity import (
    CapacityBracket,
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


class Curve:
    """A server whose share of good requests falls as concurrency rises: at ``c`` in
    flight, ``good(c)`` of 10 requests meet the SLO; windows last one second per request
    in flight. Records every concurrency measured."""

    def __init__(self, good: dict[int, int] | None = None, *, capacity: int | None = None,
                 broken_at: int | None = None) -> None:
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
        violations = ["request 3 produced 12 of 256 tokens (finish_reason=stop)"] \
            if concurrency == self.broken_at else []
        return (Goodput(good=good, requests=REQUESTS, duration_s=float(concurrency)),
                FixedWindow(100.0 * concurrency, violations))


@pytest.mark.parametrize(("capacity", "maximum", "tried", "bracket"), [
    (5, 16, [1, 2, 4, 8, 6, 5], (5, 6)),
    (4, 16, [1, 2, 4, 8, 6, 5], (4, 5)),
    (11, 16, [1, 2, 4, 8, 16, 12, 10, 11], (11, 12)),
    (1, 16, [1, 2], (1, 2)),
    (2, 3, [1, 2, 3], (2, 3)),
    (16, 16, [1, 2, 4, 8, 16], (16, None)),
    (100, 6, [1, 2, 4, 6], (6, None)),
    (100, 1, [1], (1, None)),
])
def test_grows_geometrically_then_bisects_to_adjacent_steps(
    capacity: int, maximum: int, tried: list[int], bracket: tuple[int, int | None],
) -> None:
    curve = Curve(capacity=capacity)
    result = find_capacity(curve, max_concurrency=maximum, target=0.9)
    assert curve.tried == tried
    assert [s.concurrency for s in result.steps] == tried
    assert result.capacity == bracket[0] and result.bracket == bracket
    assert [s.passed for s in result.steps] == [c <= capacity for c in tried]
    assert result.error is None
    step = result.capacity_step
    assert step is not None and step.concurrency == bracket[0] and step.passed
    assert step.slo_attainment == 1.0 and step.goodput_rps == REQUESTS / bracket[0]
    assert step.output_tokens_per_s == 100.0 * bracket[0]
    if bracket[1] is None:
        assert result.reason is not None
        assert result.reason.startswith(f"meets the SLO at the server's maximum concurrency "
                                        f"{maximum}: the capacity is at least {maximum}")
    else:
        assert result.reason is None


def test_missing_at_concurrency_one_is_capacity_zero_with_a_reason() -> None:
    curve = Curve({1: 8})
    result = find_capacity(curve, max_concurrency=16, target=0.9)
    assert curve.tried == [1]
    assert (result.capacity, result.bracket, result.capacity_step) == (0, (0, 1), None)
    assert result.reason == ("misses the SLO even at concurrency 1: 80% of its requests met it "
                             "(8/10), 90% needed")


def test_the_target_is_inclusive_and_steps_keep_their_figures() -> None:
    # exactly 90% passes; 80% misses
    result = find_capacity(Curve({1: 10, 2: 9, 4: 8, 3: 9}), max_concurrency=8, target=0.9)
    assert [(s.concurrency, s.slo_attainment, s.passed) for s in result.steps] == [
        (1, 1.0, True), (2, 0.9, True), (4, 0.8, False), (3, 0.9, True)]
    assert result.bracket == (3, 4)
    assert result.steps[2].to_dict() == {
        "concurrency": 4, "slo_attainment": 0.8, "good": 8, "requests": 10, "goodput_rps": 2.0,
        "output_tokens_per_s": 400.0, "duration_s": 4.0, "passed": False, "violations": []}


def test_a_curve_that_is_not_monotonic_gives_the_crossing_the_bisection_meets() -> None:
    # passes at 1, 2, misses at 4, passes again at 8: growth stops at the first miss
    curve = Curve({1: 10, 2: 10, 4: 0, 3: 10, 8: 10})
    result = find_capacity(curve, max_concurrency=16, target=0.9)
    assert curve.tried == [1, 2, 4, 3] and result.bracket == (3, 4)


@pytest.mark.parametrize(("broken_at", "tried", "last_pass"), [
    (1, [1], 0), (4, [1, 2, 4], 2), (6, [1, 2, 4, 8, 6], 4)])
def test_a_broken_window_stops_the_search_without_a_capacity(
    broken_at: int, tried: list[int], last_pass: int,
) -> None:
    curve = Curve(capacity=5, broken_at=broken_at)
    result = find_capacity(curve, max_concurrency=16, target=0.9)
    assert curve.tried == tried
    assert result.capacity is None and result.bracket is None and result.capacity_step is None
    assert result.last_pass == last_pass
    assert result.error == (f"the window at concurrency {broken_at} broke its rules: request 3 "
                            "produced 12 of 256 tokens (finish_reason=stop); no capacity is "
                            "concluded from a broken window")
    assert result.reason == result.error
    assert result.steps[-1].broken and not result.steps[-1].passed


def test_each_step_is_reported_as_it_is_measured() -> None:
    seen: list[tuple[int, int]] = []
    curve = Curve(capacity=2)
    find_capacity(curve, max_concurrency=4, target=0.9,
                  on_step=lambda step: seen.append((step.concurrency, len(curve.tried))))
    assert seen == [(1, 1), (2, 2), (4, 3), (3, 4)]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="max_concurrency must be a positive integer"):
        find_capacity(Curve(capacity=1), max_concurrency=0, target=0.9)
    with pytest.raises(ValueError, match=r"attainment target must be a share in \(0, 1\]"):
        find_capacity(Curve(capacity=1), max_concurrency=4, target=1.5)


def test_step_line() -> None:
    result = find_capacity(Curve({1: 10, 2: 8}), max_concurrency=4, target=0.9)
    assert step_line("m", 2, result.steps[1], 0.9) == (
        "capacity m: step 2, c2: SLO met by 80.0% (8/10), 90% needed: miss; 200.0 tokens/s, "
        "goodput 4.00 req/s")


def test_the_server_s_own_limit_wins_over_the_sweep() -> None:
    assert server_max_concurrency({"total_slots": 4}, 16) == (4, "the server's total_slots")
    assert server_max_concurrency({"max_num_seqs": 8}, 16) == (8, "the server's max_num_seqs")
    assert server_max_concurrency({"total_slots": None, "model_entry": {}}, 16) == (
        16, "the sweep's max_num_seqs")
    assert server_max_concurrency({"total_slots": True}, 2) == (2, "the sweep's max_num_seqs")


# --------------------------------------------------------------------------- comparing


def bracket(last_pass: int, first_fail: int | None) -> CapacityBracket:
    return CapacityBracket(last_pass, last_pass, first_fail)


@pytest.mark.parametrize(("candidate", "reference", "ratio", "low", "high", "verdict"), [
    (bracket(3, 4), bracket(1, 2), 3.0, 1.5, 4.0, Verdict.BETTER),
    (bracket(1, 2), bracket(3, 4), 1 / 3, 0.25, 2 / 3, Verdict.WORSE),
    (bracket(3, 4), bracket(3, 4), 1.0, 0.75, 4 / 3, Verdict.MATCHES),
    (bracket(0, 1), bracket(8, 9), 0.0, 0.0, 1 / 8, Verdict.WORSE),
    (bracket(16, None), bracket(8, 9), 2.0, 16 / 9, None, Verdict.BETTER),
    (bracket(4, 5), bracket(16, None), 0.25, 0.0, 5 / 16, Verdict.WORSE),
    (bracket(16, None), bracket(16, None), 1.0, 0.0, None, Verdict.INCONCLUSIVE),
    # ratio bracket 1.06–1.27: above 1, but not wholly beyond the 10% tolerance
    (bracket(17, 18), bracket(14, 16), 17 / 14, 17 / 16, 18 / 14, Verdict.INCONCLUSIVE),
])
def test_the_ratio_bracket_and_its_verdict(
    candidate: CapacityBracket, reference: CapacityBracket, ratio: float, low: float,
    high: float | None, verdict: Verdict,
) -> None:
    found = capacity_ratio(candidate, reference)
    assert found.ratio == pytest.approx(ratio)
    assert found.low == pytest.approx(low)
    assert found.high == (math.inf if high is None else pytest.approx(high))
    assert found.as_dict()["bracket_high"] == (None if high is None else pytest.approx(high))
    assert decide_capacity_verdict(found, 0.10) is verdict


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


def measured_bracket(stats: dict[str, Any]) -> CapacityBracket:
    return CapacityStats.from_dict(stats).measured_bracket()


def test_brackets_read_back_from_stats() -> None:
    assert measured_bracket({"capacity": 3, "bracket": [3, 4]}) == bracket(3, 4)
    assert measured_bracket({"capacity": 16, "bracket": [16, None]}) == bracket(16, None)
    assert bracket(16, None).text() == "[16, open]" and bracket(3, 4).text() == "[3, 4]"
    for stats in ({"capacity": None, "bracket": None}, {"capacity": 3, "bracket": [2, 4]},
                  {"capacity": 3, "bracket": [3, 3]}, {"capacity": 3}):
        with pytest.raises(ValueError):
            measured_bracket(stats)
