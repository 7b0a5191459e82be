"""Capacity under an SLO: the most requests in flight at which enough of them meet it.

The search measures one timed window per step, with exactly ``c`` requests in
flight, and calls a step *passed* when the share of its requests that met every
target of the SLO (its ``slo_attainment``) is at least the target share
(``--slo-attainment``, default 90%). It grows ``c`` geometrically (1, 2, 4, 8, ...,
the last step capped at the server's maximum, its ``max_num_seqs``) until a step
misses or the maximum passes, then bisects between the last passing and the first
missing step until they are adjacent integers. The capacity is the last passing
concurrency: 0 when concurrency 1 already misses, the maximum when it passes.

A window that broke the exactness rules of the throughput workload (a failed
request, a wrong token count, a cache hit...) stops the search: no capacity is
concluded from a broken window, only the steps measured so far are kept.

A search gives a *bracket*, not an interval with a confidence level: the SLO
curve crosses the target between the last passing and the first missing
concurrency (``[last_pass, first_fail]``; ``first_fail`` None when the maximum
passed, so the bracket is open above). Two searches compare through their brackets:
candidate ÷ reference capacity lies between ``cand_last_pass / ref_first_fail``
and ``cand_first_fail / ref_last_pass`` (:func:`capacity_ratio`), and
:func:`decide_capacity_verdict` applies the rules of
:func:`~pytest_modelsweep.core.stats.decide_ratio_verdict` to that bracket.

:func:`measure_capacity` runs the search on one endpoint, each step one timed window
of the throughput workload (short unique prompts, 256 tokens each, checked against the
server's counters) with its contention and a progress line, and records one
:class:`~..core.measurements.CapacityStats` (:func:`capacity_stats`): the capacity, the
figures at it (output tokens/s, goodput, $/1M output tokens when priced) and every step.
No pytest here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..core.cost import usd_per_million_output_tokens
from ..core.errors import MeasurementError
from ..core.measurements import (
    AtCapacity,
    CapacityBracket,
    CapacityRatio,
    CapacityStats,
    CapacityStep,
    Contention,
    StepDecision,
    StepWindow,
    Window,
)
from ..core.slo import Goodput, Slo, window_goodput
from ..core.stats import Verdict, decide_ratio_verdict
from .attainment import StepOutcome, min_requests_to_pass, windows_attainment

if TYPE_CHECKING:
    from ..core.settings import BenchSettings
    from ..serving.endpoint import Endpoint
    from .throughput import ThroughputResult

SERVER_LIMIT_KEYS = ("max_num_seqs", "total_slots")
"""Provenance ``server_settings`` keys that say how many sequences a server runs at once
(vLLM's ``max_num_seqs``, llama.cpp's ``total_slots``)."""

NEEDS_SLO = "capacity needs --slo, e.g. --slo ttft=500ms,tpot=50ms"
"""Why capacity tests skip in a run without ``--slo``."""

RULE_INTERVAL = "capacity-interval-beyond-tolerance"
"""The rule of :func:`decide_capacity_verdict`, as recorded with the verdict."""

STEP_CONFIDENCE = 0.975
"""Two-sided level of each step's attainment interval: one look at a step wrongly passes (or
wrongly misses) at most 1.25% of the time."""

INTERVAL_CONFIDENCE = 2 * STEP_CONFIDENCE - 1
"""The level of a capacity interval [last pass, first miss): each end rests on one step's
decision, taken over up to its most windows (several looks), allowed 1 - STEP_CONFIDENCE
each: 95%. A ratio of two capacities is at 90% (Bonferroni).
benches/perf/capacity_aa_simulation.py measures both and the A/A verdicts."""

MIN_WINDOWS = 2
"""Windows a step takes before it is decided: the spread between them measures how alike
a window's requests are (the design effect)."""

MAX_WINDOWS = 4
"""Windows after which an undecided step is inconclusive (more where windows are too small
to pass in fewer)."""


WindowT = TypeVar("WindowT", bound=Window)


def server_max_concurrency(server_settings: Mapping[str, Any], configured: int) -> tuple[int, str]:
    """The most requests the server runs at once, and where that figure came from.

    What the live server reports (``max_num_seqs``, ``total_slots``) wins over the
    sweep's ``configured`` ``max_num_seqs``, which an attached server need not follow.
    """
    for key in SERVER_LIMIT_KEYS:
        value = server_settings.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"the server's {key}"
    return configured, "the sweep's max_num_seqs"


@dataclass(frozen=True)
class StepPolicy:
    """How a step of the search is decided: from its windows' pooled attainment, with the
    exact interval at ``confidence`` (two-sided; :func:`~.attainment.windows_attainment`),
    once it has ``min_windows`` windows; an undecided step gets another window until it
    has ``max_windows`` (or, where windows are small, as many as a pass needs plus one),
    then stays inconclusive."""

    confidence: float = STEP_CONFIDENCE
    min_windows: int = MIN_WINDOWS
    max_windows: int = MAX_WINDOWS

    def windows_at(self, requests_per_window: int, target: float) -> int:
        """The most windows a step of ``requests_per_window`` requests takes."""
        if target >= 1.0:
            return self.max_windows
        needed = min_requests_to_pass(target, self.confidence)
        return max(self.max_windows, self.min_windows,
                   math.ceil(needed / max(requests_per_window, 1)) + 1)

    @property
    def interval_confidence(self) -> float:
        """The level of the capacity interval its decisions give (:data:`INTERVAL_CONFIDENCE`
        for the default)."""
        return 2 * self.confidence - 1

    def as_params(self) -> dict[str, Any]:
        """As the measurement's parameters record it (a comparison checks them alike)."""
        return {"step_confidence": self.confidence, "min_windows": self.min_windows,
                "max_windows": self.max_windows}


@dataclass(frozen=True)
class CapacityResult(Generic[WindowT]):
    """What a search found: every window in the order measured, and the interval the
    decided steps give.

    ``last_pass`` is the highest concurrency whose step surely passed (0: none did) and
    ``first_fail`` the lowest surely missing above it (None: none did): the capacity lies
    in ``[last_pass, first_fail - 1]`` at the steps' confidence (open above with None).
    ``inconclusive`` lists the concurrencies whose step stayed undecided. ``error`` says
    why the search stopped at a broken window; then no capacity is concluded
    (:attr:`capacity` and :attr:`bracket` are None) and ``last_pass`` is only what the
    clean windows before it showed.
    """

    target: float
    max_concurrency: int
    steps: tuple[CapacityStep, ...]
    windows: tuple[WindowT, ...]
    last_pass: int
    first_fail: int | None
    error: str | None = None
    policy: StepPolicy = field(default_factory=StepPolicy)
    inconclusive: tuple[int, ...] = ()

    @property
    def capacity(self) -> int | None:
        """The highest concurrency that surely met the SLO; None when the search broke off."""
        return None if self.error is not None else self.last_pass

    @property
    def bracket(self) -> tuple[int, int | None] | None:
        """(surely passing, surely missing or None); None when the search broke off."""
        return None if self.error is not None else (self.last_pass, self.first_fail)

    @property
    def capacity_step(self) -> CapacityStep | None:
        """The window that decided the passing step at the capacity; None when the capacity
        is 0 or unknown."""
        if self.capacity is None or self.capacity == 0:
            return None
        return next(s for s in reversed(self.steps)
                    if s.concurrency == self.capacity and s.passed)

    @property
    def reason(self) -> str | None:
        """A line for a result that needs one: capacity 0, the maximum reached, an open or
        wide interval, broken off."""
        if self.error is not None:
            return self.error
        undecided = ""
        if self.inconclusive:
            undecided = (f"; inconclusive at {', '.join(f'c{c}' for c in self.inconclusive)} "
                         "after their most windows")
        if self.last_pass == 0:
            first = self._last_at(self.first_fail or min(s.concurrency for s in self.steps))
            met = "n/a" if first.decision is None else (
                f"{_share(first.decision.good / first.decision.requests)} of its requests met "
                f"it ({first.decision.good}/{first.decision.requests})")
            sure = "surely misses" if self.first_fail == 1 else "is not shown to meet"
            return (f"{sure} the SLO even at concurrency 1: {met}, {_share(self.target)} "
                    f"needed{undecided}")
        if self.first_fail is None and self.last_pass >= self.max_concurrency:
            return (f"meets the SLO at the server's maximum concurrency {self.max_concurrency}: "
                    f"the capacity is at least {self.max_concurrency}, and the server runs "
                    "no more requests at once")
        if self.first_fail is None:
            return (f"no concurrency up to the maximum {self.max_concurrency} surely missed the "
                    f"SLO: the capacity is at least {self.last_pass}{undecided}")
        if undecided:
            return f"the capacity lies in {self.interval_text()}{undecided}"
        return None

    def interval_text(self) -> str:
        """E.g. ``5``, ``4–7`` or ``≥ 16``."""
        return CapacityBracket(self.last_pass, self.last_pass, self.first_fail).interval_text()

    def _last_at(self, concurrency: int) -> CapacityStep:
        return next(s for s in reversed(self.steps) if s.concurrency == concurrency)


UNDECIDED = "undecided"
"""A step's outcome while it has fewer windows than the policy's ``min_windows``."""


def find_capacity(
    measure: Callable[[int], tuple[Goodput, WindowT]],
    *,
    max_concurrency: int,
    target: float,
    policy: StepPolicy = StepPolicy(),
    on_step: Callable[[CapacityStep], None] | None = None,
) -> CapacityResult[WindowT]:
    """Search the capacity: ``measure(c)`` runs one timed window with ``c`` in flight and
    returns its goodput and the window; ``on_step`` sees each window as it is measured.

    First it *navigates* with one window a concurrency, read by its share alone (1, 2, 4,
    ... capped at the maximum until a window falls below the target, then bisection to
    adjacent concurrencies), then it *decides* the boundary: the concurrencies that looked
    passing, highest first, each taking windows until its step surely passes (the capacity's
    low end) or surely misses; then those that looked missing, lowest first, until one
    surely misses (its high end). Every decision pools all windows measured at that
    concurrency (:class:`StepPolicy`); a step still undecided after its most windows is
    inconclusive and the walk goes on to the next one.
    """
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) \
            or max_concurrency < 1:
        raise ValueError(f"max_concurrency must be a positive integer, got {max_concurrency!r}")
    if not 0.0 < target <= 1.0:
        raise ValueError(f"the attainment target must be a share in (0, 1], got {target!r}")
    if policy.min_windows < 1 or policy.max_windows < policy.min_windows:
        raise ValueError(f"a step policy needs 1 <= min_windows <= max_windows, got {policy}")
    steps: list[CapacityStep] = []
    windows: list[WindowT] = []
    pooled: dict[int, list[tuple[int, int]]] = {}

    def window(concurrency: int) -> CapacityStep:
        goodput, measured_window = measure(concurrency)
        measured = CapacityStep.of(concurrency, goodput, measured_window, target)
        if not measured.broken:
            at = pooled.setdefault(concurrency, [])
            at.append((goodput.good, goodput.requests))
            interval = windows_attainment(at, policy.confidence)
            outcome = (str(interval.decide(target)) if len(at) >= policy.min_windows
                       else UNDECIDED)
            measured = replace(measured, passed=outcome == StepOutcome.PASS, decision=StepDecision(
                len(at), interval.good, interval.requests, interval.low, interval.high,
                interval.confidence, interval.design_effect, outcome))
        else:
            measured = replace(measured, passed=False)
        steps.append(measured)
        windows.append(measured_window)
        if on_step is not None:
            on_step(measured)
        return measured

    def decide(concurrency: int) -> CapacityStep:
        """Windows at ``concurrency`` until its step is decided or has its most windows."""
        step = next((s for s in reversed(steps) if s.concurrency == concurrency), None)
        most = None
        while True:
            if step is None:
                step = window(concurrency)
            if step.broken or step.decision is None:
                return step
            most = most or policy.windows_at(pooled[concurrency][0][1], target)
            if step.decision.outcome in (StepOutcome.PASS, StepOutcome.MISS) \
                    or step.decision.windows >= most:
                return step
            step = None

    def result(last_pass: int, first_fail: int | None, error: str | None = None,
               inconclusive: Sequence[int] = ()) -> CapacityResult[WindowT]:
        return CapacityResult(target, max_concurrency, tuple(steps), tuple(windows),
                              last_pass, first_fail, error, policy, tuple(inconclusive))

    # navigate: one window a concurrency, read by its share
    looked: dict[int, bool] = {}
    good_at, bad_at = 0, None
    concurrency = 1
    while True:  # grow: 1, 2, 4, ... capped at the maximum
        measured = window(concurrency)
        if measured.broken:
            return result(good_at, None, broken_reason(measured))
        looked[concurrency] = _looks_passing(measured, target)
        if not looked[concurrency]:
            bad_at = concurrency
            break
        good_at = concurrency
        if concurrency >= max_concurrency:
            break
        concurrency = min(2 * concurrency, max_concurrency)
    while bad_at is not None and bad_at - good_at > 1:  # bisect to adjacent concurrencies
        concurrency = (good_at + bad_at) // 2
        measured = window(concurrency)
        if measured.broken:
            return result(good_at, bad_at, broken_reason(measured))
        looked[concurrency] = _looks_passing(measured, target)
        if looked[concurrency]:
            good_at = concurrency
        else:
            bad_at = concurrency

    # decide the boundary, from the navigated concurrencies outward: first the ones that
    # looked missing, lowest first (their windows differ the most, and so show best how
    # alike a window's requests are), then the ones that looked passing, highest first
    last_pass, first_fail = 0, None
    inconclusive: list[int] = []
    for concurrency in sorted(c for c, ok in looked.items() if not ok):
        decided = decide(concurrency)
        if decided.broken:
            return result(good_at, None, broken_reason(decided))
        outcome = decided.decision.outcome if decided.decision is not None else None
        if outcome == StepOutcome.MISS:
            first_fail = concurrency
            break
        if outcome == StepOutcome.PASS:
            last_pass = concurrency
        else:
            inconclusive.append(concurrency)
    for concurrency in sorted((c for c, ok in looked.items() if ok), reverse=True):
        if concurrency <= last_pass:
            break
        if first_fail is not None and concurrency >= first_fail:
            continue  # above a step that surely missed: misses too
        decided = decide(concurrency)
        if decided.broken:
            return result(last_pass, first_fail, broken_reason(decided))
        outcome = decided.decision.outcome if decided.decision is not None else None
        if outcome == StepOutcome.PASS:
            last_pass = concurrency
            break
        if outcome == StepOutcome.MISS:
            first_fail = concurrency
        else:
            inconclusive.append(concurrency)
    return result(last_pass, first_fail,
                  inconclusive=sorted(c for c in set(inconclusive)
                                      if last_pass < c and (first_fail is None or c < first_fail)))


def _looks_passing(step: CapacityStep, target: float) -> bool:
    """Whether one window's share alone reaches the target (how the search navigates)."""
    return step.slo_attainment is not None and step.slo_attainment >= target


def broken_reason(step: CapacityStep, listed: int = 3) -> str:
    """Why a broken window stops the search, in one line."""
    if not step.violations:
        return (f"the window at concurrency {step.concurrency} sent no requests; "
                "no capacity is concluded from it")
    shown = "; ".join(step.violations[:listed])
    more = f" (and {len(step.violations) - listed} more)" if len(step.violations) > listed else ""
    return (f"the window at concurrency {step.concurrency} broke its rules: {shown}{more}; "
            "no capacity is concluded from a broken window")


def step_line(model: str, number: int, step: CapacityStep, target: float) -> str:
    """E.g. ``capacity smollm2-135m: window 5, c4 (its 2nd): SLO met by 25.0% (2/8); step
    c4 3/16 = 18.8%, 97.5% CI [3.1%, 49.0%] (design effect 1.00), 90% needed: miss; 412.3
    tokens/s, goodput 1.20 req/s``; a navigating window says ``navigating``."""
    met = f"SLO met by {_share(step.slo_attainment, 1)} ({step.good}/{step.requests})"
    decision = step.decision
    if step.broken:
        verdict = f"broken ({len(step.violations)} violation(s))"
        nth = ""
    elif decision is None:
        verdict = f"{_share(target)} needed: {'pass' if step.passed else 'miss'}"
        nth = ""
    else:
        nth = f" (its {_ordinal(decision.windows)})"
        if decision.outcome == UNDECIDED:
            looks = "above" if (step.slo_attainment or 0.0) >= target else "below"
            verdict = f"navigating: {looks} the {_share(target)} needed"
        else:
            share = decision.good / decision.requests
            verdict = (f"step c{step.concurrency} {decision.good}/{decision.requests} = "
                       f"{_share(share, 1)}, {100 * decision.confidence:.4g}% CI "
                       f"[{_share(decision.low, 1)}, {_share(decision.high, 1)}] (design effect "
                       f"{decision.design_effect:.2f}), {_share(target)} needed: "
                       f"{decision.outcome}")
    goodput = "n/a" if step.goodput_rps is None else f"{step.goodput_rps:.2f} req/s"
    return (f"capacity {model}: window {number}, c{step.concurrency}{nth}: {met}; {verdict}; "
            f"{step.output_tokens_per_s:.1f} tokens/s, goodput {goodput}")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _share(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class MeasuredWindow:
    """One measured step: the throughput window, its goodput, timed requests and contention."""

    result: ThroughputResult
    goodput: Goodput
    timed: int
    contention: Contention

    @property
    def output_tokens_per_s(self) -> float:
        return self.result.output_tokens_per_s

    @property
    def violations(self) -> list[str]:
        return self.result.violations


def timed_requests(settings: BenchSettings, concurrency: int) -> int:
    """``--timed-requests``, else 2 × concurrency, at least 4; never fewer than the
    concurrency, so that the window really has that many requests in flight."""
    return max(settings.timed_requests_at(concurrency), concurrency)


def search(
    endpoint: Endpoint, settings: BenchSettings, slo: Slo, max_concurrency: int,
    progress: Callable[[str], None], measured: list[tuple[CapacityStep, MeasuredWindow]],
    policy: StepPolicy = StepPolicy(),
) -> CapacityResult[MeasuredWindow]:
    """The capacity search on one endpoint; every step also lands in ``measured`` as it
    is taken (so that a window that raises still leaves the earlier ones)."""
    from .contention import ContentionMeter
    from .throughput import make_tokenizer, measure_window

    tokenizer = make_tokenizer(endpoint)
    server_pids = endpoint.server_pids()
    name = endpoint.model.name
    target = settings.slo_attainment
    windows: list[MeasuredWindow] = []

    def window(concurrency: int) -> tuple[Goodput, MeasuredWindow]:
        step = len(windows) + 1
        progress(f"capacity {name}: window {step}, c{concurrency}: measuring")
        meter = ContentionMeter.of(server_pids, settings)
        timed = timed_requests(settings, concurrency)
        result = measure_window(
            endpoint, benchmark="capacity", concurrency=concurrency, prompt_tokens=None,
            repeat=f"step{step}", run_id=settings.run_id, timed_requests=timed,
            timeout_s=settings.request_timeout_s, idle_timeout_s=settings.idle_timeout_s,
            tokenizer=tokenizer, meter=meter,
        )
        goodput = window_goodput([r.to_dict() for r in result.records], slo, result.duration_s)
        windows.append(MeasuredWindow(result, goodput, timed, meter.result))
        return goodput, windows[-1]

    def shown(step: CapacityStep) -> None:
        measured.append((step, windows[-1]))
        contended = windows[-1].contention.contended
        busy = "unknown" if contended is None else ("yes" if contended else "no")
        progress(f"{step_line(name, len(measured), step, target)}, contended: {busy}")

    try:
        return find_capacity(window, max_concurrency=max_concurrency, target=target,
                             policy=policy, on_step=shown)
    finally:
        tokenizer.close()


def recorded_step(step: CapacityStep, window: MeasuredWindow, settings: BenchSettings,
                  ) -> CapacityStep:
    """One step as the measurement lists it, with its window's figures."""
    usd = None if settings.pricing is None else usd_per_million_output_tokens(
        settings.pricing.usd_per_hour, step.output_tokens_per_s)
    return replace(step, recorded=StepWindow(
        window.timed, window.result.ttft.in_ms(), window.result.tpot.in_ms(),
        window.result.e2e.in_ms(), window.result.fidelity, window.contention,
        priced=settings.pricing is not None, usd_per_million_output_tokens=usd,
        server_metrics=window.result.server))


def capacity_stats(
    settings: BenchSettings, source: str, measured: Sequence[tuple[CapacityStep, MeasuredWindow]],
    result: CapacityResult[MeasuredWindow] | None, error: str | None,
    policy: StepPolicy = StepPolicy(),
) -> CapacityStats:
    """The record of a search: ``result`` None (with ``error``) when it broke off."""
    at = None if result is None else result.capacity_step
    at_capacity = None
    if at is not None:
        usd = None if settings.pricing is None else usd_per_million_output_tokens(
            settings.pricing.usd_per_hour, at.output_tokens_per_s)
        at_capacity = AtCapacity(at.output_tokens_per_s, at.goodput_rps, at.slo_attainment, usd)
    contended = sum(1 for _, window in measured if window.contention.contended)
    return CapacityStats(
        capacity=None if result is None else result.capacity,
        steps=tuple(recorded_step(step, window, settings) for step, window in measured),
        bracket=None if result is None else result.bracket, max_concurrency_source=source,
        contended=contended > 0, contended_windows=contended, at_capacity=at_capacity,
        pricing=settings.pricing,
        reason=error if error is not None else None if result is None else result.reason,
        error=error, confidence=policy.interval_confidence,
        inconclusive=() if result is None else result.inconclusive,
    )


def measure_capacity(
    endpoint: Endpoint, settings: BenchSettings, slo: Slo, max_concurrency: int, source: str,
    record_measurement: Callable[..., Any], progress: Callable[[str], None],
) -> CapacityResult[MeasuredWindow]:
    """Search one endpoint's capacity under ``slo``, record it (also a search that broke off:
    the value is then the highest concurrency that passed before it, ``stats.capacity``
    null), and raise :class:`MeasurementError` for a search that stopped at a broken window.
    """
    from .throughput import OUTPUT_TOKENS

    policy = StepPolicy()
    measured: list[tuple[CapacityStep, MeasuredWindow]] = []

    def record(result: CapacityResult[MeasuredWindow] | None, error: str | None) -> None:
        requests: list[dict[str, Any]] = []
        for index, (step, window) in enumerate(measured):
            requests += [{**r.to_dict(), "step": index, "concurrency": step.concurrency}
                         for r in window.result.records]
        passed = [step.concurrency for step, _ in measured if step.passed]
        record_measurement(
            "capacity", result.last_pass if result is not None else max(passed, default=0),
            "concurrent requests", len(requests),
            params={"slo": slo.as_dict(), "attainment_target": settings.slo_attainment,
                    "max_concurrency": max_concurrency, "output_tokens": OUTPUT_TOKENS,
                    "timed_requests": settings.timed_requests, **policy.as_params()},
            stats=capacity_stats(settings, source, measured, result, error, policy),
            requests=requests, endpoint=endpoint,
        )

    try:
        result = search(endpoint, settings, slo, max_concurrency, progress, measured, policy)
    except Exception as error:
        if measured:  # what the clean windows before it showed, marked broken off
            record(None, f"the search broke off: {error}")
        raise
    record(result, result.error)
    if result.error is not None:
        raise MeasurementError(f"{endpoint.model.name}: {result.error}")
    return result


# --------------------------------------------------------------------------- comparing


def capacity_ratio(candidate: CapacityBracket, reference: CapacityBracket) -> CapacityRatio:
    """Candidate ÷ reference capacity with its interval; the reference's capacity must be > 0.

    A search's SLO curve crosses the target between its last passing and first missing
    concurrency, ``[last_pass, first_fail)`` (open above when nothing missed), at the
    interval's confidence γ; so the ratio of the two crossings lies between
    ``cand_last_pass / ref_first_fail`` and ``cand_first_fail / ref_last_pass`` (0 and
    unbounded for the open ends), at 1 - (1 - γ_cand) - (1 - γ_ref) (Bonferroni). Brackets of
    older one-window searches (no confidence) give the same bounds with no level."""
    if reference.capacity <= 0:
        raise ValueError("cannot compare: the reference meets the SLO at no concurrency")
    low = 0.0 if reference.first_fail is None else candidate.last_pass / reference.first_fail
    high = math.inf if candidate.first_fail is None \
        else candidate.first_fail / reference.last_pass
    levels = (candidate.confidence, reference.confidence)
    confidence = None if levels[0] is None or levels[1] is None \
        else 1.0 - (1.0 - levels[0]) - (1.0 - levels[1])
    return CapacityRatio(candidate.capacity / reference.capacity, low, high, candidate,
                         reference, confidence)


def decide_capacity_verdict(ratio: CapacityRatio, tolerance: float = 0.0) -> Verdict:
    """The verdict on a capacity ratio: :func:`~pytest_modelsweep.core.stats.decide_ratio_verdict`'s
    rules applied to its interval.

    Interval wholly below ``1 - tolerance``: worse; wholly above ``1 + tolerance``:
    better; covering 1: matches; wholly within ``1 ± tolerance`` without covering 1:
    equivalent; else inconclusive. A degenerate interval (both searches reached their
    maximum) is inconclusive, and so is a bracket of older one-window searches (no
    confidence level): no verdict is drawn from it.
    """
    verdict = decide_ratio_verdict(ratio, tolerance)
    return Verdict.INCONCLUSIVE if ratio.confidence is None else verdict


def interval_text(ratio: CapacityRatio) -> str:
    """E.g. ``95% interval 1.50–4.00`` (``1.50–∞`` when open above); an older bracket says
    ``search bracket 1.50–4.00, no confidence level``."""
    high = "∞" if math.isinf(ratio.high) else f"{ratio.high:.2f}"
    if ratio.confidence is None:
        return f"search bracket {ratio.low:.2f}–{high}, no confidence level"
    return f"{100 * ratio.confidence:.4g}% interval {ratio.low:.2f}–{high}"


__all__ = [
    "INTERVAL_CONFIDENCE",
    "MAX_WINDOWS",
    "MIN_WINDOWS",
    "NEEDS_SLO",
    "RULE_INTERVAL",
    "SERVER_LIMIT_KEYS",
    "STEP_CONFIDENCE",
    "UNDECIDED",
    "CapacityBracket",
    "CapacityRatio",
    "CapacityResult",
    "CapacityStep",
    "MeasuredWindow",
    "StepPolicy",
    "Window",
    "interval_text",
    "broken_reason",
    "capacity_ratio",
    "capacity_stats",
    "decide_capacity_verdict",
    "find_capacity",
    "measure_capacity",
    "server_max_concurrency",
    "step_line",
]
