"""Capacity under an SLO: the most load at which enough requests meet it, searched over a knob.

The knob (:class:`Knob`) is the requests in flight (``-m capacity``) or the open-loop request
rate (``-m rate_capacity``). :func:`find_capacity` *navigates* with one window a value (growth,
then bisection), then *decides* the boundary by the pooled attainment's interval
(:class:`StepPolicy`); the capacity is the highest value that surely passed. A saturated
window fails; a window that broke the throughput rules stops the search.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.cost import Pricing, usd_per_million_output_tokens
from ..core.errors import MeasurementError
from ..core.measurements import (
    CONCURRENCY,
    RATE,
    AtCapacity,
    Contention,
    Saturation,
    SearchBracket,
    SearchRatio,
    SearchStats,
    SearchStep,
    SearchWindow,
    StepOutcome,
    ThroughputWindow,
)
from ..core.slo import Goodput, Slo
from ..core.stats import Verdict, decide_ratio_verdict
from ..core.stats.attainment import (
    attainment_interval,
    min_requests_to_pass,
    requests_per_step_problem,
    windows_attainment,
)
from ..core.stats.verdicts import check_confidence

if TYPE_CHECKING:
    from ..core.settings import BenchSettings
    from ..serving.endpoint import Endpoint
    from .throughput import ThroughputResult

SERVER_LIMIT_KEYS = ("max_num_seqs", "total_slots")
"""``server_settings`` keys of the most sequences a server runs at once (vLLM, llama.cpp)."""

NEEDS_SLO = {
    CONCURRENCY: "capacity needs --slo, e.g. --slo ttft=500ms,tpot=50ms",
    RATE: "capacity in req/s needs --slo, e.g. --slo ttft=2000ms,tpot=100ms",
}
"""Why a knob's capacity tests skip in a run without ``--slo``."""

RULE_INTERVAL = {
    CONCURRENCY: "capacity-interval-beyond-tolerance",
    RATE: "rate-capacity-interval-beyond-tolerance",
}
"""The rule of :func:`decide_capacity_verdict`, as recorded with a knob's verdict."""

RATE_CONFIDENCE = 0.90
"""Two-sided level of each rate step's interval: each one-sided error at most 5%
(``benches/perf/attainment_interval_simulation.py``)."""

DEFAULT_GROWTH = 2.0
DEFAULT_RESOLUTION = 0.10
"""A rate sweep's bisection stops once first fail ÷ last pass ≤ 1 + this."""

WARMUP_REQUESTS = 2
"""Closed-loop warm-up requests before a rate sweep's first window (none before the others:
the server is warm by then)."""


# --------------------------------------------------------------------------- the search
@dataclass(frozen=True)
class Knob:
    """What an SLO search turns (CONCURRENCY or RATE): from ``start`` × ``growth`` up to
    ``maximum``, then bisected to adjacent integers (``resolution`` None) or geometrically
    until first fail ÷ last pass ≤ 1 + ``resolution``."""

    name: str
    start: float
    maximum: float
    growth: float = DEFAULT_GROWTH
    resolution: float | None = None

    @classmethod
    def concurrency(cls, maximum: int) -> Knob:
        """Requests in flight: 1, 2, 4, ... up to ``maximum``."""
        if isinstance(maximum, bool) or not isinstance(maximum, int) or maximum < 1:
            raise ValueError(f"max_concurrency must be a positive integer, got {maximum!r}")
        return cls(CONCURRENCY, 1, maximum)

    @classmethod
    def rate(
        cls,
        start_rps: float,
        max_rps: float,
        growth: float = DEFAULT_GROWTH,
        resolution: float = DEFAULT_RESOLUTION,
    ) -> Knob:
        """Open-loop requests per second: ``start_rps`` × ``growth`` ... up to ``max_rps``."""
        for name, value, above in (
            ("start_rps", start_rps, 0.0),
            ("max_rps", max_rps, 0.0),
            ("growth", growth, 1.0),
            ("resolution", resolution, 0.0),
        ):
            if math.isnan(value) or math.isinf(value) or not value > above:
                raise ValueError(f"{name} must be a number above {above:g}, got {value!r}")
        if max_rps < start_rps:
            raise ValueError(f"max_rps {max_rps:g} is below start_rps {start_rps:g}")
        return cls(RATE, float(start_rps), float(max_rps), growth, resolution)

    def grown(self, value: float) -> float:
        grown = value * self.growth
        return min(int(grown) if self.resolution is None else grown, self.maximum)

    def between(self, low: float, high: float) -> float | None:
        """The value that splits ``(low, high)``; None once they are close enough."""
        if self.resolution is None:
            return None if high - low <= 1 else (int(low) + int(high)) // 2
        return None if low <= 0 or high / low <= 1.0 + self.resolution else math.sqrt(low * high)

    def label(self, value: float) -> str:
        """``c4``, ``1.41 req/s``."""
        return f"c{int(value)}" if self.name == CONCURRENCY else f"{value:.3g} req/s"


def server_max_concurrency(server_settings: Mapping[str, Any], configured: int) -> tuple[int, str]:
    """The most requests the server runs at once, and where that figure came from: what the
    live server reports wins over the sweep's ``configured`` one."""
    for key in SERVER_LIMIT_KEYS:
        value = server_settings.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"the server's {key}"
    return configured, "the sweep's max_num_seqs"


@dataclass(frozen=True)
class StepPolicy:
    """How a step is decided: by the exact interval at ``confidence`` (two-sided) of its
    windows' pooled attainment, once it has ``min_windows``; undecided, it takes windows up to
    ``max_windows`` (or as many as a pass needs plus one), then stays inconclusive."""

    confidence: float = 0.975
    min_windows: int = 2
    max_windows: int = 4

    def windows_at(self, requests_per_window: int, target: float) -> int:
        """The most windows a step of ``requests_per_window`` requests takes."""
        if target >= 1.0:
            return self.max_windows
        needed = min_requests_to_pass(target, self.confidence)
        return max(
            self.max_windows, self.min_windows, math.ceil(needed / max(requests_per_window, 1)) + 1
        )

    @property
    def interval_confidence(self) -> float:
        """The level of the capacity interval its decisions give."""
        return 2 * self.confidence - 1


INTERVAL_CONFIDENCE = StepPolicy().interval_confidence
"""The level of a capacity interval [last pass, first miss), each end allowed 1 - 97.5%: 95%
(a ratio of two: 90%, Bonferroni; benches/perf/capacity_aa_simulation.py measures both)."""

RATE_POLICY = StepPolicy(RATE_CONFIDENCE, min_windows=1)
"""A rate step: decided from its first window at 90% (its open-loop windows are larger)."""


@dataclass(frozen=True)
class SearchResult:
    """What a search found: the capacity lies in ``[last_pass, first_fail)`` (0: none passed;
    None: none failed), ``inconclusive`` the undecided values between. With ``error`` (a
    broken window) no capacity is concluded; ``last_pass`` is what the clean windows showed."""

    knob: Knob
    target: float
    steps: tuple[SearchStep, ...]
    last_pass: float
    first_fail: float | None
    error: str | None = None
    policy: StepPolicy = field(default_factory=StepPolicy)
    inconclusive: tuple[float, ...] = ()

    @property
    def capacity(self) -> float | None:
        """The highest value that surely met the SLO; None when the search broke off."""
        return None if self.error is not None else self.last_pass

    @property
    def bracket(self) -> tuple[float, float | None] | None:
        """(surely passing, surely failing or None); None when the search broke off."""
        return None if self.error is not None else (self.last_pass, self.first_fail)

    @property
    def capacity_step(self) -> SearchStep | None:
        """The window that decided the step at the capacity (None: capacity 0 or unknown)."""
        if not self.capacity:
            return None
        return next(s for s in reversed(self.steps) if s.value == self.capacity and s.passed)

    @property
    def saturated_at(self) -> float | None:
        """The lowest value at which the server fell behind (None: it never did)."""
        values = [s.value for s in self.steps if s.outcome is StepOutcome.SATURATED]
        return min(values) if values else None

    def _undecided(self) -> str:
        if not self.inconclusive:
            return ""
        return (
            f"; inconclusive at {', '.join(self.knob.label(v) for v in self.inconclusive)} "
            "after their most windows"
        )

    @property
    def reason(self) -> str | None:
        """A concurrency search's line where one is needed: capacity 0, the maximum reached, an
        open or wide interval, broken off."""
        if self.error is not None:
            return self.error
        undecided, maximum = self._undecided(), int(self.knob.maximum)
        if self.last_pass == 0:
            decided = self._last_at(self.first_fail or min(s.value for s in self.steps)).interval
            met = (
                "n/a"
                if decided is None
                else (
                    f"{_share(decided.good / decided.requests)} of its requests met "
                    f"it ({decided.good}/{decided.requests})"
                )
            )
            sure = "surely misses" if self.first_fail == 1 else "is not shown to meet"
            return (
                f"{sure} the SLO even at concurrency 1: {met}, {_share(self.target)} "
                f"needed{undecided}"
            )
        if self.first_fail is None and self.last_pass >= maximum:
            return (
                f"meets the SLO at the server's maximum concurrency {maximum}: "
                f"the capacity is at least {maximum}, and the server runs "
                "no more requests at once"
            )
        if self.first_fail is None:
            return (
                f"no concurrency up to the maximum {maximum} surely missed the "
                f"SLO: the capacity is at least {int(self.last_pass)}{undecided}"
            )
        if undecided:
            return f"the capacity lies in {self.interval_text()}{undecided}"
        return None

    @property
    def stopped(self) -> str:
        """A rate sweep's line on why it ended where it did."""
        if self.error is not None:
            return self.error
        if self.first_fail is not None:
            return fail_line(self._last_at(self.first_fail), self.target) + self._undecided()
        maximum = f"max_rps {self.knob.maximum:g} req/s"
        if self.last_pass >= self.knob.maximum:
            return f"the SLO was met at {maximum}: the capacity is at least that"
        return (
            f"no rate up to {maximum} surely missed the SLO: the capacity is at least "
            f"{self.last_pass:.3g} req/s{self._undecided()}"
        )

    def interval_text(self) -> str:
        """E.g. ``5``, ``4–7`` or ``≥ 16``."""
        return SearchBracket(
            self.last_pass, self.last_pass, self.first_fail, knob=self.knob.name
        ).interval_text()

    def _last_at(self, value: float) -> SearchStep:
        return next(s for s in reversed(self.steps) if s.value == value)


def find_capacity(
    measure: Callable[[Any], tuple[Goodput, SearchWindow]],
    *,
    knob: Knob,
    target: float,
    policy: StepPolicy = StepPolicy(),
    on_step: Callable[[SearchStep], None] | None = None,
) -> SearchResult:
    """Search the capacity: ``measure(value)`` runs one timed window at that value; after
    navigating it decides the values that looked failing, lowest first, then those that
    looked passing, highest first, until one surely passes (:class:`StepPolicy`)."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"the attainment target must be a share in (0, 1], got {target!r}")
    check_confidence(policy.confidence)
    if policy.min_windows < 1 or policy.max_windows < policy.min_windows:
        raise ValueError(f"a step policy needs 1 <= min_windows <= max_windows, got {policy}")
    steps: list[SearchStep] = []
    pooled: dict[float, list[tuple[int, int]]] = {}

    def window(value: float) -> SearchStep:
        goodput, measured_window = measure(value)
        step = SearchStep(
            knob.name,
            value,
            goodput.good,
            goodput.requests,
            goodput.goodput_rps,
            measured_window.output_tokens_per_s,
            goodput.duration_s,
            violations=tuple(measured_window.violations),
            offered_rps=measured_window.offered_rps,
            achieved_rps=measured_window.achieved_rps,
            saturation=measured_window.saturation_reason,
        )
        if step.broken or step.saturation is not None:
            own = (
                attainment_interval(step.good, step.requests, policy.confidence)
                if step.requests
                else None
            )
            step = replace(
                step,
                interval=own,
                outcome=StepOutcome.BROKEN if step.broken else StepOutcome.SATURATED,
            )
        else:
            at = pooled.setdefault(value, [])
            at.append((step.good, step.requests))
            interval = windows_attainment(at, policy.confidence)
            step = replace(
                step,
                interval=interval,
                outcome=interval.decide(target)
                if len(at) >= policy.min_windows
                else StepOutcome.UNDECIDED,
            )
        steps.append(step)
        if on_step is not None:
            on_step(step)
        return step

    def decide(value: float) -> SearchStep:
        """Windows at ``value`` (navigated: it has one) until its step is decided or has its
        most windows."""
        step = next(s for s in reversed(steps) if s.value == value)
        while not step.broken and step.outcome not in (
            StepOutcome.PASS,
            StepOutcome.MISS,
            StepOutcome.SATURATED,
        ):
            most = policy.windows_at(pooled[value][0][1], target)
            if step.interval is None or step.interval.windows >= most:
                break
            step = window(value)
        return step

    def result(
        last_pass: float,
        first_fail: float | None,
        error: str | None = None,
        inconclusive: Sequence[float] = (),
    ) -> SearchResult:
        return SearchResult(
            knob,
            target,
            tuple(steps),
            last_pass,
            first_fail,
            error,
            policy,
            tuple(inconclusive),
        )

    # navigate: one window a value, read by its share
    zero = 0 if knob.name == CONCURRENCY else 0.0
    looked: dict[float, bool] = {}
    good_at: float = zero
    bad_at: float | None = None
    at: float | None = knob.start
    while at is not None:
        measured = window(at)
        if measured.broken:
            return result(good_at, bad_at, broken_reason(measured))
        looked[at] = _looks_passing(measured, target)
        if looked[at]:
            good_at = at
        else:
            bad_at = at
        if bad_at is None:  # grow: start, × growth, ... capped at the maximum
            at = None if at >= knob.maximum else knob.grown(at)
        else:  # bisect between the last that looked passing and the first that did not
            at = knob.between(good_at, bad_at)

    # decide the boundary, from the navigated values outward: those that looked failing
    # lowest first, then those that looked passing highest first; a value at or below a
    # surely passing step passes too, one at or above a surely failing step fails too
    last_pass: float = zero
    first_fail: float | None = None
    inconclusive: list[float] = []
    for value in [
        *sorted(v for v, ok in looked.items() if not ok),
        *sorted((v for v, ok in looked.items() if ok), reverse=True),
    ]:
        if value <= last_pass or (first_fail is not None and value >= first_fail):
            continue
        decided = decide(value)
        if decided.broken:  # looked failing: what navigating showed; else what is decided
            return result(
                *((last_pass, first_fail) if looked[value] else (good_at, None)),
                broken_reason(decided),
            )
        if decided.passed:
            last_pass = value
        elif decided.failed:
            first_fail = value
        else:
            inconclusive.append(value)
    return result(
        last_pass,
        first_fail,
        inconclusive=sorted(
            v for v in set(inconclusive) if last_pass < v and (first_fail is None or v < first_fail)
        ),
    )


def _looks_passing(step: SearchStep, target: float) -> bool:
    """Whether one window's share alone reaches the target, unsaturated (how it navigates)."""
    attainment = step.slo_attainment
    return step.saturation is None and attainment is not None and attainment >= target


def broken_reason(step: SearchStep, listed: int = 3) -> str:
    """Why a broken window stops the search, in one line."""
    at = f"concurrency {step.concurrency}" if step.knob == CONCURRENCY else f"{step.rate:.3g} req/s"
    if not step.violations:
        return f"the window at {at} sent no requests; no capacity is concluded from it"
    shown = "; ".join(step.violations[:listed])
    more = f" (and {len(step.violations) - listed} more)" if len(step.violations) > listed else ""
    return (
        f"the window at {at} broke its rules: {shown}{more}; "
        "no capacity is concluded from a broken window"
    )


def fail_line(step: SearchStep, target: float) -> str:
    """Why a rate step failed, in one line."""
    if step.outcome is StepOutcome.SATURATED:
        return f"saturated at {step.rate:.3g} req/s ({step.saturation})"
    met = "no requests" if step.interval is None else step.interval.text()
    return f"SLO attainment below {target:.0%} at {step.rate:.3g} req/s: {met}"


def step_line(model: str, number: int, step: SearchStep, target: float) -> str:
    """A window's progress line: ``capacity m: window 5, c4 (its 2nd): SLO met by 25.0% (2/8);
    step c4 3/16 = 18.8%, 97.5% CI [3.1%, 49.0%] (design effect 1.00), 90% needed: miss; ...``."""
    decided = step.interval
    if step.knob == RATE:
        met = "no requests" if decided is None else decided.text()
        offered = "n/a" if step.offered_rps is None else f"{step.offered_rps:.3g}"
        achieved = "n/a" if step.achieved_rps is None else f"{step.achieved_rps:.3g}"
        return (
            f"rate sweep {model}: step {number}, {step.rate:.3g} req/s: SLO met by {met}, "
            f"{target:.0%} needed: {step.outcome}; achieved {achieved} of {offered} req/s, "
            f"{step.output_tokens_per_s:.1f} tokens/s"
        )
    met = f"SLO met by {_share(step.slo_attainment, 1)} ({step.good}/{step.requests})"
    nth = ""
    if step.broken:
        verdict = f"broken ({len(step.violations)} violation(s))"
    elif decided is None:
        verdict = f"{_share(target)} needed: {'pass' if step.passed else 'miss'}"
    else:
        nth = f" (its {_ordinal(decided.windows)})"
        if step.outcome is StepOutcome.UNDECIDED:
            looks = "above" if (step.slo_attainment or 0.0) >= target else "below"
            verdict = f"navigating: {looks} the {_share(target)} needed"
        else:
            verdict = (
                f"step c{step.concurrency} {decided.good}/{decided.requests} = "
                f"{_share(decided.share, 1)}, {100 * decided.confidence:.4g}% CI "
                f"[{_share(decided.low, 1)}, {_share(decided.high, 1)}] (design effect "
                f"{decided.design_effect:.2f}), {_share(target)} needed: {step.outcome}"
            )
    goodput = "n/a" if step.goodput_rps is None else f"{step.goodput_rps:.2f} req/s"
    return (
        f"capacity {model}: window {number}, c{step.concurrency}{nth}: {met}; {verdict}; "
        f"{step.output_tokens_per_s:.1f} tokens/s, goodput {goodput}"
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _share(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


# --------------------------------------------------------------------------- measuring
@dataclass(frozen=True)
class MeasuredWindow:
    """One measured window, closed-loop (concurrency) or open-loop (rate: offered and achieved
    rate, why it saturated), its goodput, contention, and the ``figures`` its step records."""

    result: ThroughputResult
    goodput: Goodput
    contention: Contention
    figures: ThroughputWindow
    offered_rps: float | None = None
    achieved_rps: float | None = None
    saturation_reason: str | None = None

    @classmethod
    def of(
        cls,
        result: ThroughputResult,
        slo: Slo,
        contention: Contention,
        pricing: Pricing | None,
    ) -> MeasuredWindow:
        """A closed- or open-loop window (an open loop's offered and achieved rates and why it
        saturated), its figures recorded as a throughput window's."""
        goodput = result.goodput(slo)
        figures = replace(result.window(contention), goodput=goodput.figures())
        if pricing is not None:
            usd = usd_per_million_output_tokens(pricing.usd_per_hour, figures.output_tokens_per_s)
            figures = replace(figures, priced=True, usd_per_million_output_tokens=usd)
        rates = figures.open_loop.saturation if figures.open_loop else Saturation()
        return cls(
            result,
            goodput,
            contention,
            figures,
            rates.offered_rps,
            rates.achieved_rps,
            rates.reason(),
        )

    @property
    def output_tokens_per_s(self) -> float:
        return self.result.output_tokens_per_s

    @property
    def violations(self) -> Sequence[str]:
        return self.result.violations


def requests_per_step(settings: BenchSettings, confidence: float = RATE_CONFIDENCE) -> int:
    """Timed requests per rate step: ``--timed-requests``, else the fewest that can show
    ``--slo-attainment`` (29 for 90%); MeasurementError when too few for any step to pass."""
    target = settings.slo_attainment
    if not target < 1.0:
        raise MeasurementError(
            "capacity in req/s needs --slo-attainment below 1: a window of "
            "finitely many requests never shows 100% at a confidence"
        )
    requests = settings.timed_requests or min_requests_to_pass(target, confidence)
    problem = requests_per_step_problem(requests, target, confidence)
    if problem is not None:
        raise MeasurementError(f"--timed-requests {requests}: {problem}")
    return requests


def search_stats(
    settings: BenchSettings,
    knob: Knob,
    measured: Sequence[tuple[SearchStep, MeasuredWindow]],
    result: SearchResult | None,
    error: str | None,
    policy: StepPolicy,
    source: str = "",
) -> SearchStats:
    """The record of a search: ``result`` None (with ``error``) when it broke off."""
    steps = tuple(replace(step, recorded=window.figures) for step, window in measured)
    at = None if result is None else result.capacity_step
    at_capacity = (
        None
        if at is None
        else AtCapacity(
            at.output_tokens_per_s,
            at.goodput_rps,
            at.slo_attainment,
            None
            if settings.pricing is None
            else usd_per_million_output_tokens(
                settings.pricing.usd_per_hour, at.output_tokens_per_s
            ),
        )
    )
    contended = sum(1 for _, window in measured if window.contention.contended)
    common: dict[str, Any] = {
        "capacity": None if result is None else result.capacity,
        "steps": steps,
        "bracket": None if result is None else result.bracket,
        "inconclusive": () if result is None else result.inconclusive,
        "contended": contended > 0,
        "contended_windows": contended,
        "at_capacity": at_capacity,
        "pricing": settings.pricing,
    }
    if knob.name == RATE:
        return SearchStats(
            knob=RATE,
            **common,
            confidence=policy.confidence,
            target=settings.slo_attainment,
            start=knob.start,
            maximum=knob.maximum,
            burstiness=settings.burstiness,
            reason=(error or "") if result is None else result.stopped,
            error=error if result is None else result.error,
        )
    return SearchStats(
        **common,
        confidence=policy.interval_confidence,
        source=source,
        reason=error if error is not None else None if result is None else result.reason,
        error=error,
    )


def measure_capacity(
    endpoint: Endpoint,
    settings: BenchSettings,
    slo: Slo,
    knob: Knob,
    record_measurement: Callable[..., Any],
    progress: Callable[[str], None],
    source: str = "",
) -> SearchResult:
    """Search one endpoint's capacity over ``knob`` under ``slo`` and record it (one that broke
    off too, its capacity null); MeasurementError for a search stopped at a broken window.
    Concurrency: up to ``knob.maximum`` (its ``source`` recorded), recorded as ``capacity``;
    rate: in requests/s (``--rate-sweep``, ``--burstiness``, ``--slo-attainment``), recorded
    as ``rate_capacity``."""
    from .contention import ContentionMeter
    from .prompts import make_tokenizer
    from .throughput import OUTPUT_TOKENS

    name, target, rate = endpoint.model.name, settings.slo_attainment, knob.name == RATE
    policy = RATE_POLICY if rate else StepPolicy()
    requests = requests_per_step(settings, policy.confidence) if rate else 0
    searched = (
        {
            "rate_sweep": str(settings.rate_sweep),
            "burstiness": settings.burstiness,
            "timed_requests": requests,
            "output_tokens": OUTPUT_TOKENS,
        }
        if rate
        else {
            "max_concurrency": int(knob.maximum),
            "output_tokens": OUTPUT_TOKENS,
            "timed_requests": settings.timed_requests,
            "step_confidence": policy.confidence,
            "min_windows": policy.min_windows,
            "max_windows": policy.max_windows,
        }
    )
    params = {"slo": slo.as_dict(), "attainment_target": settings.slo_attainment, **searched}
    tokenizer = make_tokenizer(endpoint)
    server_pids = endpoint.server_pids()
    windows: list[MeasuredWindow] = []
    measured: list[tuple[SearchStep, MeasuredWindow]] = []

    def measure(value: Any) -> tuple[Goodput, MeasuredWindow]:
        number = len(windows) + 1
        meter = ContentionMeter.of(server_pids, settings)
        if rate:
            from .arrivals import ArrivalProcess
            from .openloop import run_open_loop, window_seed

            progress(
                f"rate sweep {name}: step {number}, {value:.3g} req/s: measuring "
                f"{requests} requests"
            )
            arrivals = ArrivalProcess(value, settings.burstiness)
            window = run_open_loop(
                endpoint,
                arrivals=arrivals,
                timed_requests=requests,
                warmup_requests=WARMUP_REQUESTS if number == 1 else 0,
                seed=window_seed(settings.run_id, "rate_capacity", arrivals, None, f"step{number}"),
                timeout_s=settings.request_timeout_s,
                idle_timeout_s=settings.idle_timeout_s,
                tokenizer=tokenizer,
                meter=meter,
            )
            windows.append(MeasuredWindow.of(window, slo, meter.result, settings.pricing))
        else:
            from .throughput import measure_window

            progress(f"capacity {name}: window {number}, c{value}: measuring")
            # never fewer than the concurrency, so that the window has that many in flight
            timed = max(settings.timed_requests_at(value), value)
            result = measure_window(
                endpoint,
                benchmark="capacity",
                concurrency=value,
                prompt_tokens=None,
                repeat=f"step{number}",
                run_id=settings.run_id,
                timed_requests=timed,
                timeout_s=settings.request_timeout_s,
                idle_timeout_s=settings.idle_timeout_s,
                tokenizer=tokenizer,
                meter=meter,
                progress=progress,
            )
            windows.append(MeasuredWindow.of(result, slo, meter.result, settings.pricing))
        return windows[-1].goodput, windows[-1]

    def shown(step: SearchStep) -> None:
        measured.append((step, windows[-1]))
        contended = windows[-1].contention.contended
        busy = "unknown" if contended is None else ("yes" if contended else "no")
        server = windows[-1].figures.server_metrics
        flag = None if server is None or not rate else server.summary.flag_line()
        queued = "" if flag is None else f"; {flag}"
        progress(f"{step_line(name, len(measured), step, target)}, contended: {busy}{queued}")

    def record(result: SearchResult | None, error: str | None) -> None:
        sent = [
            {**r.to_dict(), "step": index, knob.name: step.value}
            for index, (step, window) in enumerate(measured)
            for r in window.result.records
        ]
        passed = [step.value for step, _ in measured if step.passed]
        record_measurement(
            "rate_capacity" if rate else "capacity",
            result.last_pass if result is not None else max(passed, default=0.0 if rate else 0),
            "req/s" if rate else "concurrent requests",
            len(sent),
            params=params,
            stats=search_stats(settings, knob, measured, result, error, policy, source),
            requests=sent,
            endpoint=endpoint,
        )

    try:
        try:
            result = find_capacity(measure, knob=knob, target=target, policy=policy, on_step=shown)
        finally:
            tokenizer.close()
    except Exception as error:
        if measured:  # what the clean windows before it showed, marked broken off
            record(None, f"the {'sweep' if rate else 'search'} broke off: {error}")
        raise
    record(result, result.error)
    if result.error is not None:
        raise MeasurementError(f"{name}: {result.error}")
    return result


# --------------------------------------------------------------------------- comparing
def capacity_ratio(candidate: SearchBracket, reference: SearchBracket) -> SearchRatio:
    """Candidate ÷ reference capacity with its interval, from ``cand_last_pass /
    ref_first_fail`` to ``cand_first_fail / ref_last_pass``, at 1 - (1 - γ_cand) - (1 - γ_ref)
    (Bonferroni); no level for older brackets."""
    if reference.capacity <= 0:
        knob = "concurrency" if reference.knob == CONCURRENCY else "rate of its sweep"
        raise ValueError(f"cannot compare: the reference meets the SLO at no {knob}")
    low = 0.0 if reference.first_fail is None else candidate.last_pass / reference.first_fail
    high = math.inf if candidate.first_fail is None else candidate.first_fail / reference.last_pass
    levels = (candidate.confidence, reference.confidence)
    confidence = (
        None
        if levels[0] is None or levels[1] is None
        else 1.0 - (1.0 - levels[0]) - (1.0 - levels[1])
    )
    return SearchRatio(
        candidate.capacity / reference.capacity, low, high, candidate, reference, confidence
    )


def decide_capacity_verdict(ratio: SearchRatio, tolerance: float = 0.0) -> Verdict:
    """:func:`decide_ratio_verdict`'s rules on a capacity ratio's interval; inconclusive for an
    older concurrency bracket with no confidence level."""
    verdict = decide_ratio_verdict(ratio, tolerance)
    unlevelled = ratio.confidence is None and ratio.candidate.knob == CONCURRENCY
    return Verdict.INCONCLUSIVE if unlevelled else verdict


def interval_text(ratio: SearchRatio) -> str:
    """E.g. ``95% interval 1.50–4.00`` (``1.50–∞`` when open above); an older bracket says
    ``search bracket 1.50–4.00, no confidence level``."""
    high = "∞" if math.isinf(ratio.high) else f"{ratio.high:.2f}"
    if ratio.confidence is None:
        return f"search bracket {ratio.low:.2f}–{high}, no confidence level"
    return f"{100 * ratio.confidence:.4g}% interval {ratio.low:.2f}–{high}"
