"""Capacity in requests per second under an SLO: a sweep of open-loop rates.

Each step measures one open-loop window at a rate and decides it from the share of
its requests that met every SLO target, *with its interval*: the two-sided
Clopper-Pearson interval of that share at ``confidence`` (default 90%; the step decision
is :mod:`.attainment`'s, which the capacity search shares). A step

- *passes* when the interval's low end reaches the target (``--slo-attainment``),
- *misses* when its high end lies below the target,
- is *inconclusive* when the interval straddles the target (more requests per step
  narrow it; :func:`min_requests_to_pass` says how many a step needs to be able to pass),
- is *saturated* when the server did not keep up with the offered rate (the achieved
  rate fell more than the tolerance behind, or the client's in-flight cap was hit;
  see :mod:`.openloop`): a miss whatever its attainment, since its latencies grow with
  the length of the window, and the sweep stops there, as GuideLLM's
  ``--stop-over-saturated`` does,
- is *broken* when its window broke the exactness rules: no capacity is concluded.

Clopper-Pearson intervals hold their coverage for every n and true share, so with the
default 90% a step whose true attainment reaches the target misses with probability at
most 5%, and one whose true attainment is below it passes with probability at most 5%
(``benches/perf/attainment_interval_simulation.py`` shows both). That assumes the
requests of a window meet the SLO independently of one another; near saturation a
queue makes neighbours alike, and the same simulation shows how much that costs.

The search grows the rate geometrically (``start_rps``, × ``growth``, ..., capped at
``max_rps``) until a step misses or saturates, then bisects geometrically between the
last passing and the first failing rate until they are within ``resolution`` of each
other. The capacity is the last passing rate and the *bracket* [last pass, first fail]
says where the crossing lies (open above when ``max_rps`` passed). An inconclusive step
leaves the bracket as it was; in the bisection it ends the refinement (a one-line note
says so), since only more requests per step can decide there.

The search (:func:`find_rate_capacity`) is pure, like :func:`~.capacity.find_capacity`;
:func:`measure_rate_capacity` runs it on one endpoint, each step one open-loop window of
the throughput workload (:func:`~.openloop.run_open_loop`: short unique prompts, 256 tokens
each, checked against the server's counters, the server's metrics sampled) with its
contention and a progress line, and records one
:class:`~..core.measurements.RateCapacityStats`. Two models' sweeps compare through their
brackets (:func:`rate_capacity_ratio`, :func:`decide_rate_capacity_verdict`). No pytest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..core.cost import usd_per_million_output_tokens
from ..core.errors import MeasurementError
from ..core.measurements import (
    AtCapacity,
    AttainmentInterval,
    Contention,
    RateBracket,
    RateCapacityRatio,
    RateCapacityStats,
    RateStep,
    RateWindow,
    StepOutcome,
)
from ..core.slo import Goodput, Slo
from ..core.stats import Verdict, decide_ratio_verdict
from .attainment import (
    DEFAULT_CONFIDENCE,
    attainment_interval,
    check_confidence,
    min_requests_to_pass,
    requests_per_step_problem,
)

if TYPE_CHECKING:
    from ..core.settings import BenchSettings
    from ..serving.endpoint import Endpoint
    from .openloop import OpenLoopWindow

NEEDS_SLO = "capacity in req/s needs --slo, e.g. --slo ttft=2000ms,tpot=100ms"
"""Why rate-capacity tests skip in a run without ``--slo``."""

RULE_INTERVAL = "rate-capacity-interval-beyond-tolerance"
"""The rule of :func:`decide_rate_capacity_verdict`, as recorded with the verdict."""

WARMUP_REQUESTS = 2
"""Closed-loop warm-up requests before the sweep's first window (none before the others:
the server is warm by then, and each warm-up costs a CPU server seconds)."""

DEFAULT_GROWTH = 2.0
DEFAULT_RESOLUTION = 0.10
"""The bisection stops once first fail ÷ last pass ≤ 1 + this."""

DEFAULT_MAX_STEPS = 12

WindowT = TypeVar("WindowT", bound=RateWindow)


def rate_step(rate: float, goodput: Goodput, window: RateWindow, target: float,
              confidence: float) -> RateStep:
    """The step one window at ``rate`` measured, decided from its attainment interval."""
    interval = (attainment_interval(goodput.good, goodput.requests, confidence)
                if goodput.requests else None)
    return RateStep.decided(rate, interval, goodput.goodput_rps, window, target)


@dataclass(frozen=True)
class RateSweepResult(Generic[WindowT]):
    """The steps in the order tried, the bracket they give and why the sweep stopped.

    ``last_pass`` is the highest passing rate (0.0: none passed) and ``first_fail`` the
    lowest missing or saturated rate above it (None: ``max_rps`` passed). ``error``
    (a broken window) means no capacity is concluded.
    """

    target: float
    confidence: float
    max_rps: float
    steps: tuple[RateStep, ...]
    windows: tuple[WindowT, ...]
    last_pass: float
    first_fail: float | None
    stopped: str
    error: str | None = None

    @property
    def capacity_rps(self) -> float | None:
        """The highest rate that met the SLO; None when the sweep broke off."""
        return None if self.error is not None else self.last_pass

    @property
    def bracket(self) -> tuple[float, float | None] | None:
        return None if self.error is not None else (self.last_pass, self.first_fail)

    @property
    def saturated_at(self) -> float | None:
        """The lowest rate at which the server fell behind (None: it never did)."""
        rates = [s.rate for s in self.steps if s.outcome is StepOutcome.SATURATED]
        return min(rates) if rates else None

    @property
    def inconclusive_rates(self) -> list[float]:
        return [s.rate for s in self.steps if s.outcome is StepOutcome.INCONCLUSIVE]

    def as_dict(self) -> dict[str, Any]:
        return {"capacity_rps": self.capacity_rps,
                "bracket": None if self.bracket is None else list(self.bracket),
                "target": self.target, "confidence": self.confidence, "max_rps": self.max_rps,
                "saturated_at": self.saturated_at, "inconclusive_rates": self.inconclusive_rates,
                "stopped": self.stopped, "error": self.error,
                "steps": [s.to_dict() for s in self.steps]}


def _check(name: str, value: float, *, above: float, finite: bool = True) -> None:
    if math.isnan(value) or (finite and math.isinf(value)) or not value > above:
        raise ValueError(f"{name} must be a number above {above:g}, got {value!r}")


def find_rate_capacity(
    measure: Callable[[float], tuple[Goodput, WindowT]],
    *,
    start_rps: float,
    max_rps: float,
    target: float,
    confidence: float = DEFAULT_CONFIDENCE,
    growth: float = DEFAULT_GROWTH,
    resolution: float = DEFAULT_RESOLUTION,
    max_steps: int = DEFAULT_MAX_STEPS,
    on_step: Callable[[RateStep], None] | None = None,
) -> RateSweepResult[WindowT]:
    """Sweep the rate: ``measure(rate)`` runs one open-loop window at ``rate`` req/s and
    returns its goodput and the window; ``on_step`` sees each step as it is decided."""
    _check("start_rps", start_rps, above=0.0)
    _check("max_rps", max_rps, above=0.0)
    if max_rps < start_rps:
        raise ValueError(f"max_rps {max_rps:g} is below start_rps {start_rps:g}")
    _check("growth", growth, above=1.0)
    _check("resolution", resolution, above=0.0)
    if not 0.0 < target <= 1.0:
        raise ValueError(f"the attainment target must be a share in (0, 1], got {target!r}")
    check_confidence(confidence)
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    steps: list[RateStep] = []
    windows: list[WindowT] = []

    def step(rate: float) -> RateStep:
        goodput, window = measure(rate)
        decided = rate_step(rate, goodput, window, target, confidence)
        steps.append(decided)
        windows.append(window)
        if on_step is not None:
            on_step(decided)
        return decided

    def result(last_pass: float, first_fail: float | None, stopped: str,
               error: str | None = None) -> RateSweepResult[WindowT]:
        return RateSweepResult(target, confidence, max_rps, tuple(steps), tuple(windows),
                               last_pass, first_fail, stopped, error)

    last_pass, first_fail = 0.0, None
    rate = start_rps
    while True:  # grow: start, × growth, ... capped at max_rps
        measured = step(rate)
        if measured.outcome is StepOutcome.BROKEN:
            return result(last_pass, None, broken_line(measured), broken_line(measured))
        if measured.failed:
            first_fail = rate
            break
        if measured.outcome is StepOutcome.PASS:
            last_pass = rate
        if rate >= max_rps:
            if measured.outcome is StepOutcome.PASS:
                return result(last_pass, None, f"the SLO was met at max_rps {max_rps:g} req/s: "
                                               f"the capacity is at least that")
            return result(last_pass, None, f"the step at max_rps {max_rps:g} req/s was "
                                           "inconclusive; raise max_rps or the requests per step")
        if len(steps) >= max_steps:
            return result(last_pass, None, f"stopped after {max_steps} steps without a miss")
        rate = min(rate * growth, max_rps)
    stopped = fail_line(measured, target)
    inside = [s for s in steps if s.outcome is StepOutcome.INCONCLUSIVE
              and last_pass < s.rate < first_fail]
    if inside:
        return result(last_pass, first_fail,
                      f"{stopped}; not refined: {len(inside)} inconclusive step(s) "
                      "lie in the bracket (more requests per step would decide them)")
    while last_pass > 0 and first_fail / last_pass > 1.0 + resolution:
        if len(steps) >= max_steps:
            return result(last_pass, first_fail, f"{stopped}; bisection stopped after "
                                                 f"{max_steps} steps")
        rate = math.sqrt(last_pass * first_fail)
        measured = step(rate)
        if measured.outcome is StepOutcome.BROKEN:
            return result(last_pass, first_fail, broken_line(measured), broken_line(measured))
        if measured.outcome is StepOutcome.INCONCLUSIVE:
            assert measured.interval is not None
            return result(last_pass, first_fail,
                          f"{stopped}; bisection ended at {rate:.3g} req/s, inconclusive: "
                          f"{measured.interval.text()} straddles {target:.0%}")
        if measured.failed:
            first_fail = rate
            stopped = fail_line(measured, target)
        else:
            last_pass = rate
    return result(last_pass, first_fail, stopped)


def fail_line(step: RateStep, target: float) -> str:
    """Why a failing step failed, in one line."""
    if step.outcome is StepOutcome.SATURATED:
        return f"saturated at {step.rate:.3g} req/s ({step.saturation})"
    assert step.interval is not None
    return (f"SLO attainment below {target:.0%} at {step.rate:.3g} req/s: "
            f"{step.interval.text()}")


def broken_line(step: RateStep, listed: int = 3) -> str:
    """Why a broken window stops the sweep, in one line."""
    if not step.violations:
        return (f"the window at {step.rate:.3g} req/s sent no requests; "
                "no capacity is concluded from it")
    shown = "; ".join(step.violations[:listed])
    more = f" (and {len(step.violations) - listed} more)" if len(step.violations) > listed else ""
    return (f"the window at {step.rate:.3g} req/s broke its rules: {shown}{more}; "
            "no capacity is concluded from a broken window")


def step_line(model: str, number: int, step: RateStep, target: float) -> str:
    """E.g. ``rate sweep smollm2-135m: step 3, 4 req/s: SLO met by 93.3% (28/30), 90% CI
    [80.9%, 98.8%], 90% needed: inconclusive; achieved 3.9 of 4.0 req/s``."""
    met = "no requests" if step.interval is None else step.interval.text()
    offered = "n/a" if step.offered_rps is None else f"{step.offered_rps:.3g}"
    achieved = "n/a" if step.achieved_rps is None else f"{step.achieved_rps:.3g}"
    return (f"rate sweep {model}: step {number}, {step.rate:.3g} req/s: SLO met by {met}, "
            f"{target:.0%} needed: {step.outcome}; achieved {achieved} of {offered} req/s, "
            f"{step.output_tokens_per_s:.1f} tokens/s")


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class MeasuredRateWindow:
    """One measured step: the open-loop window, its goodput and its contention."""

    window: OpenLoopWindow
    goodput: Goodput
    contention: Contention


def requests_per_step(settings: BenchSettings, confidence: float = DEFAULT_CONFIDENCE) -> int:
    """Timed requests per step: ``--timed-requests``, else the fewest that can show
    ``--slo-attainment`` (:func:`min_requests_to_pass`: 29 for 90%). MeasurementError in
    one line when ``--timed-requests`` is too few for any step to pass, or the target is
    100% (which no finite window shows)."""
    target = settings.slo_attainment
    if not target < 1.0:
        raise MeasurementError("capacity in req/s needs --slo-attainment below 1: a window of "
                               "finitely many requests never shows 100% at a confidence")
    requests = settings.timed_requests or min_requests_to_pass(target, confidence)
    problem = requests_per_step_problem(requests, target, confidence)
    if problem is not None:
        raise MeasurementError(f"--timed-requests {requests}: {problem}")
    return requests


def rate_step_stats(step: RateStep, measured: MeasuredRateWindow, settings: BenchSettings,
                    ) -> RateStep:
    """A step as the measurement lists it, with its window's figures: throughput, latency
    from the scheduled times, arrivals and saturation, goodput, contention, server metrics,
    the cost when priced."""
    window = replace(measured.window.window(measured.contention),
                     goodput=measured.goodput.figures())
    if settings.pricing is not None:
        window = replace(window, priced=True, usd_per_million_output_tokens=(
            usd_per_million_output_tokens(settings.pricing.usd_per_hour,
                                          window.output_tokens_per_s)))
    return replace(step, recorded=window)


def rate_capacity_stats(
    settings: BenchSettings, measured: Sequence[tuple[RateStep, MeasuredRateWindow]],
    result: RateSweepResult[OpenLoopWindow] | None, error: str | None,
) -> RateCapacityStats:
    """The record of a sweep: ``result`` None (with ``error``) when it broke off."""
    steps = tuple(rate_step_stats(step, window, settings) for step, window in measured)
    contended = sum(1 for _, window in measured if window.contention.contended)
    stats = RateCapacityStats(
        capacity_rps=None if result is None else result.capacity_rps,
        bracket=None if result is None else result.bracket, target=settings.slo_attainment,
        confidence=DEFAULT_CONFIDENCE if result is None else result.confidence,
        start_rps=settings.rate_sweep.start_rps, max_rps=settings.rate_sweep.max_rps,
        burstiness=settings.burstiness,
        stopped=(error or "") if result is None else result.stopped,
        error=error if result is None else result.error, steps=steps,
        contended=contended > 0, contended_windows=contended, pricing=settings.pricing,
    )
    at = stats.capacity_step
    if at is None or at.recorded is None:
        return stats
    window = at.recorded
    goodput = window.goodput
    return replace(stats, at_capacity=AtCapacity(
        window.output_tokens_per_s, at.goodput_rps,
        None if goodput is None else goodput.slo_attainment,
        window.usd_per_million_output_tokens))


def measure_rate_capacity(
    endpoint: Endpoint, settings: BenchSettings, slo: Slo,
    record_measurement: Callable[..., Any], progress: Callable[[str], None],
) -> RateSweepResult[OpenLoopWindow]:
    """Sweep one endpoint's request rate under ``slo`` (``--rate-sweep``, ``--burstiness``,
    ``--slo-attainment``), record it (also a sweep that broke off: the value is then the
    highest rate that passed before it, ``stats.capacity_rps`` null), and raise
    :class:`MeasurementError` for a sweep that stopped at a broken window."""
    from .arrivals import ArrivalProcess
    from .contention import ContentionMeter
    from .openloop import run_open_loop, window_seed
    from .throughput import OUTPUT_TOKENS, make_tokenizer

    requests = requests_per_step(settings)
    target, name = settings.slo_attainment, endpoint.model.name
    measured: list[tuple[RateStep, MeasuredRateWindow]] = []
    windows: list[MeasuredRateWindow] = []
    server_pids = endpoint.server_pids()
    tokenizer = make_tokenizer(endpoint)

    def measure(rate: float) -> tuple[Goodput, OpenLoopWindow]:
        number = len(windows) + 1
        progress(f"rate sweep {name}: step {number}, {rate:.3g} req/s: measuring "
                 f"{requests} requests")
        arrivals = ArrivalProcess(rate, settings.burstiness)
        meter = ContentionMeter.of(server_pids, settings)
        window = run_open_loop(
            endpoint, arrivals=arrivals, timed_requests=requests,
            warmup_requests=WARMUP_REQUESTS if number == 1 else 0,
            seed=window_seed(settings.run_id, "rate_capacity", arrivals, None, f"step{number}"),
            timeout_s=settings.request_timeout_s, idle_timeout_s=settings.idle_timeout_s,
            tokenizer=tokenizer, meter=meter)
        goodput = window.goodput(slo)
        windows.append(MeasuredRateWindow(window, goodput, meter.result))
        return goodput, window

    def shown(step: RateStep) -> None:
        measured.append((step, windows[-1]))
        contended = windows[-1].contention.contended
        busy = "unknown" if contended is None else ("yes" if contended else "no")
        flag = windows[-1].window.server
        queued = "" if flag is None or flag.summary.flag_line() is None \
            else f"; {flag.summary.flag_line()}"
        progress(f"{step_line(name, len(measured), step, target)}, contended: {busy}{queued}")

    def record(result: RateSweepResult[OpenLoopWindow] | None, error: str | None) -> None:
        sent: list[dict[str, Any]] = []
        for index, (step, window) in enumerate(measured):
            sent += [{**r.to_dict(), "step": index, "rate": step.rate}
                     for r in window.window.records]
        passed = [step.rate for step, _ in measured if step.passed]
        record_measurement(
            "rate_capacity", result.last_pass if result is not None else max(passed, default=0.0),
            "req/s", len(sent),
            params={"slo": slo.as_dict(), "attainment_target": target,
                    "rate_sweep": str(settings.rate_sweep), "burstiness": settings.burstiness,
                    "timed_requests": requests, "output_tokens": OUTPUT_TOKENS},
            stats=rate_capacity_stats(settings, measured, result, error),
            requests=sent, endpoint=endpoint,
        )

    try:
        try:
            result = find_rate_capacity(measure, start_rps=settings.rate_sweep.start_rps,
                                        max_rps=settings.rate_sweep.max_rps, target=target,
                                        on_step=shown)
        finally:
            tokenizer.close()
    except Exception as error:
        if measured:  # what the clean windows before it showed, marked broken off
            record(None, f"the sweep broke off: {error}")
        raise
    record(result, result.error)
    if result.error is not None:
        raise MeasurementError(f"{name}: {result.error}")
    return result


# --------------------------------------------------------------------------- comparing


def rate_capacity_ratio(candidate: RateBracket, reference: RateBracket) -> RateCapacityRatio:
    """Candidate ÷ reference capacity with the interval the two brackets give (see
    :class:`~..core.measurements.RateCapacityRatio`); the reference's capacity must be > 0."""
    if reference.capacity <= 0:
        raise ValueError("cannot compare: the reference meets the SLO at no rate of its sweep")
    low = 0.0 if reference.first_fail is None else candidate.last_pass / reference.first_fail
    high = math.inf if candidate.first_fail is None \
        else candidate.first_fail / reference.last_pass
    return RateCapacityRatio(candidate.capacity / reference.capacity, low, high, candidate,
                             reference)


def decide_rate_capacity_verdict(ratio: RateCapacityRatio, tolerance: float = 0.0) -> Verdict:
    """The verdict on a capacity-in-req/s ratio, from its interval only: wholly below
    ``1 - tolerance`` worse, wholly above ``1 + tolerance`` better, covering 1 matches,
    wholly within ``1 ± tolerance`` equivalent, else inconclusive; an interval open on both
    sides (both sweeps passed at their maximum) is inconclusive."""
    return decide_ratio_verdict(ratio, tolerance)


__all__ = [
    "DEFAULT_CONFIDENCE", "DEFAULT_GROWTH", "DEFAULT_MAX_STEPS", "DEFAULT_RESOLUTION",
    "NEEDS_SLO", "RULE_INTERVAL", "AttainmentInterval", "MeasuredRateWindow", "RateSweepResult",
    "RateStep", "RateWindow", "StepOutcome", "attainment_interval", "broken_line",
    "decide_rate_capacity_verdict", "fail_line", "find_rate_capacity", "measure_rate_capacity",
    "min_requests_to_pass", "rate_capacity_ratio", "rate_capacity_stats", "rate_step",
    "requests_per_step", "requests_per_step_problem", "step_line",
]
