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

Pure: no pytest, no I/O; the bench measures the windows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..core.slo import Goodput
from .attainment import (
    DEFAULT_CONFIDENCE,
    AttainmentInterval,
    StepOutcome,
    check_confidence,
    attainment_interval,
    min_requests_to_pass,
    requests_per_step_problem,
    windows_attainment,
)

DEFAULT_GROWTH = 2.0
DEFAULT_RESOLUTION = 0.10
"""The bisection stops once first fail ÷ last pass ≤ 1 + this."""

DEFAULT_MAX_STEPS = 12


class RateWindow(Protocol):
    """What the sweep reads of one measured window (an ``OpenLoopWindow`` has it)."""

    @property
    def output_tokens_per_s(self) -> float: ...

    @property
    def violations(self) -> Sequence[str]: ...

    @property
    def offered_rps(self) -> float | None: ...

    @property
    def achieved_rps(self) -> float | None: ...

    @property
    def saturated(self) -> bool: ...

    @property
    def saturation_reason(self) -> str | None: ...


WindowT = TypeVar("WindowT", bound=RateWindow)


@dataclass(frozen=True)
class RateStep:
    """One step of the sweep: a window at one rate and what it decided."""

    rate: float
    outcome: StepOutcome
    interval: AttainmentInterval | None
    goodput_rps: float | None
    offered_rps: float | None
    achieved_rps: float | None
    output_tokens_per_s: float
    saturation: str | None = None
    violations: tuple[str, ...] = ()

    @classmethod
    def of(cls, rate: float, goodput: Goodput, window: RateWindow, target: float,
           confidence: float) -> RateStep:
        interval = (windows_attainment([(goodput.good, goodput.requests)], confidence)
                    if goodput.requests else None)
        if window.violations or interval is None:
            outcome = StepOutcome.BROKEN
        elif window.saturated:
            outcome = StepOutcome.SATURATED
        else:
            outcome = interval.decide(target)
        return cls(rate=rate, outcome=outcome, interval=interval,
                   goodput_rps=goodput.goodput_rps, offered_rps=window.offered_rps,
                   achieved_rps=window.achieved_rps,
                   output_tokens_per_s=window.output_tokens_per_s,
                   saturation=window.saturation_reason, violations=tuple(window.violations))

    @property
    def failed(self) -> bool:
        """A miss or a saturated step: the capacity lies below this rate."""
        return self.outcome in (StepOutcome.MISS, StepOutcome.SATURATED)

    def as_dict(self) -> dict[str, Any]:
        return {"rate": self.rate, "outcome": str(self.outcome),
                "attainment": None if self.interval is None else self.interval.as_dict(),
                "goodput_rps": self.goodput_rps, "offered_rps": self.offered_rps,
                "achieved_rps": self.achieved_rps,
                "output_tokens_per_s": self.output_tokens_per_s,
                "saturation": self.saturation, "violations": list(self.violations)}


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
                "steps": [s.as_dict() for s in self.steps]}


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
        decided = RateStep.of(rate, goodput, window, target, confidence)
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


__all__ = [
    "DEFAULT_CONFIDENCE", "DEFAULT_GROWTH", "DEFAULT_MAX_STEPS", "DEFAULT_RESOLUTION",
    "AttainmentInterval", "RateSweepResult", "RateStep", "RateWindow", "StepOutcome",
    "attainment_interval", "broken_line", "fail_line", "find_rate_capacity",
    "min_requests_to_pass", "requests_per_step_problem", "step_line",
]
