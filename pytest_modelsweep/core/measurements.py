"""One typed record per kind of measurement, and the :class:`Measurement` that carries one.

A measurement's ``stats`` is the record :func:`stats_type` names by its benchmark's kind (for a
comparison, the kind it compares; :class:`OtherStats` for a benchmark the metric table does not
know). Each record's fields are its keys in the results file and the store, written
(``to_dict``) and read (``from_dict``) by :mod:`.codec`'s converter. Pure: no pytest.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, Protocol

import cattrs
from cattrs.gen import make_dict_structure_fn, override

from .codec import Record, RecordError, converter, json_object, located, wrong
from .cost import CostFigures, Pricing
from .jsontext import int_or_none, number_or_none
from .metrics import Kind, metric_for
from .records import ItemRecord, RequestRecord
from .slo import GoodputFigures
from .stats import Verdict
from .stats.bootstrap import PairedInterval
from .stats.intervals import RatioInterval, log_mean_interval

# --------------------------------------------------------------------------- shared parts


SERVER_QUEUED = "server queued"
"""The flag of a window whose server queued or preempted while the client had N in flight."""
SATURATED = "saturated"
"""The flag of an open-loop window whose server fell behind the offered rate."""
DEGENERATE = "degenerate"
"""The flag of an open-loop window that cannot support a figure (:attr:`OpenLoop.degenerate`)."""


def side_flags(
    *,
    unstable: bool,
    cv: float | None,
    contended: bool,
    server_queued: bool = False,
    saturated: bool = False,
    degenerate: bool = False,
) -> tuple[str, ...]:
    """What makes one side of a comparison doubtful: ``unstable (CV 53%)``, ``contended``,
    ``server queued`` (it did not run all the client had in flight), ``saturated``,
    ``degenerate``."""
    shown = "unstable" if cv is None else f"unstable (CV {cv:.0%})"
    return tuple(
        flag
        for flag, on in (
            (shown, unstable),
            ("contended", contended),
            (SERVER_QUEUED, server_queued),
            (SATURATED, saturated),
            (DEGENERATE, degenerate),
        )
        if on
    )


def flags_text(candidate: Sequence[str] | None, reference: Sequence[str] | None) -> str:
    """``; the reference's measurement is flagged unstable (CV 53%), contended``, or ``""``."""
    parts = [
        f"the {role}'s measurement is flagged {', '.join(flags)}"
        for role, flags in (("candidate", candidate), ("reference", reference))
        if flags
    ]
    return "; " + "; ".join(parts) if parts else ""


@dataclass(frozen=True)
class Latency(Record):
    """One latency over a window's requests, in milliseconds (NaN without any request)."""

    mean_ms: float = math.nan
    p50_ms: float = math.nan
    p90_ms: float = math.nan
    p99_ms: float = math.nan
    n: int = 0


@dataclass(frozen=True)
class Contention(Record):
    """Who else used the CPUs during one timed window (``contended`` None: unknown)."""

    window_s: float | None = None
    other_cpu_cores: float | None = None
    server_cpu_cores: float | None = None
    client_cpu_cores: float | None = None
    steal_share: float | None = None
    load1_end: float | None = None
    contended: bool | None = None


# --------------------------------------------------------------------------- accuracy


STOP_DECIDED, STOP_FINAL, STOP_FAILED, STOP_NO_USE = "decided", "final", "failed", "no use"
"""Why a sequential accuracy run stopped: every comparison decided; no more items (the data
set's end or ``--limit``); items got no answer; no comparison could use more of its items
(the other side failed, ended short, or holds other items)."""


@dataclass(frozen=True)
class AccuracySequence(Record):
    """How a sequential accuracy run (``--until-decided``) went: ``used`` of ``population``
    items scored in the seeded order when it stopped, for ``stop``; ``items_digest``: a digest
    of the population's ids (two runs paired item by item must have drawn the same items)."""

    population: int = 0
    used: int = 0
    round_size: int = 0
    order_seed: int = 0
    stop: str = ""
    comparisons: tuple[str, ...] = ()
    items_digest: str = ""

    def text(self) -> str:
        """``sequential: 120 of 300 items, decided`` (the accuracy's subset, in words)."""
        return f"sequential: {self.used} of {self.population} items, {self.stop}"


@dataclass(frozen=True)
class AccuracyStats(Record):
    """An accuracy run: ``accuracy`` is the mean score of the ``n`` answered items; ``figures``
    the benchmark's own ``summarise``; with ``sequence`` (``--until-decided``) it is over that
    subset."""

    n: int = 0
    items: int = 0
    failed: int = 0
    correct: int = 0
    accuracy: float = 0.0
    truncated_rate: float = 0.0
    sent: int = 0
    reused: int = 0
    wall_s: float = 0.0
    figures: Mapping[str, Any] = field(default_factory=dict)
    """The benchmark's own figures (what its ``summarise`` returns beside these)."""
    sequence: AccuracySequence | None = None

    @classmethod
    def of(
        cls,
        core: Mapping[str, Any],
        summary: Mapping[str, Any],
        *,
        sent: int,
        reused: int,
        wall_s: float,
        sequence: AccuracySequence | None = None,
    ) -> AccuracyStats:
        """From :func:`~pytest_modelsweep.api.evaluation.summarise_items`' ``core`` and the
        benchmark's ``summary``; the core figures win over the summary's of the same name."""
        given = {**summary, **core, "sent": sent, "reused": reused, "wall_s": wall_s}
        own = _field_names(cls)
        figures = {k: v for k, v in given.items() if k not in own}
        stats = cls.from_dict({k: v for k, v in given.items() if k in own} | {"figures": figures})
        return stats if sequence is None else replace(stats, sequence=sequence)

    # GSM8K's and BFCL's own figures (their summarise functions), None for other benchmarks
    @property
    def strict_match_accuracy(self) -> float | None:
        return number_or_none(self.figures.get("strict_match_accuracy"))

    @property
    def error_types(self) -> dict[str, int]:
        """BFCL: wrong answers per error type (empty for other benchmarks)."""
        types = self.figures.get("error_types")
        return (
            {str(k): v for k, v in types.items() if int_or_none(v) is not None}
            if isinstance(types, Mapping)
            else {}
        )

    @property
    def parse_failures(self) -> int | None:
        return int_or_none(self.figures.get("parse_failures"))


# --------------------------------------------------------------------------- a window's server


@dataclass(frozen=True)
class MetricsSample(Record):
    """One scrape of the server's ``/metrics``: when its answer came (perf clock, seconds),
    the mapped metrics it held, and how many requests the client had in flight then (None
    when nobody told the sampler)."""

    t: float = 0.0
    values: Mapping[str, float] = field(default_factory=dict)
    client_in_flight: int | None = None


@dataclass(frozen=True)
class SamplerCost(Record):
    """What sampling cost the client: CPU seconds (all scrapes and parses) over the wall
    time it ran; ``cpu_cores`` = their ratio."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    scrapes: int = 0
    failed_scrapes: int = 0

    @property
    def cpu_cores(self) -> float | None:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else None


@dataclass(frozen=True)
class GaugeSummary(Record):
    """A gauge over a window: mean of the samples (taken on a regular grid: a time average)
    and maximum."""

    mean: float = 0.0
    max: float = 0.0
    samples: int = 0


@dataclass(frozen=True)
class ServerMetricsSummary(Record):
    """One window's server metrics, summarised; None where the server exposes no such
    quantity (then :attr:`absent` says which names were looked for)."""

    samples: int = 0
    running: GaugeSummary | None = None
    waiting: GaugeSummary | None = None
    kv_cache_usage: GaugeSummary | None = None
    preemptions: float | None = None
    """Counter delta over the window."""
    prefix_cache_hits: float | None = None
    prefix_cache_queries: float | None = None
    absent: Mapping[str, str] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    peak_client_in_flight: int | None = None
    ignored: Mapping[str, str] | None = None
    """Quantity → why some samples were left out (a NaN or infinity the server exposed)."""

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Prompt tokens found in the prefix cache ÷ prompt tokens looked up, in the window;
        None when absent or nothing was looked up."""
        if self.prefix_cache_hits is None or not self.prefix_cache_queries:
            return None
        return self.prefix_cache_hits / self.prefix_cache_queries

    @property
    def queued(self) -> bool:
        """Whether the server had a request waiting at any sample."""
        return self.waiting is not None and self.waiting.max > 0

    @property
    def preempted(self) -> bool:
        return bool(self.preemptions)

    @property
    def flagged(self) -> bool:
        """The server queued or preempted: it did not run all the client had in flight."""
        return self.queued or self.preempted

    def flag_line(self) -> str | None:
        """E.g. ``the server queued up to 3 requests (running at most 2) while the client
        had up to 5 in flight``; None for an unflagged window."""
        if not self.flagged:
            return None
        parts = []
        if self.queued and self.waiting is not None:
            running = "" if self.running is None else f" (running at most {self.running.max:g})"
            parts.append(f"queued up to {self.waiting.max:g} requests{running}")
        if self.preempted:
            parts.append(f"preempted {self.preemptions:g} times")
        client = (
            ""
            if self.peak_client_in_flight is None
            else f" while the client had up to {self.peak_client_in_flight} in flight"
        )
        return f"the server {' and '.join(parts)}{client}"


@dataclass(frozen=True)
class ServerMetricsWindow(Record):
    """What the server's ``/metrics`` showed during one timed window: the series (a sample
    per scrape), its summary and the sampler's cost; ``unavailable`` says why there is
    nothing (no ``/metrics``), ``errors`` the first failed scrapes' lines."""

    server_kind: str = ""
    interval_s: float = 0.0
    samples: tuple[MetricsSample, ...] = ()
    summary: ServerMetricsSummary = field(default_factory=ServerMetricsSummary)
    cost: SamplerCost = field(default_factory=SamplerCost)
    unavailable: str | None = None
    errors: tuple[str, ...] = ()

    def series(self, name: str) -> list[tuple[float, float]]:
        """``(seconds since the first sample, value)`` of one mapped metric's samples."""
        if not self.samples:
            return []
        start = self.samples[0].t
        return [(s.t - start, s.values[name]) for s in self.samples if name in s.values]


# --------------------------------------------------------------------------- a window's arrivals


@dataclass(frozen=True)
class Saturation(Record):
    """Whether the server kept up with an open-loop window's offered rate: saturated when
    ``achieved_rps`` (``workloads/openloop.kept_up_rate``) falls more than ``tolerance``
    behind ``offered_rps``, or a request found the ``max_in_flight`` cap (``capped``)."""

    offered_rps: float | None = None
    achieved_rps: float | None = None
    tolerance: float = 0.0
    capped: int = 0
    max_in_flight: int = 0

    @property
    def shortfall(self) -> float | None:
        """1 − achieved ÷ offered (negative when completions ran ahead); None without both."""
        if self.offered_rps is None or self.achieved_rps is None or not self.offered_rps:
            return None
        return 1.0 - self.achieved_rps / self.offered_rps

    @property
    def saturated(self) -> bool:
        return self.reason() is not None

    def reason(self) -> str | None:
        """One line for a saturated window; None otherwise."""
        parts = []
        behind = self.shortfall
        if behind is not None and behind > self.tolerance:
            parts.append(
                f"achieved {self.achieved_rps:.3g} req/s of {self.offered_rps:.3g} "
                f"offered ({behind:.0%} behind; tolerance {self.tolerance:.0%})"
            )
        if self.capped > 0:
            parts.append(
                f"{self.capped} request(s) found the client's cap of "
                f"{self.max_in_flight} in flight reached and waited for a slot"
            )
        return "saturated: " + "; ".join(parts) if parts else None


@dataclass(frozen=True)
class OpenLoop(Record):
    """What an open-loop window adds to its throughput figures (``send_lag`` in ms); its
    latencies run from each request's scheduled send time."""

    rate: float = 0.0
    burstiness: float = 1.0
    ramp_up: Mapping[str, Any] | None = None
    describe: str = ""
    seed: int = 0
    saturation: Saturation = field(default_factory=Saturation)
    peak_in_flight: int = 0
    send_lag: Latency = field(default_factory=Latency)
    degenerate: str | None = None
    """Why the window cannot support a figure, in one line (most requests failed, or the
    client could not send at the offered rate); None: it can."""

    @property
    def saturated(self) -> bool:
        return self.saturation.saturated


# --------------------------------------------------------------------------- throughput


@dataclass(frozen=True)
class ThroughputWindow(Record):
    """One timed window of a throughput setting (one repeat): its rate, latencies, the
    server's counters it was checked against, its rule violations and contention; with an
    SLO its goodput, with a price its cost."""

    concurrency: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    duration_s: float = 0.0
    completed: int = 0
    output_tokens_per_s: float = 0.0
    requests_per_s: float = 0.0
    ttft: Latency = field(default_factory=Latency)
    tpot: Latency = field(default_factory=Latency)
    itl: Latency = field(default_factory=Latency)
    e2e: Latency = field(default_factory=Latency)
    total_prompt_tokens: int = 0
    total_completion_tokens: int = 0
    server_generated_tokens: float = 0.0
    generated_counter: str = ""
    fidelity: float = math.nan
    server_cached_tokens: float = 0.0
    reported_cached_tokens: int = 0
    server_prompt_tokens: float = 0.0
    bos_tokens: int = 0
    tokens_in_shared_chunks: int = 0
    violations: tuple[str, ...] = ()
    contention: Contention = field(default_factory=Contention)
    goodput: GoodputFigures | None = None
    priced: bool = False
    usd_per_million_output_tokens: float | None = None
    """When ``priced``: None for a rate that is not positive."""
    open_loop: OpenLoop | None = None
    """An open-loop window's arrivals and saturation (None: a closed loop, N in flight)."""
    server_metrics: ServerMetricsWindow | None = None
    """What the server's ``/metrics`` showed during the window (None: not sampled)."""

    @property
    def contended(self) -> bool:
        return self.contention.contended is True

    @property
    def server_flag(self) -> str | None:
        """A closed loop's server queued or preempted while the client had N in flight
        (:meth:`ServerMetricsSummary.flag_line`): it ran fewer than the window claims. None
        otherwise, unsampled, or in an open loop, where requests queue by design and each
        one's latency holds its wait (its summary still says how long the queue grew)."""
        if self.server_metrics is None or self.open_loop is not None:
            return None
        return self.server_metrics.summary.flag_line()

    @property
    def saturated(self) -> bool:
        """An open-loop window whose server fell behind the offered rate."""
        return self.open_loop is not None and self.open_loop.saturated

    @property
    def degenerate(self) -> bool:
        """An open-loop window that cannot support a figure."""
        return self.open_loop is not None and self.open_loop.degenerate is not None


@dataclass(frozen=True)
class ThroughputStats(Record):
    """One throughput setting over its repeats: ``unstable`` when the CV is above
    ``unstable_cv_limit``, ``contended`` when others used the CPUs in a window."""

    repeat_values: tuple[float, ...] = ()
    repeats: tuple[ThroughputWindow, ...] = ()
    cv: float | None = None
    unstable: bool = False
    unstable_cv_limit: float | None = None
    contended: bool = False
    contended_windows: int = 0
    repeats_rule: str = ""
    interval_rule: str | None = None
    """What made ``interval``: ``log-t`` (fixed repeats) or ``log-t-two-stage`` (auto)."""
    interval: tuple[float, float] | None = None
    """The 95% interval of the mean output tokens/s (None with one repeat)."""
    goodput: GoodputFigures | None = None
    cost: CostFigures | None = None

    @property
    def server_flagged_windows(self) -> int:
        """Windows whose server queued or preempted while the client had N in flight."""
        return sum(window.server_flag is not None for window in self.repeats)

    @property
    def saturated_windows(self) -> int:
        """Open-loop windows whose server fell behind the offered rate."""
        return sum(window.saturated for window in self.repeats)

    @property
    def degenerate_windows(self) -> int:
        """Open-loop windows that cannot support a figure."""
        return sum(window.degenerate for window in self.repeats)

    @property
    def flags(self) -> tuple[str, ...]:
        """``unstable (CV 53%)``, ``contended``, ``server queued``, ``saturated``,
        ``degenerate``: what makes this setting doubtful."""
        return side_flags(
            unstable=self.unstable,
            cv=self.cv,
            contended=self.contended,
            server_queued=self.server_flagged_windows > 0,
            saturated=self.saturated_windows > 0,
            degenerate=self.degenerate_windows > 0,
        )

    @property
    def pricing(self) -> Pricing | None:
        return None if self.cost is None else self.cost.pricing


# --------------------------------------------------------------------------- SLO search


CONCURRENCY = "concurrency"
"""The knob of a capacity search: requests in flight (``-m capacity``)."""
RATE = "rate"
"""The knob of a rate sweep: open-loop requests per second (``-m rate_capacity``)."""
SEARCH_BENCHMARK = {CONCURRENCY: "capacity", RATE: "rate_capacity"}
"""The benchmark a knob's search is recorded as."""


def knob_text(knob: str, value: float) -> str:
    """A knob's value as lines and brackets show it: ``4`` (concurrency), ``1.41`` (req/s)."""
    return str(int(value)) if knob == CONCURRENCY else f"{value:.3g}"


class StepOutcome(StrEnum):
    """What the windows of one step of an SLO search decided (see ``workloads/slo_search``):
    ``undecided`` while it has fewer windows than its policy's least."""

    PASS = "pass"
    MISS = "miss"
    INCONCLUSIVE = "inconclusive"
    SATURATED = "saturated"
    BROKEN = "broken"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class AttainmentInterval(Record):
    """The share of good requests of a step, with its Clopper-Pearson interval (of the
    effective counts when ``windows`` > 1 showed a ``design_effect`` above 1; see
    ``core/stats/attainment``)."""

    good: int = 0
    requests: int = 0
    confidence: float = 0.0
    low: float = 0.0
    high: float = 1.0
    method: str = "clopper-pearson"
    windows: int = 1
    design_effect: float = 1.0

    @property
    def share(self) -> float:
        return self.good / self.requests if self.requests else math.nan

    def decide(self, target: float) -> StepOutcome:
        """Pass when the whole interval reaches ``target``, miss when it lies below it."""
        if self.low >= target:
            return StepOutcome.PASS
        if self.high < target:
            return StepOutcome.MISS
        return StepOutcome.INCONCLUSIVE

    def text(self) -> str:
        """E.g. ``93.3% (28/30), 90% CI [80.9%, 98.8%]``; over several windows
        ``93.3% (28/30 in 3 windows, design effect 1.40), 95% CI [...]``."""
        counts = f"{self.good}/{self.requests}"
        if self.windows > 1:
            counts += f" in {self.windows} windows, design effect {self.design_effect:.2f}"
        return (
            f"{self.share:.1%} ({counts}), {100 * self.confidence:.4g}% CI "
            f"[{self.low:.1%}, {self.high:.1%}]"
        )


class SearchWindow(Protocol):
    """What a step of an SLO search reads of one measured window (a capacity window has no
    offered rate and never saturates: None)."""

    @property
    def output_tokens_per_s(self) -> float: ...

    @property
    def violations(self) -> Sequence[str]: ...

    @property
    def offered_rps(self) -> float | None: ...

    @property
    def achieved_rps(self) -> float | None: ...

    @property
    def saturation_reason(self) -> str | None: ...


@dataclass(frozen=True)
class SearchStep(Record):
    """One timed window of an SLO search at one ``value`` of its ``knob``: ``good`` of
    ``requests`` met the SLO; ``outcome``: what its step's windows so far decided over the
    pooled ``interval`` (None in an older search: its window alone decided); ``recorded``: the
    window's figures."""

    knob: str = CONCURRENCY
    value: int | float = 0
    good: int = 0
    requests: int = 0
    goodput_rps: float | None = None
    output_tokens_per_s: float = 0.0
    duration_s: float = 0.0
    outcome: StepOutcome = StepOutcome.BROKEN
    interval: AttainmentInterval | None = None
    violations: tuple[str, ...] = ()
    offered_rps: float | None = None
    achieved_rps: float | None = None
    saturation: str | None = None
    recorded: ThroughputWindow | None = None

    @property
    def concurrency(self) -> int:
        return int(self.value)

    @property
    def rate(self) -> float:
        return float(self.value)

    @property
    def slo_attainment(self) -> float | None:
        """Share of the window's requests that met every target; None without requests."""
        return self.good / self.requests if self.requests else None

    @property
    def passed(self) -> bool:
        """Whether the step surely passes, by its windows so far."""
        return self.outcome is StepOutcome.PASS

    @property
    def failed(self) -> bool:
        """A miss or a saturated step: the capacity lies below this value."""
        return self.outcome in (StepOutcome.MISS, StepOutcome.SATURATED)

    @property
    def broken(self) -> bool:
        """Whether the window broke its rules (or sent nothing): no conclusion from it."""
        return bool(self.violations) or self.requests == 0


@dataclass(frozen=True)
class SearchBracket(Record):
    """One model's capacity and search bracket, as a comparison reads them back: the SLO curve
    crosses the target in ``[last_pass, first_fail)`` (None: none failed) at ``confidence``
    (None: an older one-window-a-step search)."""

    capacity: int | float
    last_pass: int | float
    first_fail: int | float | None
    confidence: float | None = None
    knob: str = CONCURRENCY

    def text(self) -> str:
        """E.g. ``[3, 4]``, ``[1.41, 2]``; ``[16, open]`` when the maximum passed."""
        high = "open" if self.first_fail is None else knob_text(self.knob, self.first_fail)
        return f"[{knob_text(self.knob, self.last_pass)}, {high}]"

    def interval_text(self) -> str:
        """The capacity interval of a concurrency search: ``5``, ``4–7`` or ``≥ 16``."""
        if self.first_fail is None:
            return f"≥ {knob_text(self.knob, self.last_pass)}"
        high = int(self.first_fail) - 1
        return str(high) if high == self.last_pass else f"{int(self.last_pass)}–{high}"


@dataclass(frozen=True)
class SearchRatio(Record):
    """Candidate ÷ reference capacity, with the interval the two searches' brackets give it
    (``workloads/slo_search.capacity_ratio``; ``high`` infinite when open above).
    ``degenerate`` when both searches passed at their maximum, so the interval says nothing."""

    ratio: float
    low: float
    high: float
    candidate: SearchBracket
    reference: SearchBracket
    confidence: float | None = None

    @property
    def degenerate(self) -> bool:
        return self.candidate.first_fail is None and self.reference.first_fail is None

    def text(self) -> str:
        """E.g. ``sweep interval 0.71–1.41`` (``0.71–∞`` when open above)."""
        high = "∞" if math.isinf(self.high) else f"{self.high:.2f}"
        return f"sweep interval {self.low:.2f}–{high}"


@dataclass(frozen=True)
class AtCapacity(Record):
    """The figures of the passing step at the capacity (its window); its cost when priced."""

    output_tokens_per_s: float
    goodput_rps: float | None
    slo_attainment: float | None
    usd_per_million_output_tokens: float | None = None


@dataclass(frozen=True)
class SearchStats(Record):
    """An SLO search over its :attr:`knob`: the ``capacity`` (None when it broke off: see
    ``error``), the ``bracket`` [last pass, first fail or None] and every step; ``confidence``:
    a concurrency search's capacity interval's level (None: an older search), a rate sweep's
    step level; ``reason`` (a rate sweep's ``stopped``) for a result that needs one;
    ``source``: where a concurrency search's maximum came from; ``target``, ``start``,
    ``maximum`` and ``burstiness``: a rate sweep's design."""

    knob: str = CONCURRENCY
    capacity: int | float | None = None
    bracket: tuple[int | float, int | float | None] | None = None
    steps: tuple[SearchStep, ...] = ()
    confidence: float | None = None
    inconclusive: tuple[int | float, ...] = ()
    reason: str | None = None
    error: str | None = None
    source: str = ""
    target: float | None = None
    start: float | None = None
    maximum: float | None = None
    burstiness: float = 1.0
    contended: bool = False
    contended_windows: int = 0
    at_capacity: AtCapacity | None = None
    pricing: Pricing | None = None

    @property
    def stopped(self) -> str:
        """Why a rate sweep ended where it did."""
        return self.reason or ""

    @property
    def saturated_at(self) -> float | None:
        """The lowest value at which the server fell behind (None: it never did)."""
        values = [s.value for s in self.steps if s.outcome is StepOutcome.SATURATED]
        return min(values) if values else None

    @property
    def flags(self) -> tuple[str, ...]:
        """``contended``: what makes this search doubtful (a search has no CV; an open loop's
        requests queue by design, and a saturated step is a decision, not a doubt)."""
        return side_flags(unstable=False, cv=None, contended=self.contended)

    def measured_bracket(self) -> SearchBracket:
        """The capacity and its bracket; ValueError for a search that concluded none."""
        capacity, bracket, rate = self.capacity, self.bracket, self.knob == RATE
        what = "rate sweep" if rate else "capacity measurement"
        if capacity is None or bracket is None:
            detail = (
                (f": {self.error}" if self.error else "")
                if rate
                else f", bracket {None if bracket is None else list(bracket)!r}"
            )
            raise ValueError(
                f"a {what} without a capacity and its bracket (capacity {capacity!r}{detail})"
            )
        last_pass, first_fail = bracket
        if last_pass != capacity or not (first_fail is None or first_fail > last_pass):
            at = f"{capacity:g} req/s" if rate else f"{capacity}"
            raise ValueError(
                f"a {what} whose bracket {list(bracket)} does not start at its capacity {at}"
            )
        # a rate sweep's confidence is each step's: its capacity interval's is 2γ - 1
        level = 2 * self.confidence - 1 if rate and self.confidence else self.confidence
        return SearchBracket(capacity, last_pass, first_fail, level, self.knob)


# --------------------------------------------------------------------------- smoke, screening


@dataclass(frozen=True)
class SmokeStats(Record):
    """One greedy generation: its latency, usage, finish reason and text."""

    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    text: str = ""


@dataclass(frozen=True)
class ScreeningResult(Record):
    """The screening of one candidate repo; ``reasons`` says why it was rejected (empty if not)."""

    model: str = ""
    repo: str = ""
    license: str | None = None
    architecture: str | None = None
    dtype: str | None = None
    parameters: int | None = None
    weights_gib: float | None = None
    budget_gib: float = 0.0
    kv_headroom_gib: float | None = None
    accepted: bool = False
    reasons: tuple[str, ...] = ()
    weights_source: str = ""

    @property
    def verdict(self) -> str:
        return "accepted" if self.accepted else "rejected"

    @property
    def reason(self) -> str:
        """The reasons as one line ("" when accepted)."""
        return "; ".join(self.reasons)


# --------------------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class SequentialVerdict(Record):
    """A verdict drawn from the anytime-valid confidence sequence of candidate − reference
    (``--until-decided``, :mod:`~pytest_modelsweep.core.stats.sequences`) after ``n`` paired
    items; ``stop``: ``decided``, or ``final`` (no more items came)."""

    difference: float = math.nan
    low: float = math.nan
    high: float = math.nan
    confidence: float = math.nan
    n: int = 0
    population: int = 0
    discordant: int = 0
    candidate_mean: float = math.nan
    reference_mean: float = math.nan
    method: str = ""
    stop: str = ""
    order_seed: int = 0

    def text(self) -> str:
        """``decided after 120 of 300 items``; ``undecided after all 300 items``; ``undecided
        when the items stopped, after 120 of 300`` (a side stopped short)."""
        if self.stop == STOP_DECIDED:
            return f"decided after {self.n} of {self.population} items"
        if self.n >= self.population:
            return f"undecided after all {self.population} items"
        return f"undecided when the items stopped, after {self.n} of {self.population}"


@dataclass(frozen=True)
class AccuracyVerdictStats(Record):
    """A candidate's paired verdict on an accuracy benchmark. A sequential verdict
    (``--until-decided``) holds its confidence sequence in ``sequence`` instead of a bootstrap
    ``interval`` (a fixed-n interval on a sequentially chosen sample lacks its coverage)."""

    candidate: str = ""
    reference: str = ""
    metric: str = ""
    verdict: Verdict | None = None
    interval: PairedInterval | None = None
    margin: float | None = None
    rule: str = ""
    candidate_run: str | None = None
    reference_run: str | None = None
    sequence: SequentialVerdict | None = None


@dataclass(frozen=True)
class InterleavedWindow(Record):
    """One window of an interleaved pair: whose, which pair, its rate and contention."""

    model: str = ""
    pair: int = 0
    output_tokens_per_s: float = 0.0
    contention: Contention = field(default_factory=Contention)


@dataclass(frozen=True)
class Interleaved(Record):
    """Both models measured in pairs of windows (A B, B A, ...): the windows in the order
    measured, each side's tokens/s in pair order, and whether any window was contended."""

    windows: tuple[InterleavedWindow, ...]
    candidate_values: tuple[float, ...]
    reference_values: tuple[float, ...]

    @property
    def contended(self) -> bool:
        return any(window.contention.contended for window in self.windows)


DESIGN_BACK_TO_BACK = "back-to-back"
DESIGN_INTERLEAVED = "interleaved"


@dataclass(frozen=True)
class ThroughputRatioStats(Record):
    """A candidate's throughput ÷ the reference's at one setting: the ratio interval, the
    tolerance and rule of the verdict, the runs of each side and how they were measured
    (``design``: back-to-back measurements with each side's flags, or ``interleaved``)."""

    candidate: str = ""
    reference: str = ""
    metric: str = ""
    verdict: Verdict | None = None
    interval: RatioInterval | None = None
    tolerance: float = 0.0
    rule: str = ""
    candidate_run: str | None = None
    reference_run: str | None = None
    candidate_flags: tuple[str, ...] | None = None
    reference_flags: tuple[str, ...] | None = None
    design: str = DESIGN_BACK_TO_BACK
    interleaved: Interleaved | None = None


@dataclass(frozen=True)
class SearchRatioStats(Record):
    """A candidate's capacity ÷ the reference's under one SLO, both searched over the same
    :attr:`knob`, with the interval the two searches give (``ratio`` None only for a record
    that holds none)."""

    candidate: str = ""
    reference: str = ""
    metric: str = ""
    verdict: Verdict | None = None
    ratio: SearchRatio | None = None
    tolerance: float = 0.0
    rule: str = ""
    attainment_target: float | None = None
    candidate_max_concurrency: int | None = None
    reference_max_concurrency: int | None = None
    confidence: float | None = None
    candidate_run: str | None = None
    reference_run: str | None = None
    candidate_flags: tuple[str, ...] = ()
    reference_flags: tuple[str, ...] = ()
    knob: str = CONCURRENCY

    def __post_init__(self) -> None:
        if not self.metric:
            object.__setattr__(self, "metric", SEARCH_BENCHMARK[self.knob])


@dataclass(frozen=True)
class OtherStats(Record):
    """The stats of a benchmark the metric table does not know: its figures as recorded."""

    values: Mapping[str, Any] = field(default_factory=dict)


converter.register_structure_hook(OtherStats, lambda data, _: OtherStats(json_object(data)))
converter.register_unstructure_hook(OtherStats, lambda stats: dict(stats.values))


# --------------------------------------------------------------------------- startup


@dataclass(frozen=True)
class CacheState(Record):
    """What was warm before one launch (``warm`` None: cannot be told): llama-server's model
    file in the page cache, or vLLM's compile caches."""

    kind: str = ""
    """``page-cache`` or ``compile-cache``."""
    warm: bool | None = None
    detail: str = ""
    resident_share: float | None = None
    evicted: bool = False


@dataclass(frozen=True)
class ColdStart(Record):
    """One fresh launch: seconds from spawn to ready and to the first token of the first
    request (``ready_within_s``: how late the readiness poll may have seen it); ``error``
    says why the first request failed (then ``first_token_s`` is None)."""

    launch: int = 0
    ready_s: float = 0.0
    ready_within_s: float = 0.0
    first_token_s: float | None = None
    first_request_ttft_s: float | None = None
    cache: CacheState = field(default_factory=CacheState)
    error: str | None = None


def _geometric_mean(values: Sequence[float]) -> float | None:
    if not values or not all(v > 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class StartupStats(Record):
    """A model's start over fresh launches: geometric means of launch → ready and launch →
    first token with their 95% intervals (:func:`~.stats.log_mean_interval`: none below two
    launches, or with a failed first request), and the launches' ``cache`` in one word."""

    backend: str = ""
    launches: tuple[ColdStart, ...] = ()

    @property
    def first_token_values(self) -> list[float]:
        """Launch → first token of each launch whose first request got one."""
        return [c.first_token_s for c in self.launches if c.first_token_s is not None]

    @property
    def errors(self) -> list[str]:
        return [f"launch {c.launch}: {c.error}" for c in self.launches if c.error]

    @property
    def first_token_s(self) -> float | None:
        return _geometric_mean(self.first_token_values) if not self.errors else None

    @property
    def ready_s(self) -> float | None:
        return _geometric_mean([c.ready_s for c in self.launches])

    @property
    def first_token_s_interval(self) -> tuple[float, float] | None:
        return None if self.errors else log_mean_interval(self.first_token_values)

    @property
    def ready_s_interval(self) -> tuple[float, float] | None:
        return log_mean_interval([c.ready_s for c in self.launches])

    @property
    def cache(self) -> str:
        """``cold``, ``warm``, ``mixed`` or ``unknown``: how cold the launches really were."""
        states = {c.cache.warm for c in self.launches}
        if not states or None in states:
            return "unknown"
        if states == {False}:
            return "cold"
        return "warm" if states == {True} else "mixed"


Stats = (
    AccuracyStats
    | ThroughputStats
    | SearchStats
    | SmokeStats
    | ScreeningResult
    | AccuracyVerdictStats
    | ThroughputRatioStats
    | SearchRatioStats
    | OtherStats
    | StartupStats
)
"""The ``stats`` of a measurement: one record per kind."""

_BY_KIND: dict[Kind, type[Stats]] = {
    Kind.ACCURACY: AccuracyStats,
    Kind.THROUGHPUT: ThroughputStats,
    Kind.CAPACITY: SearchStats,
    Kind.SMOKE: SmokeStats,
    Kind.SCREENING: ScreeningResult,
    Kind.RATE_CAPACITY: SearchStats,
    Kind.STARTUP: StartupStats,
}
_BY_COMPARED: dict[Kind, type[Stats]] = {
    Kind.ACCURACY: AccuracyVerdictStats,
    Kind.THROUGHPUT: ThroughputRatioStats,
    Kind.CAPACITY: SearchRatioStats,
    Kind.RATE_CAPACITY: SearchRatioStats,
}


def another_kind(stats: Mapping[str, Any], expected: type[Stats]) -> type[Stats] | None:
    """The kind whose stats ``stats`` are when they hold none of ``expected``'s own keys and
    two or more keys, at least half of them, that kind names (another measurement's stats);
    None when they may be ``expected``'s (a key no kind names is a user's own, or an older
    writer's)."""
    keys = set(stats)
    if expected is OtherStats or keys & _field_names(expected):
        return None
    shared, kind = max(
        (
            (len(keys & _field_names(kind)), kind)
            for kind in (*_BY_KIND.values(), *_BY_COMPARED.values())
            if kind is not expected
        ),
        key=lambda found: found[0],
    )
    return kind if shared >= 2 and 2 * shared >= len(keys) else None


def _field_names(cls: type) -> set[str]:
    return {spec.name for spec in fields(cls)}


def stats_type(benchmark: str, unit: str | None) -> type[Stats]:
    """The record of a measurement's ``stats``, by its benchmark's kind (:func:`metric_for`)."""
    metric = metric_for(benchmark, unit)
    if metric is None:
        return OtherStats
    if metric.kind is Kind.COMPARISON:
        return _BY_COMPARED.get(metric.compares, OtherStats) if metric.compares else OtherStats
    return _BY_KIND.get(metric.kind, OtherStats)


# --------------------------------------------------------------------------- the measurement


@dataclass(frozen=True)
class Measurement(Record):
    """One recorded result of one test: a value with its unit, sample size and ``stats``, the
    record :func:`stats_type` names by its benchmark (an :class:`OtherStats` given is read as
    that record)."""

    model: str = ""
    benchmark: str = ""
    value: float = 0.0
    unit: str = ""
    n: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    stats: Stats = field(default_factory=OtherStats)
    items: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    test_id: str = ""
    recorded_at: str = ""
    outcome: str | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        expected = stats_type(self.benchmark, self.unit)
        if type(self.stats) is not expected:
            if not isinstance(self.stats, OtherStats):
                raise TypeError(
                    f"a {self.benchmark!r} measurement in {self.unit!r} records "
                    f"{expected.__name__}, not {type(self.stats).__name__}"
                )
            try:
                stats = _stats_of(self.stats.values, expected, self.benchmark)
            except RecordError as error:  # ": why" of the stats, or "key: why" in them
                raise RecordError(f"stats{'' if str(error)[:1] == ':' else '.'}{error}") from None
            object.__setattr__(self, "stats", stats)

    @property
    def passed(self) -> bool:
        """Whether the measurement's own test passed (a record without an outcome counts)."""
        return self.outcome in (None, "passed")

    def item_records(self) -> list[ItemRecord]:
        """The scored items."""
        return [ItemRecord.from_dict(item) for item in self.items]

    def request_records(self) -> list[RequestRecord]:
        """The timed requests (without the keys a workload adds to each: ``repeat``, ``step``,
        ``concurrency``)."""
        names = _field_names(RequestRecord)
        return [RequestRecord(**{k: v for k, v in r.items() if k in names}) for r in self.requests]


def knob_of(benchmark: str) -> str:
    """The knob a search benchmark (or its ratio) turns: ``rate`` for ``rate_capacity``."""
    metric = metric_for(benchmark, None)
    kinds = () if metric is None else (metric.kind, metric.compares)
    return RATE if Kind.RATE_CAPACITY in kinds else CONCURRENCY


def _stats_of(data: Mapping[str, Any], expected: type[Stats], benchmark: str) -> Stats:
    """``data`` read as the stats record ``expected`` (a search's knob by its benchmark);
    another kind's stats, or another knob's, are refused."""
    kind = another_kind(data, expected)
    if kind is not None:
        given = sorted(data)
        raise RecordError(
            f": none of the keys of a {benchmark!r} measurement's "
            f"{expected.__name__} (it holds {', '.join(given[:4])}"
            f"{', …' if len(given) > 4 else ''}): the stats of another kind of "
            f"measurement ({kind.__name__})"
        )
    if issubclass(expected, SearchStats | SearchRatioStats):
        knob = knob_of(benchmark)
        data = {"knob": knob, **data}
        if data["knob"] != knob:
            raise RecordError(
                f"knob: expected {knob!r} for a {benchmark!r} measurement, got {data['knob']!r}"
            )
    return expected.from_dict(data)


_measurement_fields = make_dict_structure_fn(
    Measurement,
    converter,
    _cattrs_detailed_validation=True,
    stats=override(struct_hook=lambda data, _: OtherStats(json_object(data))),
)


# a measurement's dict, its ``stats`` read as its benchmark's record (Measurement.__post_init__)
converter.register_structure_hook(
    Measurement, lambda data, _: _measurement_fields(json_object(data), Measurement)
)


def check_fields(data: Any, cls: type, read: Callable[[Any], Any] | None = None) -> None:
    """Raise :class:`RecordError` (``KEY: expected ...``) where ``data`` is not an object or
    holds a value of the wrong type for a field of the dataclass ``cls``; ``read`` (the
    class's own reader) must take it too. A key no field holds, or one left out, is no error."""
    if not isinstance(data, Mapping):
        raise RecordError(str(wrong("an object", data)))
    for name, hint in typing.get_type_hints(cls).items():
        if name in data:
            try:
                converter.structure(data[name], hint)
            except (cattrs.BaseValidationError, TypeError, ValueError) as error:
                where, problem = located(error)
                dot = "" if where[:1] in ("[", "") else "."
                raise RecordError(f"{name}{dot}{where}: {problem}") from None
    try:
        if read is not None:
            read(data)
    except (KeyError, TypeError, ValueError) as error:
        missing = "missing key " if isinstance(error, KeyError) else ""
        raise RecordError(f"{missing}{error}"[:200]) from None


def measurements_of(
    data: Sequence[Mapping[str, Any]] | Any, where: str = "", fix: str = ""
) -> list[Measurement]:
    """The records of a results file's (or the store's) measurement dicts, their items and
    timed requests checked too; a value of the wrong type is a :class:`RecordError` in one
    line: ``where`` (the file or store, and the run), the key, and ``fix``."""
    if not isinstance(data, Sequence) or isinstance(data, str):
        raise RecordError(
            _refusal(where, f"measurements: expected a list, got {type(data).__name__}", fix)
        )
    records = []
    for index, measurement in enumerate(data):
        try:
            record = Measurement.from_dict(measurement)
            for name, cls, read in (
                ("items", ItemRecord, ItemRecord.from_dict),
                ("requests", RequestRecord, None),
            ):
                for i, entry in enumerate(getattr(record, name)):
                    try:
                        check_fields(entry, cls, read)
                    except RecordError as error:
                        raise RecordError(f"{name}[{i}]{_joined(str(error))}") from None
        except RecordError as error:
            raise RecordError(
                _refusal(where, f"measurements[{index}]{_joined(str(error))}", fix)
            ) from None
        records.append(record)
    return records


def _joined(problem: str) -> str:
    """``.key: what`` after a parent key, ``: what`` where no key is named."""
    key, colon, _ = problem.partition(": ")
    if not colon or " " in key:
        return f": {problem}"
    return problem if key.startswith("[") else f".{problem}"


def _refusal(where: str, problem: str, fix: str) -> str:
    """``WHERE: PROBLEM; FIX`` (``where`` and ``fix`` only when given)."""
    return f"{where + ': ' if where else ''}{problem}{'; ' + fix if fix else ''}"
