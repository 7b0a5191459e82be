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
:func:`~pytest_modelsweep.stats.decide_ratio_verdict` to that bracket.

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
from dataclasses import dataclass, replace
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
    StepWindow,
    Window,
)
from ..core.slo import Goodput, Slo, window_goodput
from ..core.stats import Verdict

if TYPE_CHECKING:
    from ..core.settings import BenchSettings
    from ..serving.endpoint import Endpoint
    from .throughput import ThroughputResult

SERVER_LIMIT_KEYS = ("max_num_seqs", "total_slots")
"""Provenance ``server_settings`` keys that say how many sequences a server runs at once
(vLLM's ``max_num_seqs``, llama.cpp's ``total_slots``)."""

NEEDS_SLO = "capacity needs --slo, e.g. --slo ttft=500ms,tpot=50ms"
"""Why capacity tests skip in a run without ``--slo``."""

RULE_BRACKET = "capacity-bracket-beyond-tolerance"
"""The rule of :func:`decide_capacity_verdict`, as recorded with the verdict."""


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
class CapacityResult(Generic[WindowT]):
    """What a search found: the steps in the order tried, and the bracket they give.

    ``last_pass`` is the highest concurrency that passed (0: none did) and
    ``first_fail`` the lowest that missed above it (None: the maximum passed).
    ``error`` says why the search stopped at a broken window; then no capacity
    is concluded (:attr:`capacity` and :attr:`bracket` are None) and ``last_pass``
    is only what the clean windows before it showed.
    """

    target: float
    max_concurrency: int
    steps: tuple[CapacityStep, ...]
    windows: tuple[WindowT, ...]
    last_pass: int
    first_fail: int | None
    error: str | None = None

    @property
    def capacity(self) -> int | None:
        """The highest concurrency that met the SLO; None when the search broke off."""
        return None if self.error is not None else self.last_pass

    @property
    def bracket(self) -> tuple[int, int | None] | None:
        """(last passing, first missing or None); None when the search broke off."""
        return None if self.error is not None else (self.last_pass, self.first_fail)

    @property
    def capacity_step(self) -> CapacityStep | None:
        """The passing step at the capacity; None when the capacity is 0 or unknown."""
        if self.capacity is None or self.capacity == 0:
            return None
        return next(s for s in self.steps if s.concurrency == self.capacity and s.passed)

    @property
    def reason(self) -> str | None:
        """A line for a result that needs one: capacity 0, the maximum reached, broken off."""
        if self.error is not None:
            return self.error
        if self.last_pass == 0:
            first = self.steps[0]
            return (f"misses the SLO even at concurrency 1: "
                    f"{_share(first.slo_attainment)} of its requests met it "
                    f"({first.good}/{first.requests}), {_share(self.target)} needed")
        if self.first_fail is None:
            return (f"meets the SLO at the server's maximum concurrency {self.max_concurrency}: "
                    f"the capacity is at least {self.max_concurrency}, and the server runs "
                    "no more requests at once")
        return None


def find_capacity(
    measure: Callable[[int], tuple[Goodput, WindowT]],
    *,
    max_concurrency: int,
    target: float,
    on_step: Callable[[CapacityStep], None] | None = None,
) -> CapacityResult[WindowT]:
    """Search the capacity: ``measure(c)`` runs one timed window with ``c`` in flight and
    returns its goodput and the window; ``on_step`` sees each step as it is measured."""
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) \
            or max_concurrency < 1:
        raise ValueError(f"max_concurrency must be a positive integer, got {max_concurrency!r}")
    if not 0.0 < target <= 1.0:
        raise ValueError(f"the attainment target must be a share in (0, 1], got {target!r}")
    steps: list[CapacityStep] = []
    windows: list[WindowT] = []

    def step(concurrency: int) -> CapacityStep:
        goodput, window = measure(concurrency)
        measured = CapacityStep.of(concurrency, goodput, window, target)
        steps.append(measured)
        windows.append(window)
        if on_step is not None:
            on_step(measured)
        return measured

    def result(last_pass: int, first_fail: int | None, error: str | None = None,
               ) -> CapacityResult[WindowT]:
        return CapacityResult(target, max_concurrency, tuple(steps), tuple(windows),
                              last_pass, first_fail, error)

    last_pass, first_fail = 0, None
    concurrency = 1
    while True:  # grow: 1, 2, 4, ... capped at the maximum
        measured = step(concurrency)
        if measured.broken:
            return result(last_pass, None, broken_reason(measured))
        if not measured.passed:
            first_fail = concurrency
            break
        last_pass = concurrency
        if concurrency >= max_concurrency:
            return result(last_pass, None)
        concurrency = min(2 * concurrency, max_concurrency)
    while first_fail - last_pass > 1:  # bisect between the last pass and the first miss
        concurrency = (last_pass + first_fail) // 2
        measured = step(concurrency)
        if measured.broken:
            return result(last_pass, first_fail, broken_reason(measured))
        if measured.passed:
            last_pass = concurrency
        else:
            first_fail = concurrency
    return result(last_pass, first_fail)


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
    """E.g. ``capacity smollm2-135m: step 3, c4: SLO met by 25.0% (2/8), 90% needed: miss;
    412.3 tokens/s, goodput 1.20 req/s``."""
    if step.broken:
        verdict = f"broken ({len(step.violations)} violation(s))"
    else:
        verdict = "pass" if step.passed else "miss"
    goodput = "n/a" if step.goodput_rps is None else f"{step.goodput_rps:.2f} req/s"
    return (f"capacity {model}: step {number}, c{step.concurrency}: SLO met by "
            f"{_share(step.slo_attainment, 1)} ({step.good}/{step.requests}), "
            f"{_share(target)} needed: {verdict}; {step.output_tokens_per_s:.1f} tokens/s, "
            f"goodput {goodput}")


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
        progress(f"capacity {name}: step {step}, c{concurrency}: measuring")
        meter = ContentionMeter(server_pids, max_other_cores=settings.contended_cores)
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
                             on_step=shown)
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
        error=error,
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
                    "max_concurrency": max_concurrency, "output_tokens": OUTPUT_TOKENS},
            stats=capacity_stats(settings, source, measured, result, error),
            requests=requests, endpoint=endpoint,
        )

    try:
        result = search(endpoint, settings, slo, max_concurrency, progress, measured)
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
    """The ratio of two capacities with its bracket; the reference's capacity must be > 0."""
    if reference.capacity <= 0:
        raise ValueError("cannot compare: the reference meets the SLO at no concurrency")
    low = 0.0 if reference.first_fail is None else candidate.last_pass / reference.first_fail
    high = math.inf if candidate.first_fail is None \
        else candidate.first_fail / reference.last_pass
    return CapacityRatio(candidate.capacity / reference.capacity, low, high, candidate, reference)


def decide_capacity_verdict(ratio: CapacityRatio, tolerance: float = 0.0) -> Verdict:
    """The verdict on a capacity ratio: :func:`~pytest_modelsweep.stats.decide_ratio_verdict`'s
    rules applied to the search bracket.

    Bracket wholly below ``1 - tolerance``: worse; wholly above ``1 + tolerance``:
    better; covering 1: matches; wholly within ``1 ± tolerance`` without covering 1:
    equivalent; else inconclusive. A degenerate bracket (both searches reached their
    maximum) is inconclusive.
    """
    if not (math.isfinite(tolerance) and 0.0 <= tolerance < 1.0):
        raise ValueError(f"ratio tolerance must be in [0, 1), got {tolerance!r}")
    if ratio.degenerate:
        return Verdict.INCONCLUSIVE
    low, high = ratio.low, ratio.high
    if high < 1.0 - tolerance:
        return Verdict.WORSE
    if low > 1.0 + tolerance:
        return Verdict.BETTER
    if low <= 1.0 <= high:
        return Verdict.MATCHES
    if 1.0 - tolerance <= low and high <= 1.0 + tolerance:
        return Verdict.EQUIVALENT
    return Verdict.INCONCLUSIVE


def bracket_text(ratio: CapacityRatio) -> str:
    """E.g. ``search bracket 1.50–4.00`` (``1.50–∞`` when open above)."""
    high = "∞" if math.isinf(ratio.high) else f"{ratio.high:.2f}"
    return f"search bracket {ratio.low:.2f}–{high}"


__all__ = [
    "NEEDS_SLO",
    "RULE_BRACKET",
    "SERVER_LIMIT_KEYS",
    "CapacityBracket",
    "CapacityRatio",
    "CapacityResult",
    "CapacityStep",
    "MeasuredWindow",
    "Window",
    "bracket_text",
    "broken_reason",
    "capacity_ratio",
    "capacity_stats",
    "decide_capacity_verdict",
    "find_capacity",
    "measure_capacity",
    "server_max_concurrency",
    "step_line",
]
