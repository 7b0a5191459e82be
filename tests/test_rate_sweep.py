"""The SLO search over the request rate: its step decisions (Clopper-Pearson) and the search,
on deterministic steps (pure).

The end-to-end sweep against a queueing fake server is in ``test_open_loop.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import pytest
from scipy.stats import binom

from pytest_modelsweep.core.measurements import (
    RATE,
    SearchStats,
    SearchStep,
    StepOutcome,
)
from pytest_modelsweep.core.slo import Goodput
from pytest_modelsweep.core.stats.attainment import (
    attainment_interval,
    min_requests_to_pass,
    requests_per_step_problem,
)
from pytest_modelsweep.workloads.slo_search import (
    RATE_POLICY,
    Knob,
    SearchResult,
    find_capacity,
    step_line,
)

REQUESTS = 40


@pytest.mark.parametrize(("good", "n"), [(1, 10), (28, 30), (36, 40), (5, 7), (100, 240)])
@pytest.mark.parametrize("confidence", [0.90, 0.95])
def test_clopper_pearson_bounds_are_the_exact_binomial_tails(
    good: int, n: int, confidence: float
) -> None:
    interval = attainment_interval(good, n, confidence)
    tail = (1 - confidence) / 2
    assert binom.sf(good - 1, n, interval.low) == pytest.approx(tail, rel=1e-6)
    assert binom.cdf(good, n, interval.high) == pytest.approx(tail, rel=1e-6)
    assert interval.low < good / n < interval.high


def test_clopper_pearson_ends() -> None:
    none = attainment_interval(0, 20)
    assert none.low == 0.0 and none.high == pytest.approx(1 - 0.05 ** (1 / 20))
    every = attainment_interval(20, 20)
    assert every.high == 1.0 and every.low == pytest.approx(0.05 ** (1 / 20))
    with pytest.raises(ValueError, match="need 0 <= good <= requests"):
        attainment_interval(3, 2)
    with pytest.raises(ValueError, match="confidence must be strictly between 0 and 1"):
        attainment_interval(1, 2, 1.0)


def test_decisions_from_the_interval() -> None:
    assert attainment_interval(40, 40).decide(0.9) is StepOutcome.PASS  # low 0.928
    assert attainment_interval(37, 40).decide(0.9) is StepOutcome.INCONCLUSIVE
    assert attainment_interval(30, 40).decide(0.9) is StepOutcome.MISS  # high 0.856
    assert attainment_interval(28, 30).text() == "93.3% (28/30), 90% CI [80.5%, 98.8%]"


def test_fewest_requests_that_can_pass() -> None:
    assert min_requests_to_pass(0.9) == 29  # ln 0.05 / ln 0.9 = 28.4
    assert attainment_interval(29, 29).decide(0.9) is StepOutcome.PASS
    assert attainment_interval(28, 28).decide(0.9) is StepOutcome.INCONCLUSIVE
    assert min_requests_to_pass(0.5, 0.95) == 6
    assert requests_per_step_problem(29, 0.9) is None
    assert requests_per_step_problem(20, 0.9) == (
        "20 requests per step can never show 90% SLO attainment at 90% confidence (even all "
        "good gives a lower bound below it); use at least 29 timed requests per step"
    )
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        min_requests_to_pass(1.0)


@dataclass
class FixedWindow:
    """A window whose figures the step function sets."""

    output_tokens_per_s: float
    offered_rps: float | None
    achieved_rps: float | None
    saturated: bool = False
    saturation_reason: str | None = None
    violations: list[str] = field(default_factory=list)


class Server:
    """Good requests out of :data:`REQUESTS` by rate; saturated above ``saturates_above``."""

    def __init__(
        self,
        good: dict[float, int] | None = None,
        *,
        meets_up_to: float = math.inf,
        saturates_above: float = math.inf,
        broken_at: float | None = None,
    ) -> None:
        self.good = good or {}
        self.meets_up_to = meets_up_to
        self.saturates_above = saturates_above
        self.broken_at = broken_at
        self.tried: list[float] = []

    def __call__(self, rate: float) -> tuple[Goodput, FixedWindow]:
        self.tried.append(rate)
        good = self.good.get(rate, REQUESTS if rate <= self.meets_up_to else 0)
        saturated = rate > self.saturates_above
        achieved = min(rate, self.saturates_above) if saturated else rate
        window = FixedWindow(
            10.0 * rate,
            rate,
            achieved,
            saturated,
            f"saturated: achieved {achieved:.3g} req/s of {rate:.3g} offered"
            if saturated
            else None,
            ["request 2 failed: HTTP 500"] if rate == self.broken_at else [],
        )
        return Goodput(good, REQUESTS, REQUESTS / rate), window


def sweep(
    server: Server,
    start: float = 1,
    maximum: float = 100,
    *,
    growth: float = 2.0,
    resolution: float = 0.10,
) -> SearchResult:
    return find_capacity(
        server, knob=Knob.rate(start, maximum, growth, resolution), target=0.9, policy=RATE_POLICY
    )


def test_grows_then_bisects_to_the_resolution() -> None:
    server = Server(meets_up_to=5.0)
    result = sweep(server, resolution=0.1)
    assert server.tried[:4] == [1, 2, 4, 8]
    assert [s.outcome for s in result.steps[:4]] == [StepOutcome.PASS] * 3 + [StepOutcome.MISS]
    assert result.bracket is not None
    low, high = result.bracket
    assert high is not None and low <= 5.0 < high and high / low <= 1.1
    assert result.capacity == low and result.error is None
    assert result.saturated_at is None and result.inconclusive == ()
    assert result.stopped.startswith(f"SLO attainment below 90% at {high:.3g} req/s: 0.0% (0/40)")
    # geometric bisection: each probe is the geometric mean of the bracket it splits
    assert server.tried[4] == pytest.approx(math.sqrt(4 * 8))
    # every step decided at its first window: no window taken twice
    assert len(set(server.tried)) == len(server.tried)


def test_a_saturated_step_fails_even_when_the_slo_holds() -> None:
    server = Server(saturates_above=6.0)
    result = sweep(server, resolution=1.5)
    assert server.tried == [1, 2, 4, 8]
    step = result.steps[-1]
    assert step.outcome is StepOutcome.SATURATED and step.interval is not None
    assert step.interval.decide(0.9) is StepOutcome.PASS  # its requests did meet the SLO
    assert result.bracket == (4, 8) and result.saturated_at == 8
    assert result.stopped == "saturated at 8 req/s (saturated: achieved 6 req/s of 8 offered)"


def test_max_rate_that_passes_leaves_the_bracket_open() -> None:
    result = sweep(Server(), 2, 10)
    assert [s.rate for s in result.steps] == [2, 4, 8, 10]
    assert result.bracket == (10, None)
    assert result.stopped == "the SLO was met at max_rps 10 req/s: the capacity is at least that"


def test_a_miss_at_the_start_rate_is_capacity_zero() -> None:
    result = sweep(Server(meets_up_to=0.5), 1, 10)
    assert [s.rate for s in result.steps] == [1]
    assert result.capacity == 0.0 and result.bracket == (0.0, 1)
    assert isinstance(result.capacity, float)


def test_an_inconclusive_boundary_step_takes_more_windows_then_stays_inconclusive() -> None:
    server = Server({4.0: 37}, meets_up_to=4.0)  # 37/40 straddles 90%, window after window
    result = sweep(server)
    assert [s.outcome for s in result.steps[:4]] == [
        StepOutcome.PASS,
        StepOutcome.PASS,
        StepOutcome.INCONCLUSIVE,
        StepOutcome.MISS,
    ]
    assert server.tried.count(4.0) == 4  # its most windows, pooled
    pooled = [s for s in result.steps if s.rate == 4.0][-1].interval
    assert pooled is not None and (pooled.good, pooled.requests, pooled.windows) == (148, 160, 4)
    assert result.bracket is not None and result.bracket[0] == 2
    assert result.inconclusive == (4.0,)
    assert result.stopped.endswith("; inconclusive at 4 req/s after their most windows")


def test_an_inconclusive_step_below_a_later_pass_does_not_stop_the_refinement() -> None:
    server = Server({2.0: 37}, meets_up_to=5.0)  # noise: inconclusive at 2, passes at 4
    result = sweep(server, resolution=0.5)
    assert [s.outcome for s in result.steps][:4] == [
        StepOutcome.PASS,
        StepOutcome.INCONCLUSIVE,
        StepOutcome.PASS,
        StepOutcome.MISS,
    ]
    assert len(result.steps) > 4 and result.bracket is not None
    assert result.bracket[0] == 4 and result.bracket[1] == pytest.approx(math.sqrt(32))
    assert server.tried.count(2.0) == 1  # below the capacity's step: never decided


def test_a_boundary_step_decided_by_its_second_window() -> None:
    good = iter([39, 40])  # 39/40 straddles 90%; with 40/40 more, 79/80 passes
    server = Server(meets_up_to=4.0)
    server.good = {4.0: 0}
    measure = server.__call__

    def noisy(rate: float) -> tuple[Goodput, FixedWindow]:
        if rate == 4.0:
            server.good[4.0] = next(good)
        return measure(rate)

    result = find_capacity(noisy, knob=Knob.rate(1, 100), target=0.9, policy=RATE_POLICY)
    assert server.tried.count(4.0) == 2
    assert result.capacity == 4.0 and result.inconclusive == ()
    decided = result.capacity_step
    assert decided is not None and decided.interval is not None
    assert decided.interval.windows == 2 and decided.outcome is StepOutcome.PASS


def test_a_broken_window_concludes_nothing() -> None:
    result = sweep(Server(broken_at=4))
    assert result.capacity is None and result.bracket is None
    assert result.error == (
        "the window at 4 req/s broke its rules: request 2 failed: HTTP 500; "
        "no capacity is concluded from a broken window"
    )
    assert result.stopped == result.error
    assert result.steps[-1].outcome is StepOutcome.BROKEN


def test_bad_arguments() -> None:
    for kwargs, message in [
        ({"start_rps": 0.0}, "start_rps must be a number above 0"),
        ({"max_rps": 0.5}, "max_rps 0.5 is below start_rps 1"),
        ({"growth": 1.0}, "growth must be a number above 1"),
        ({"resolution": math.nan}, "resolution must be a number above 0"),
    ]:
        args: dict[str, Any] = {"start_rps": 1.0, "max_rps": 10.0, **kwargs}
        with pytest.raises(ValueError, match=message):
            Knob.rate(**args)
    with pytest.raises(ValueError, match=r"the attainment target must be a share in \(0, 1\]"):
        find_capacity(Server(), knob=Knob.rate(1, 10), target=1.5, policy=RATE_POLICY)


def test_step_line_and_record() -> None:
    result = sweep(Server(saturates_above=3.0), 2, resolution=5)
    line = step_line("smollm2-135m", 2, result.steps[1], 0.9)
    assert line == (
        "rate sweep smollm2-135m: step 2, 4 req/s: SLO met by 100.0% (40/40), 90% CI "
        "[92.8%, 100.0%], 90% needed: saturated; achieved 3 of 4 req/s, "
        "40.0 tokens/s"
    )
    assert result.capacity == 2 and result.bracket == (2, 4)
    steps = [step.to_dict() for step in result.steps]
    assert [step["knob"] for step in steps] == ["rate", "rate"]
    assert steps[1]["outcome"] == "saturated"
    assert steps[0]["interval"]["method"] == "clopper-pearson"
    assert [SearchStep.from_dict(step) for step in steps] == list(result.steps)


def test_each_knob_writes_the_same_record() -> None:
    """One record family, one layout: a rate sweep and a concurrency search write their
    fields' names, the knob among them, and read back as they were."""
    rate = SearchStats(
        knob=RATE,
        capacity=2.0,
        bracket=(2.0, 4.0),
        confidence=0.9,
        target=0.9,
        start=1.0,
        maximum=8.0,
        reason="saturated at 4 req/s (x)",
        steps=sweep(Server(saturates_above=3.0), 2, resolution=5).steps,
    )
    concurrency = SearchStats(
        capacity=3,
        bracket=(3, 4),
        confidence=0.95,
        inconclusive=(),
        source="the server's total_slots",
    )
    fields_named = [spec.name for spec in fields(SearchStats)]
    for search in (rate, concurrency):
        written = search.to_dict()
        assert list(written) == fields_named
        assert SearchStats.from_dict(written) == search
    assert rate.to_dict()["knob"] == "rate" and concurrency.to_dict()["knob"] == "concurrency"
    assert rate.saturated_at == 4.0 and rate.stopped == "saturated at 4 req/s (x)"
    assert SearchStats.from_dict(rate.to_dict()).measured_bracket().text() == "[2, 4]"
    assert SearchStats.from_dict(concurrency.to_dict()).measured_bracket().text() == "[3, 4]"
