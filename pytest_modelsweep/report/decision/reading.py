"""Reading a run for the decision page: its measurements and failed tests as the page finds
them, the setting it compares at, and each model's capacity and cost (or why none).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...core.measurements import (
    CONCURRENCY,
    SEARCH_BENCHMARK,
    AccuracyVerdictStats,
    Measurement,
    SearchRatioStats,
    SearchStats,
    ThroughputRatioStats,
    ThroughputStats,
)
from ...core.metrics import RATIO_BENCHMARK, VERDICT_PREFIX, rank
from ...judging.pairing import PairingError, RequestSettings, check_same_serving, unlike_requests
from ...store.results import FailedTest
from ..tables import (
    NA,
    Measurements,
    Setting,
    finite,
    format_usd,
    measurement_kind,
    stats_of,
    whole,
)
from .page import (
    CANNOT_CONCLUDE,
    FALLBACK_CONCURRENCY,
    NO_PRICE,
    NO_PRICE_WHY,
    NOT_MEASURED,
    SEARCHES,
    Cell,
    one_line,
)


@dataclass(frozen=True)
class Failure:
    """A failed test of ``model`` (None: of none): its ``function`` and parameters after the
    model's (``rest``: ``gsm8k`` of ``test_verdict[m-gsm8k]``)."""

    test_id: str
    message: str
    model: str | None
    rest: str
    function: str

    @classmethod
    def of(cls, failed: FailedTest, models: Sequence[str]) -> Failure:
        """The model is the longest name the id's parameters start with."""
        match = re.search(r"\[(.*)\]$", failed.test_id)
        params = match.group(1) if match else ""
        model = max(
            (m for m in models if params == m or params.startswith(m + "-")), key=len, default=None
        )
        return cls(
            failed.test_id,
            (failed.message or failed.outcome or "failed").removeprefix("Failed: "),
            model,
            params[len(model) + 1 :] if model else params,
            failed.test_id.rsplit("::", 1)[-1].split("[", 1)[0],
        )

    @property
    def name(self) -> str:
        """``test_verdict[gsm8k]``: the test's function and its parameters but the model."""
        return f"{self.function}[{self.rest}]" if self.rest else self.function

    @property
    def said(self) -> str:
        return f"{self.name} failed: {one_line(self.message)}"

    def names(self, word: str) -> bool:
        """Whether its function, parameters or message name ``word``."""
        return (
            word in self.rest.split("-")
            or word in self.function.split("_")
            or re.search(rf"(?<![\w:.-]){re.escape(word)}(?![\w.-])", self.message) is not None
        )


def short_concurrency(m: Measurement) -> int | None:
    """The concurrency of a short-prompt throughput setting (None: a long prompt, a rate)."""
    setting = Setting.of(m)
    return whole(setting.concurrency) if setting.prompt_tokens is None else None


class Page:
    """The run's measurements as the page finds them (the last one wins)."""

    def __init__(
        self,
        measurements: Measurements,
        reference: str,
        candidates: Sequence[str],
        failures: Sequence[FailedTest],
        run_id: str | None,
    ) -> None:
        self.measurements, self.reference, self.candidates = measurements, reference, candidates
        self.run_id, models = run_id, sorted({m.model for m in measurements} | {reference})
        self.failures = [Failure.of(f, models) for f in failures]
        self.at = self._compared_concurrencies()
        self.any_capacity = any(m.benchmark == SEARCH_BENCHMARK[CONCURRENCY] for m in measurements)
        self.capacities = {
            knob: {model: _capacity(self, model, knob) for model in (reference, *candidates)}
            for knob in SEARCHES
        }
        self.costs = {model: _cost(self, model) for model in (reference, *candidates)}
        self.relative = {
            c: self.costs[c].relative(_cost(self, reference, self.at[c]), c) for c in candidates
        }

    def _compared_concurrencies(self) -> dict[str, int]:
        """A candidate's highest short-prompt concurrency with a ratio or measured alike with
        the reference; the reference's the highest of those (else its own, else c16), which a
        candidate with none takes."""
        found = {
            candidate: max(
                {  # with a ratio
                    n
                    for m in self.measurements
                    if m.model == candidate
                    and m.benchmark == RATIO_BENCHMARK
                    and Setting.of(m).benchmark == "throughput"
                    and (n := short_concurrency(m)) is not None
                }
                | {  # measured alike
                    n
                    for n in self.measured(candidate) & self.measured(self.reference)
                    if self._alike(candidate, n)
                },
                default=None,
            )
            for candidate in self.candidates
        }
        at_reference = max(  # the highest compared, else the reference's own, else c16
            [n for n in found.values() if n is not None]
            or self.measured(self.reference)
            or {FALLBACK_CONCURRENCY}
        )
        return {
            self.reference: at_reference,
            **{c: at_reference if n is None else n for c, n in found.items()},
        }

    def _alike(self, candidate: str, concurrency: int) -> bool:
        """Whether the candidate and the reference were measured alike at ``concurrency``."""
        mine = self.throughput_at(candidate, concurrency)
        reference = self.throughput_at(self.reference, concurrency)
        if mine is None or reference is None:
            return False
        try:  # the same server, serving flags and request settings
            check_same_serving(mine.model, mine.provenance, reference.model, reference.provenance)
        except PairingError:
            return False
        return (
            unlike_requests(
                mine.model,
                RequestSettings.of_measurement(mine),
                reference.model,
                RequestSettings.of_measurement(reference),
            )
            is None
        )

    def measured(self, model: str) -> set[int]:
        """The concurrencies of ``model``'s short-prompt throughput measurements."""
        return {
            n
            for m in self.measurements
            if m.model == model
            and m.benchmark == "throughput"
            and (n := short_concurrency(m)) is not None
        }

    def setting(self, model: str) -> str:
        """``c4``: the throughput setting the page compares for ``model``."""
        return f"c{self.at[model]}"

    @property
    def mixed(self) -> bool:
        """Whether the models' throughput settings differ (each cell then says its own)."""
        return len(set(self.at.values())) > 1

    @property
    def settings_text(self) -> str:
        """``c4``, or ``c4, c16`` when the models' settings differ."""
        return ", ".join(f"c{n}" for n in sorted(set(self.at.values())))

    def any_at(self, concurrency: int) -> bool:
        return any(concurrency in self.measured(model) for model in self.at)

    def role(self, model: str) -> str:
        return "reference" if model == self.reference else "candidate"

    def last(self, found: Callable[[Measurement], bool]) -> Measurement | None:
        return next((m for m in reversed(self.measurements) if found(m)), None)

    def latest(self, model: str, benchmark: str) -> Measurement | None:
        return self.last(lambda m: m.model == model and m.benchmark == benchmark)

    def verdict(self, candidate: str, metric: str) -> Measurement | None:
        return self.last(
            lambda m: (
                m.benchmark == VERDICT_PREFIX + metric
                and (stats_of(m, AccuracyVerdictStats).candidate or m.model) == candidate
            )
        )

    def throughput_at(self, model: str, concurrency: int) -> Measurement | None:
        return self.last(
            lambda m: (
                m.model == model
                and m.benchmark == "throughput"
                and short_concurrency(m) == concurrency
            )
        )

    def ratio(self, candidate: str) -> Measurement | None:
        """The candidate's throughput ratio at its compared setting (:attr:`at`)."""
        return self.last(
            lambda m: (
                m.benchmark == RATIO_BENCHMARK
                and m.model == candidate
                and Setting.of(m).benchmark == "throughput"
                and short_concurrency(m) == self.at[candidate]
            )
        )

    def ratio_interval(self, candidate: str) -> tuple[float | None, float | None]:
        """The throughput ratio's interval ((None, None) without one)."""
        m = self.ratio(candidate)
        interval = None if m is None else stats_of(m, ThroughputRatioStats).interval
        return (None, None) if interval is None else (finite(interval.low), finite(interval.high))

    def earlier_runs(self, model: str, benchmark: str) -> list[str]:
        """Earlier runs whose measurement of ``model`` this run's ``benchmark`` ratios used."""
        if self.run_id is None:
            return []
        return sorted(
            {
                ran
                for m in self.measurements
                if m.benchmark == benchmark
                and (benchmark != RATIO_BENCHMARK or self.ratio(m.model) is m)
                for stats in [
                    stats_of(m, ThroughputRatioStats)
                    if benchmark == RATIO_BENCHMARK
                    else stats_of(m, SearchRatioStats)
                ]
                for side, ran in (
                    (m.model, stats.candidate_run),
                    (stats.reference or self.reference, stats.reference_run),
                )
                if side == model and ran is not None and ran != self.run_id
            }
        )

    def failures_of(
        self, model: str, word: str | None = None, function: str | None = None
    ) -> list[Failure]:
        """Failed tests of ``model`` (naming ``word``, of test ``function``)."""
        return [
            f
            for f in self.failures
            if f.model == model
            and (word is None or f.names(word))
            and function in (None, f.function)
        ]

    def missing(
        self, model: str, benchmark: str, failed: Sequence[Failure], what: str, how: str
    ) -> Cell:
        """The cell of a model with no ``benchmark`` measurement: its failed test's line, else
        ``not measured`` (``how`` to measure ``what`` when no model has one)."""
        role = self.role(model)
        if failed:
            return Cell(CANNOT_CONCLUDE, why=f"the {role} {model}'s {failed[0].said}")
        return Cell(
            NOT_MEASURED,
            why=f"no {what} of the {role} {model} in this run"
            if any(m.benchmark == benchmark for m in self.measurements)
            else f"no {what} in this run ({how})",
        )

    def stopped(self, model: str, what: str, said: str) -> str:
        """``the reference m's rate sweep did not conclude: why``."""
        return f"the {self.role(model)} {model}'s {what} did not conclude: {one_line(said)}"


def accuracy_metrics(page: Page) -> list[str]:
    """Benchmarks with a verdict, and accuracy benchmarks both the reference and a
    candidate measured (their verdict cells then say why there is none), in report order."""
    found = {
        stats_of(m, AccuracyVerdictStats).metric or m.benchmark[len(VERDICT_PREFIX) :]
        for m in page.measurements
        if m.benchmark.startswith(VERDICT_PREFIX)
    }
    measured = {
        (m.benchmark, m.model) for m in page.measurements if measurement_kind(m) == "accuracy"
    }
    both = {  # accuracy benchmarks the reference and a candidate measured
        benchmark
        for benchmark, model in measured
        if model == page.reference
        and any((benchmark, candidate) in measured for candidate in page.candidates)
    }
    return sorted(found | both, key=lambda name: (rank(name), name))


def throughput_why(
    page: Page,
    model: str,
    concurrency: int | None = None,
) -> tuple[str, str] | None:
    """(text, why) of ``model``'s throughput giving no figure; None when it gives one."""
    at = page.at[model] if concurrency is None else concurrency
    m, role, setting = page.throughput_at(model, at), page.role(model), f"c{at}"
    if m is None:
        earlier = page.earlier_runs(model, RATIO_BENCHMARK)
        if earlier:
            return NOT_MEASURED, (
                f"the {role} {model}'s {setting} throughput comes from "
                f"earlier run {', '.join(earlier)} (the ratios use it); this "
                "report holds this run's measurements only"
            )
        whose, where = (f"of the {role} {model} ", "") if page.any_at(at) else ("", "in this run ")
        return NOT_MEASURED, (
            f"no throughput measurement {whose}at {setting} {where}"
            f"(benches/test_throughput.py -k {setting})"
        )
    if m.passed:
        return None
    failed = page.failures_of(model, setting)
    return CANNOT_CONCLUDE, f"the {role} {model}'s {setting} throughput test {m.outcome}" + (
        f": {one_line(failed[0].message)}" if failed else ""
    )


@dataclass(frozen=True)
class Capacity:
    """A model's capacity over ``knob``: ``value`` when its search concluded, else the
    cell's text, why."""

    knob: str
    stats: SearchStats
    value: float | None
    text: str = ""
    why: str = ""

    @property
    def at_maximum(self) -> bool:
        """The search passed at its maximum: the capacity is at least that."""
        return bool(self.value) and self.stats.bracket is not None and self.stats.bracket[1] is None


def _capacity(page: Page, model: str, knob: str) -> Capacity:
    """The model's capacity over ``knob`` under the SLO, else why there is none."""
    search, benchmark = SEARCHES[knob], SEARCH_BENCHMARK[knob]
    m, role = page.latest(model, benchmark), page.role(model)
    failed = page.failures_of(model, function=f"test_{benchmark}")
    if m is None:
        if (earlier := page.earlier_runs(model, search.ratio)) and not failed:
            return Capacity(
                knob,
                SearchStats(),
                None,
                NOT_MEASURED,
                (
                    f"the {role} {model}'s {search.what} comes from earlier run "
                    f"{', '.join(earlier)} (the capacity ratios use it); this report holds this "
                    "run's measurements only"
                ),
            )
        cell = page.missing(
            model,
            benchmark,
            failed,
            search.missing,
            f"{search.bench} -m {benchmark}, run under --slo",
        )
        return Capacity(knob, SearchStats(), None, cell.text, cell.why)
    stats = stats_of(m, SearchStats)
    if stats.capacity is None or stats.capacity < 0 or not m.passed:
        said = (
            stats.error
            or (failed[0].message if failed else "")
            or (f"its test {m.outcome}" if not m.passed else "it records no capacity")
        )
        return Capacity(
            knob, stats, None, CANNOT_CONCLUDE, page.stopped(model, search.search, said)
        )
    return Capacity(
        knob, stats, int(stats.capacity) if knob == CONCURRENCY else float(stats.capacity)
    )


@dataclass(frozen=True)
class Cost:
    """$/1M output tokens ``at`` the capacity or a setting (``basis``: ``capacity``, ``c4``),
    priced at ``usd_per_hour``; without it, the cell's text and why."""

    usd: float | None
    basis: str = ""
    at: str = ""
    interval: tuple[float, float] | None = None
    why: str = ""
    text: str = NOT_MEASURED
    usd_per_hour: float | None = None

    @classmethod
    def priced(
        cls,
        usd: object,
        usd_per_hour: object,
        basis: str,
        at: str,
        interval: tuple[float, float] | None,
        whose: str,
    ) -> Cost:
        """The cost of a priced measurement; ``no price`` without a price, ``cannot
        conclude`` when priced without a cost."""
        if (usd := finite(usd)) is not None:
            return cls(usd, basis, at, interval, usd_per_hour=finite(usd_per_hour))
        if finite(usd_per_hour) is None:
            return cls(None, why=NO_PRICE_WHY, text=NO_PRICE)
        return cls(
            None, why=f"{whose} records a price but no $/1M output tokens", text=CANNOT_CONCLUDE
        )

    def relative(self, reference: Cost, name: str) -> tuple[float | None, str]:
        """(this ÷ the reference's cost, why not): only both at their capacity or both at
        one throughput setting, priced at the same rate."""
        if self.usd is None:
            return None, self.why
        if reference.usd is None:
            return None, f"the reference has no cost: {reference.why}"
        if self.basis != reference.basis:
            return None, (
                f"{name} is priced {self.at} and the reference {reference.at}: "
                "not the same basis, so no ratio"
            )
        if self.usd_per_hour is None or reference.usd_per_hour is None:
            return None, f"{name}'s or the reference's cost records no price per hour: no ratio"
        if self.usd_per_hour != reference.usd_per_hour:
            return None, (
                f"{name} and the reference are priced at different rates "
                f"({format_usd(self.usd_per_hour, '$')}/h and "
                f"{format_usd(reference.usd_per_hour, '$')}/h): no ratio"
            )
        return self.usd / reference.usd, ""


def _cost(page: Page, model: str, concurrency: int | None = None) -> Cost:
    """$/1M output tokens at the model's capacity (none at 0), else at its throughput setting
    (``concurrency``, else its compared one), else why there is none."""
    capacity, role = page.capacities[CONCURRENCY][model], page.role(model)
    if capacity.value:
        at, pricing = capacity.stats.at_capacity, capacity.stats.pricing
        return Cost.priced(
            at and at.usd_per_million_output_tokens,
            pricing and pricing.usd_per_hour,
            "capacity",
            f"at c{capacity.value}",
            None,
            f"the {role} {model}'s capacity",
        )
    if capacity.value == 0:
        return Cost(
            None,
            why=f"the {role} {model} misses the SLO even at concurrency 1 "
            "(capacity 0): no cost at its capacity",
            text=NA,
        )
    setting = page.at[model] if concurrency is None else concurrency
    measured = page.throughput_at(model, setting)
    no_throughput = throughput_why(page, model, setting)
    if measured is not None and no_throughput is None:
        cost = stats_of(measured, ThroughputStats).cost
        return Cost.priced(
            cost and cost.usd_per_million_output_tokens,
            cost and cost.pricing.usd_per_hour,
            f"c{setting}",
            f"at c{setting}",
            cost.interval if cost else None,
            f"the {role} {model}'s c{setting} throughput",
        )
    if capacity.text == CANNOT_CONCLUDE:
        return Cost(None, why=capacity.why, text=CANNOT_CONCLUDE)
    if no_throughput is not None and no_throughput[0] == CANNOT_CONCLUDE:
        return Cost(None, why=no_throughput[1], text=CANNOT_CONCLUDE)
    return Cost(
        None,
        why=f"no capacity or c{setting} throughput measurement "
        + (
            "in this run"
            if not page.any_capacity and not page.any_at(setting)
            else f"of the {role} {model}"
        )
        + " to price",
    )
