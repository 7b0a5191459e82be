"""The decision page: one row per candidate with the figures that decide which model to serve.

A cell shows a figure only when the measurement behind it succeeded; otherwise a word with
a note (``[n]``) to a line saying why. The answer and the Pareto points come from concluded
cells only. Layout and wording: docs/decision-page.md. Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..core.measurements import (
    CONCURRENCY,
    RATE,
    SEARCH_BENCHMARK,
    AccuracyVerdictStats,
    Measurement,
    ScreeningResult,
    SearchBracket,
    SearchRatioStats,
    SearchStats,
    StartupStats,
    ThroughputRatioStats,
    ThroughputStats,
)
from ..core.metrics import (
    CAPACITY_RATIO_BENCHMARK,
    METRICS,
    RATE_CAPACITY_RATIO_BENCHMARK,
    RATIO_BENCHMARK,
    VERDICT_PREFIX,
    rank,
)
from ..core.slo import Slo
from ..judging.pairing import PairingError, RequestSettings, check_same_serving, unlike_requests
from ..store.results import FailedTest, RunInfo
from .tables import (
    COMPARISONS,
    NA,
    Measurements,
    Setting,
    accuracy_interval,
    compared_reference,
    finite,
    format_goodput,
    format_percent,
    format_percent_interval,
    format_points,
    format_points_interval,
    format_rate,
    format_ratio,
    format_rps,
    format_usd,
    measurement_kind,
    rate_bracket_text,
    stats_of,
    throughput_row,
)

FALLBACK_CONCURRENCY = (
    16  # The throughput setting named when no model was measured at any concurrency.
)
STARTUP = "startup"
SCREEN = "screen"
HOLDS = ("matches", "equivalent", "better")  # a candidate holds the reference's accuracy
NOT_MEASURED = "not measured"
CANNOT_CONCLUDE = "cannot conclude"
NOT_JUDGED = "not judged"
NOT_SCREENED = "not screened"
NO_PRICE = "no price"
NO_PRICE_WHY = (
    "no price: give --usd-per-hour or a [pricing] table in the sweep (no cost is ever assumed)"
)
REFERENCE = "reference"
DASH = "—"
ACCURACY_BLOCK = "accuracy vs reference"  # the table column of every accuracy group
FIGURES_TITLE = "Figures behind the cells"  # the folded heading of figure_lines
DECIDED_RATIO_SPREAD = 1.25
"""The decision line states a throughput ratio as a figure only where its 95% interval lies
within ×/÷ this of it; a wider one is no usable figure (the table still shows it)."""


# --------------------------------------------------------------------------- the page
@dataclass(frozen=True)
class Cell:
    """A figure or verdict word; ``why`` exactly when it does not conclude, ``detail`` a line
    a concluded figure needs, ``note`` the number of either line, ``tip`` the figures behind."""

    text: str
    why: str = ""
    note: int | None = None
    verdict: str | None = None
    detail: str = ""
    tip: str = ""

    @property
    def line(self) -> str:
        """The line under the table this cell points to ("" if none)."""
        return self.why or self.detail

    @property
    def shown(self) -> str:
        """The text with its note mark: ``not measured [2]``."""
        return f"{self.text} [{self.note}]" if self.note is not None else self.text


@dataclass(frozen=True)
class Column:
    """A part of a column group (``GSM8K vs reference``): its name there, a flat title;
    ``verdict``: holds verdict words; ``block``: the table column, when not its group's."""

    group: str
    name: str
    title: str
    verdict: bool = False
    block: str = ""


@dataclass
class DecisionRow:
    """One model: the reference (its own figures) or a candidate (compared with it)."""

    model: str
    is_reference: bool
    cells: list[Cell]
    flags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ParetoPoint:
    """A model on the Pareto plot; ``holds``: it matches the reference on every verdict."""

    model: str
    x: float
    y: float
    x_low: float | None
    x_high: float | None
    y_low: float | None
    y_high: float | None
    holds: bool
    on_front: bool = False
    is_reference: bool = False


@dataclass(frozen=True)
class Pareto:
    """Accuracy difference (y) against throughput ratio or relative cost; ``left_out``:
    ``model: why`` of each candidate without a point."""

    x_label: str
    y_label: str
    x_name: str
    y_name: str
    x_higher_is_better: bool
    points: tuple[ParetoPoint, ...]
    left_out: tuple[str, ...]

    @property
    def front(self) -> list[str]:
        """The models on the front, in x order."""
        return [p.model for p in sorted(self.points, key=lambda p: p.x) if p.on_front]


@dataclass
class DecisionPage:
    """The answer, the table, the lines its cells point to, notes, the Pareto data (else why
    none), the groups left out (with their notes), failed tests of models with no row."""

    answer: str
    columns: list[Column]
    rows: list[DecisionRow]
    reasons: list[str]
    notes: list[str]
    pareto: Pareto | None
    pareto_why: str = ""
    unmeasured: list[tuple[str, list[int]]] = field(default_factory=list)
    unplaced: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- reading
def metric_label(metric: str) -> str:
    """``GSM8K``, ``BFCL``; a user's benchmark by its own name."""
    known = METRICS.get(metric)
    return known.label.removesuffix(" accuracy") if known is not None else metric


def _one_line(text: object, limit: int = 160) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _verdict(verdict: object) -> Cell:
    word = str(verdict or NA)
    return Cell(word, verdict=word)


def _both(text: str, why: str) -> list[Cell]:
    """A comparison's two cells when it has no figure: the word, then a dash."""
    return [Cell(text, why=why), Cell(DASH, why=why)]


def _not_run(failed: Sequence[_Failure], what: str, test: str, where: str) -> list[Cell]:
    """A comparison's cells without its measurement: its failed test, else that it did not run."""
    return (
        _both(CANNOT_CONCLUDE, failed[0].said)
        if failed
        else _both(NOT_JUDGED, f"no {what}: its {test} test did not run ({where})")
    )


def _reference_cells(side: tuple[str, str]) -> list[Cell]:
    """The reference's own cells in a comparison's group: ``reference``, then its figure."""
    return [Cell(REFERENCE), Cell(side[0], why=side[1])]


def _confidence(confidence: float) -> str:
    return "" if abs(confidence - 0.95) < 1e-9 else f" ({100 * confidence:.4g}%)"


@dataclass(frozen=True)
class _Failure:
    """A failed test of ``model`` (None: of none): its ``function`` and parameters after the
    model's (``rest``: ``gsm8k`` of ``test_verdict[m-gsm8k]``)."""

    test_id: str
    message: str
    model: str | None
    rest: str
    function: str

    @classmethod
    def of(cls, failed: FailedTest, models: Sequence[str]) -> _Failure:
        """The model is the longest name the id's parameters start with."""
        match = re.search(r"\[(.*)\]$", failed.test_id)
        params = match.group(1) if match else ""
        model = max(
            (m for m in models if params == m or params.startswith(m + "-")), key=len, default=None
        )
        message = (failed.message or failed.outcome or "failed").removeprefix("Failed: ")
        return cls(
            failed.test_id,
            message,
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
        return f"{self.name} failed: {_one_line(self.message)}"

    def names(self, word: str) -> bool:
        """Whether its function, parameters or message name ``word``."""
        return (
            word in self.rest.split("-")
            or word in self.function.split("_")
            or re.search(rf"(?<![\w:.-]){re.escape(word)}(?![\w.-])", self.message) is not None
        )


def _short_concurrency(m: Measurement) -> int | None:
    """The concurrency of a short-prompt throughput setting (None: a long prompt, a rate)."""
    setting = Setting.of(m)
    concurrency = setting.concurrency
    return (
        concurrency
        if (
            isinstance(concurrency, int)
            and not isinstance(concurrency, bool)
            and setting.prompt_tokens is None
        )
        else None
    )


# --------------------------------------------------------------------------- finding measurements
class _Page:
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
        self.failures = [_Failure.of(f, models) for f in failures]
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
        reference = self.reference
        found = {}
        for candidate in self.candidates:
            ratios = {
                n
                for m in self.measurements
                if m.model == candidate
                and m.benchmark == RATIO_BENCHMARK
                and Setting.of(m).benchmark == "throughput"
                and (n := _short_concurrency(m)) is not None
            }
            both = {
                n
                for n in self.measured(candidate) & self.measured(reference)
                if self._alike(candidate, n)
            }
            found[candidate] = max(ratios | both, default=None)
        compared = [n for n in found.values() if n is not None]
        at_reference = max(compared or self.measured(reference) or {FALLBACK_CONCURRENCY})
        return {
            reference: at_reference,
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
            and (n := _short_concurrency(m)) is not None
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
                and _short_concurrency(m) == concurrency
            )
        )

    def ratio(self, candidate: str) -> Measurement | None:
        """The candidate's throughput ratio at its compared setting (:attr:`at`)."""
        return self.last(
            lambda m: (
                m.benchmark == RATIO_BENCHMARK
                and m.model == candidate
                and Setting.of(m).benchmark == "throughput"
                and _short_concurrency(m) == self.at[candidate]
            )
        )

    def ratio_interval(self, candidate: str) -> tuple[float | None, float | None]:
        """The throughput ratio's interval ((None, None) without one)."""
        m = self.ratio(candidate)
        interval = None if m is None else stats_of(m, ThroughputRatioStats).interval
        return (None, None) if interval is None else (finite(interval.low), finite(interval.high))

    def earlier_runs(self, model: str, benchmark: str) -> list[str]:
        """Earlier runs whose measurement of ``model`` this run's ``benchmark`` ratios used."""
        runs = set()
        for m in self.measurements:
            if m.benchmark != benchmark or (
                benchmark == RATIO_BENCHMARK and self.ratio(m.model) is not m
            ):
                continue
            stats = (
                stats_of(m, ThroughputRatioStats)
                if benchmark == RATIO_BENCHMARK
                else stats_of(m, SearchRatioStats)
            )
            for side, ran in (
                (m.model, stats.candidate_run),
                (stats.reference or self.reference, stats.reference_run),
            ):
                if side == model and ran is not None and ran != self.run_id:
                    runs.add(ran)
        return sorted(runs) if self.run_id is not None else []

    def failures_of(
        self, model: str, word: str | None = None, function: str | None = None
    ) -> list[_Failure]:
        """Failed tests of ``model`` (naming ``word``, of test ``function``)."""
        return [
            f
            for f in self.failures
            if f.model == model
            and (word is None or f.names(word))
            and function in (None, f.function)
        ]

    def missing(
        self, model: str, benchmark: str, failed: Sequence[_Failure], what: str, how: str
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
        return f"the {self.role(model)} {model}'s {what} did not conclude: {_one_line(said)}"


# --------------------------------------------------------------------------- accuracy
def _accuracy_metrics(page: _Page) -> list[str]:
    """Benchmarks with a verdict, and accuracy benchmarks both the reference and a
    candidate measured (their verdict cells then say why there is none), in report order."""
    found = {
        stats_of(m, AccuracyVerdictStats).metric or m.benchmark[len(VERDICT_PREFIX) :]
        for m in page.measurements
        if m.benchmark.startswith(VERDICT_PREFIX)
    }
    measured: dict[str, set[str]] = {}
    for m in page.measurements:
        if measurement_kind(m) == "accuracy":
            measured.setdefault(m.benchmark, set()).add(m.model)
    found |= {
        benchmark
        for benchmark, models in measured.items()
        if page.reference in models and models & set(page.candidates)
    }
    return sorted(found, key=lambda name: (rank(name), name))


def _accuracy_why(page: _Page, model: str, metric: str) -> tuple[str, str] | None:
    """(cell text, why) when one side's own accuracy result stops the verdict; None if sound."""
    m, role = page.latest(model, metric), page.role(model)
    if m is None:
        return NOT_MEASURED, f"no {metric} result of the {role} {model} in this run"
    failed = [item for item in m.item_records() if item.failed]
    if failed:
        return CANNOT_CONCLUDE, (
            f"{len(failed)} of {len(m.items)} {metric} items of the {role} {model} failed "
            f"(first: {_one_line(failed[0].error)}); no verdict is drawn from a partial item set"
        )
    return (
        None if m.passed else (CANNOT_CONCLUDE, f"the {role} {model}'s {metric} test {m.outcome}")
    )


def _verdict_cells(page: _Page, candidate: str, metric: str) -> list[Cell]:
    """[verdict, difference with interval] of a candidate on one accuracy benchmark."""
    m = page.verdict(candidate, metric)
    if m is not None:
        stats = stats_of(m, AccuracyVerdictStats)
        verdict, seq, iv = _verdict(stats.verdict), stats.sequence, stats.sequence or stats.interval
        shown = NA if iv is None else format_points_interval(iv.low, iv.high)
        if iv is None or finite(iv.difference) is None or shown == NA:
            what = "interval" if seq is None else "sequence"
            why = f"the {metric} verdict of {candidate} records no difference or {what}"
            return [verdict, Cell(NA, why=why)]
        figure = f"{format_points(iv.difference)} {shown.removesuffix(' pp')}"  # the unit once
        on = f"{candidate} vs the reference on {metric_label(metric)}"
        if seq is not None:  # --until-decided: the confidence sequence's
            return [
                verdict,
                Cell(
                    f"{figure}\n{seq.n} of {seq.population} items",
                    detail=(
                        f"{on}: {seq.text()} (--until-decided); the interval is the "
                        f"{100 * seq.confidence:.4g}% confidence sequence, valid where the items stopped"
                    ),
                ),
            ]
        few = stats.interval.too_few_reason() if stats.interval else ""
        return [
            verdict,
            Cell(
                f"{figure}{_confidence(iv.confidence)}",
                detail=few and f"{on}: no verdict from its interval: {few}",
            ),
        ]
    sides = [_accuracy_why(page, model, metric) for model in (page.reference, candidate)]
    stopped = next((side for side in sides if side and side[0] == CANNOT_CONCLUDE), None)
    failed = page.failures_of(candidate, metric)
    side = stopped or (None if failed else next((side for side in sides if side), None))
    return (
        _both(*side)
        if side
        else _not_run(
            failed,
            f"verdict:{metric} measurement of {candidate}",
            "verdict",
            "a declared accuracy benchmark's test_verdict, docs/writing-benchmarks.md",
        )
    )


def _reference_accuracy_cells(page: _Page, metric: str) -> list[Cell]:
    """[reference, accuracy with its Wilson interval] of the reference on one benchmark."""
    side, m = _accuracy_why(page, page.reference, metric), page.latest(page.reference, metric)
    if side is None and m is not None:  # m is None only with a side's why
        interval = accuracy_interval(m)
        shown = f" ({format_percent_interval(*interval)})" if interval else ""
        side = (f"{format_percent(m.value)}{shown}", "")
    return _reference_cells(side or (NA, ""))


def _standing(row: DecisionRow, columns: Sequence[Column], metrics: Sequence[str]) -> str:
    """A candidate's accuracy verdicts in short: "" when it holds the reference's accuracy on
    all, else ``worse on GSM8K, cannot conclude on BFCL [2]``."""
    problems = []
    for label in map(metric_label, metrics):
        cell = row.cells[next(i for i, c in enumerate(columns) if c.title == f"{label} verdict")]
        if cell.why:
            problems.append(f"{cell.text} on {label} [{cell.note}]")
        elif cell.verdict not in HOLDS:
            problems.append(f"{cell.verdict} on {label}")
    return ", ".join(problems)


# --------------------------------------------------------------------------- throughput
def _throughput_why(
    page: _Page,
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
    said = f": {_one_line(failed[0].message)}" if failed else ""
    return CANNOT_CONCLUDE, f"the {role} {model}'s {setting} throughput test {m.outcome}{said}"


def _at(page: _Page, model: str) -> str:
    """`` at c4`` after a figure when the models' settings differ, else ""."""
    return f" at {page.setting(model)}" if page.mixed else ""


def _ratio_cells(page: _Page, candidate: str) -> list[Cell]:
    """[verdict, ratio with interval] of a candidate's throughput against the reference's."""
    m, setting = page.ratio(candidate), page.setting(candidate)
    if m is not None:
        stats = stats_of(m, ThroughputRatioStats)
        verdict, ratio = _verdict(stats.verdict), format_ratio(m.value)
        low, high = page.ratio_interval(candidate)
        if ratio == NA:
            return [verdict, Cell(NA, why=f"the {setting} ratio of {candidate} records no value")]
        if low is None or high is None or stats.interval is None:
            return [
                verdict,
                Cell(
                    f"{ratio} (no interval){_at(page, candidate)}",
                    why=(
                        f"{candidate}'s {setting} ratio has no interval: a side has a single repeat "
                        "(run --repeats 2 or more)"
                    ),
                ),
            ]
        return [
            verdict,
            Cell(
                f"{ratio} [{low:.2f}, {high:.2f}]"
                f"{_confidence(stats.interval.confidence)}{_at(page, candidate)}"
            ),
        ]
    side = _throughput_why(page, page.reference, page.at[candidate]) or _throughput_why(
        page, candidate
    )
    failed = [
        f
        for f in page.failures_of(candidate, setting)
        if f.name.startswith("test_throughput_ratio")
    ]
    return (
        _both(*side)
        if side
        else _not_run(
            failed,
            f"{setting} throughput ratio of {candidate}",
            "ratio",
            "test_throughput_ratio in benches/test_throughput.py",
        )
    )


def _reference_throughput_cells(page: _Page) -> list[Cell]:
    reference = page.reference
    side, m = _throughput_why(page, reference), page.throughput_at(reference, page.at[reference])
    if side is None and m is not None:  # m is None only with a side's why
        side = (f"{format_rate(m.value)} tokens/s{_at(page, page.reference)}", "")
    return _reference_cells(side or (NA, ""))


# --------------------------------------------------------------------------- capacity under the SLO
@dataclass(frozen=True)
class _Search:
    """A knob's search as the page names it: its ``ratio`` benchmark, column ``group`` and
    its parts (``short``: the verdict's, ``figure``: the capacity's), ``what`` it finds, what a
    ``missing`` one lacks, the ``search``, its tests' ``bench`` file; of its ratio: the
    ``ratio_name``, what one without a bracket ``lacks``, the ``bound`` a ratio lacks when
    both searches ``passed`` at their top."""

    ratio: str
    group: str
    short: str
    figure: str
    what: str
    missing: str
    search: str
    bench: str
    ratio_name: str
    lacks: str
    bound: str
    passed: str


SEARCHES = {
    CONCURRENCY: _Search(
        CAPACITY_RATIO_BENCHMARK,
        "capacity under the SLO",
        "capacity",
        "concurrency",
        "capacity",
        "capacity measurement",
        "capacity search",
        "benches/test_capacity.py",
        "capacity ratio",
        "search bracket",
        "bracket",
        "searches passed at their server's maximum concurrency",
    ),
    RATE: _Search(
        RATE_CAPACITY_RATIO_BENCHMARK,
        "req/s under the SLO",
        "req/s",
        "requests/s",
        "capacity in req/s",
        "capacity in req/s",
        "rate sweep",
        "benches/test_open_loop.py",
        "capacity ratio in req/s",
        "value or interval",
        "interval",
        "sweeps passed at their maximum rate",
    ),
}


@dataclass(frozen=True)
class _Capacity:
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
        bracket = self.stats.bracket
        return bool(self.value) and bracket is not None and bracket[1] is None

    def cell(self, model: str) -> Cell:
        """The capacity (with the goodput at it in concurrent requests); 0 and the server's
        maximum say so."""
        if self.value is None:
            return Cell(self.text, why=self.why)
        stats, at = self.stats, self.stats.at_capacity
        reason = _one_line(stats.reason)
        if self.knob == RATE:
            tip = f"bracket {rate_bracket_text(stats.bracket)} req/s; {reason}"
            if self.value == 0:
                return Cell(
                    "0 req/s",
                    detail=f"{model} meets the SLO at no rate of its sweep: {reason}",
                    tip=tip,
                )
            return Cell(f"{format_rps(self.value)} req/s", tip=tip)
        if self.value == 0:
            return Cell(
                "0 (misses the SLO at c1)",
                detail=f"{model}'s capacity is 0: {reason or 'no step met the SLO'}",
            )
        goodput = None if at is None else finite(at.goodput_rps)
        said = f"goodput {format_goodput(goodput)} req/s" if goodput is not None else ""
        figures = []
        if at is not None and (attainment := finite(at.slo_attainment)) is not None:
            step = next((s for s in stats.steps if s.value == self.value and s.passed), None)
            counted = f" ({step.good}/{step.requests})" if step else ""
            figures.append(f"{100 * attainment:.0f}% of requests met the SLO{counted}")
        figures += [said] if said else []
        if at is not None and finite(at.output_tokens_per_s) is not None:
            figures.append(f"{format_rate(at.output_tokens_per_s)} output tokens/s")
        searched = (
            SearchBracket(self.value, *stats.bracket, stats.confidence) if stats.bracket else None
        )
        bracket = (
            NA
            if searched is None
            else (
                f"search bracket {searched.text()}"
                if searched.confidence is None
                else f"{100 * searched.confidence:.4g}% interval {searched.interval_text()} (bracket "
                f"{searched.text()})"
            )
        )
        tip = (f"at c{self.value}: {', '.join(figures)}; " if figures else "") + bracket
        below = f"\n{said}" if said else ""
        if self.at_maximum:
            return Cell(
                f"≥{self.value} (server's maximum){below}",
                detail=f"{model}: {reason}" if reason else "",
                tip=tip,
            )
        return Cell(f"{self.value} concurrent{below}", tip=tip)


def _capacity(page: _Page, model: str, knob: str) -> _Capacity:
    """The model's capacity over ``knob`` under the SLO, else why there is none."""
    search, benchmark = SEARCHES[knob], SEARCH_BENCHMARK[knob]
    m, role = page.latest(model, benchmark), page.role(model)
    failed = page.failures_of(model, function=f"test_{benchmark}")
    if m is None:
        if (earlier := page.earlier_runs(model, search.ratio)) and not failed:
            return _Capacity(
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
        return _Capacity(knob, SearchStats(), None, cell.text, cell.why)
    stats = stats_of(m, SearchStats)
    if stats.capacity is None or stats.capacity < 0 or not m.passed:
        said = (
            stats.error
            or (failed[0].message if failed else "")
            or (f"its test {m.outcome}" if not m.passed else "it records no capacity")
        )
        return _Capacity(
            knob, stats, None, CANNOT_CONCLUDE, page.stopped(model, search.search, said)
        )
    return _Capacity(
        knob, stats, int(stats.capacity) if knob == CONCURRENCY else float(stats.capacity)
    )


def _search_ratio_cells(page: _Page, candidate: str, knob: str) -> list[Cell]:
    """[verdict, ratio with the interval the two searches' brackets give] of a candidate's
    capacity over ``knob`` against the reference's; without it, dashes while a side's own
    figure says why, else its failed test, else that its test did not run."""
    search = SEARCHES[knob]
    m = page.latest(candidate, search.ratio)
    if m is None:
        failed = page.failures_of(candidate, function=f"test_{search.ratio}")
        mine, reference = (page.capacities[knob][side].why for side in (candidate, page.reference))
        if mine or (reference and not failed):
            why = mine or f"no {search.what} of the reference to compare with: {reference}"
            return [Cell(DASH, why=why), Cell(DASH, why=why)]
        return _not_run(
            failed,
            f"{search.ratio} measurement of {candidate}",
            "ratio",
            f"test_{search.ratio} in {search.bench}",
        )
    stats = stats_of(m, SearchRatioStats)
    verdict, value, ratio = _verdict(stats.verdict), format_ratio(m.value), stats.ratio
    name = search.ratio_name
    if value == NA and knob == CONCURRENCY:
        return [verdict, Cell(CANNOT_CONCLUDE, why=f"{candidate}'s {name} records no value")]
    if value == NA or ratio is None:
        return [verdict, Cell(value, why=f"{candidate}'s {name} records no {search.lacks}")]
    if ratio.degenerate:
        return [
            verdict,
            Cell(
                f"{value} (no {search.bound})",
                detail=(
                    f"{candidate}'s {name} has no {search.bound}: both {search.passed}, so "
                    "neither capacity is bounded above"
                ),
            ),
        ]
    high = "∞)" if math.isinf(ratio.high) else f"{ratio.high:.2f}]"
    return [verdict, Cell(f"{value} [{ratio.low:.2f}, {high}")]


def _search_cells(page: _Page, model: str, knob: str) -> list[Cell]:
    """[verdict, ratio, capacity] of a knob's search; the reference's own capacity only."""
    figure = page.capacities[knob][model].cell(model)
    if model == page.reference:
        return [Cell(REFERENCE), Cell(REFERENCE), figure]
    return [*_search_ratio_cells(page, model, knob), figure]


# --------------------------------------------------------------------------- cost
@dataclass(frozen=True)
class _Cost:
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
    ) -> _Cost:
        """The cost of a priced measurement; ``no price`` without a price, ``cannot
        conclude`` when priced without a cost."""
        if (usd := finite(usd)) is not None:
            return cls(usd, basis, at, interval, usd_per_hour=finite(usd_per_hour))
        if finite(usd_per_hour) is None:
            return cls(None, why=NO_PRICE_WHY, text=NO_PRICE)
        return cls(
            None, why=f"{whose} records a price but no $/1M output tokens", text=CANNOT_CONCLUDE
        )

    def cell(self) -> Cell:
        if self.usd is None:
            return Cell(self.text, why=self.why)
        interval = (
            f"\n[{format_usd(self.interval[0], '$')}, {format_usd(self.interval[1], '$')}]"
            if self.interval
            else ""
        )
        return Cell(f"{format_usd(self.usd, '$')} {self.at}{interval}")

    def relative(self, reference: _Cost, name: str) -> tuple[float | None, str]:
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


def _cost(page: _Page, model: str, concurrency: int | None = None) -> _Cost:
    """$/1M output tokens at the model's capacity (none at 0), else at its throughput setting
    (``concurrency``, else its compared one), else why there is none."""
    capacity, role = page.capacities[CONCURRENCY][model], page.role(model)
    if capacity.value:
        at, pricing = capacity.stats.at_capacity, capacity.stats.pricing
        return _Cost.priced(
            at and at.usd_per_million_output_tokens,
            pricing and pricing.usd_per_hour,
            "capacity",
            f"at c{capacity.value}",
            None,
            f"the {role} {model}'s capacity",
        )
    if capacity.value == 0:
        return _Cost(
            None,
            why=f"the {role} {model} misses the SLO even at concurrency 1 "
            "(capacity 0): no cost at its capacity",
            text=NA,
        )
    setting = page.at[model] if concurrency is None else concurrency
    measured = page.throughput_at(model, setting)
    throughput_why = _throughput_why(page, model, setting)
    if measured is not None and throughput_why is None:
        cost = stats_of(measured, ThroughputStats).cost
        return _Cost.priced(
            cost and cost.usd_per_million_output_tokens,
            cost and cost.pricing.usd_per_hour,
            f"c{setting}",
            f"at c{setting}",
            cost.interval if cost else None,
            f"the {role} {model}'s c{setting} throughput",
        )
    if capacity.text == CANNOT_CONCLUDE:
        return _Cost(None, why=capacity.why, text=CANNOT_CONCLUDE)
    if throughput_why is not None and throughput_why[0] == CANNOT_CONCLUDE:
        return _Cost(None, why=throughput_why[1], text=CANNOT_CONCLUDE)
    whose = (
        "in this run"
        if not page.any_capacity and not page.any_at(setting)
        else f"of the {role} {model}"
    )
    return _Cost(None, why=f"no capacity or c{setting} throughput measurement {whose} to price")


def _relative_cost_cell(page: _Page, candidate: str) -> Cell:
    """Candidate ÷ reference cost; at a throughput setting its interval is the throughput
    ratio's, inverted; at the capacities (one search window each) there is none."""
    (value, why), cost = page.relative[candidate], page.costs[candidate]
    if value is None:
        return Cell(DASH if cost.usd is None else CANNOT_CONCLUDE, why=why)
    low, high = page.ratio_interval(candidate)
    at_setting = cost.basis != "capacity"
    if at_setting and low is not None and high is not None and low > 0:
        return Cell(f"{format_ratio(value)} [{1 / high:.2f}, {1 / low:.2f}]")
    why = (
        f"its {cost.basis} throughput ratio has none (a side has a single repeat: run "
        "--repeats 2 or more)"
        if at_setting
        else "each cost at its capacity comes from one search window"
    )
    return Cell(
        f"{format_ratio(value)} (no interval)",
        why=f"{candidate}'s cost vs the reference has no interval: {why}",
    )


# --------------------------------------------------------------------------- startup, screening
def _startup_cell(page: _Page, model: str) -> Cell:
    """Launch → first token, the geometric mean over fresh launches, and the cache state."""
    m = page.latest(model, STARTUP)
    failed = page.failures_of(model, function="test_startup")
    if m is None:
        return page.missing(
            model,
            STARTUP,
            failed,
            "cold start",
            "benches/test_startup.py -m startup; not for attached endpoints",
        )
    stats = stats_of(m, StartupStats)
    first = finite(stats.first_token_s)
    if first is None or not m.passed:
        said = "; ".join(stats.errors) or f"its test {m.outcome}"
        return Cell(CANNOT_CONCLUDE, why=page.stopped(model, "cold start", said))
    interval = stats.first_token_s_interval
    ready = finite(stats.ready_s)
    tip = (
        f"{len(stats.launches)} launches; 95% interval "
        + ("none" if interval is None else f"{interval[0]:.2f}–{interval[1]:.2f} s")
        + ("" if ready is None else f"; ready after {ready:.2f} s")
    )
    return Cell(f"{first:.2f} s ({stats.cache})", tip=tip)


def _screen_cells(page: _Page, model: str) -> list[Cell]:
    m = page.latest(model, SCREEN)
    if m is None:
        failed = page.failures_of(model, SCREEN)
        return _both(
            NOT_SCREENED,
            f"{model}'s {failed[0].said}"
            if failed
            else f"no screening of {model} (pytest benches -m screen; Hugging Face sources only)",
        )
    stats = stats_of(m, ScreeningResult)
    licence = stats.license or "unknown"
    if finite(stats.kv_headroom_gib) is None:
        return [Cell(licence), Cell(NA, why=f"the screening of {model} found no weight size")]
    return [
        Cell(licence),
        Cell(f"{stats.kv_headroom_gib:.1f} GiB KV{'' if stats.accepted else ' (rejected)'}"),
    ]


# --------------------------------------------------------------------------- a row and its flags
def _row(page: _Page, model: str, metrics: Sequence[str], screened: bool) -> DecisionRow:
    """The reference's own figures, or a candidate's compared with them."""
    if model == page.reference:
        return DecisionRow(
            model,
            True,
            [
                *(cell for metric in metrics for cell in _reference_accuracy_cells(page, metric)),
                *_reference_throughput_cells(page),
                *(cell for knob in SEARCHES for cell in _search_cells(page, model, knob)),
                page.costs[model].cell(),
                Cell(REFERENCE),
                _startup_cell(page, model),
                *(_screen_cells(page, model) if screened else []),
            ],
        )
    return DecisionRow(
        model,
        False,
        [
            *(cell for metric in metrics for cell in _verdict_cells(page, model, metric)),
            *_ratio_cells(page, model),
            *(cell for knob in SEARCHES for cell in _search_cells(page, model, knob)),
            page.costs[model].cell(),
            _relative_cost_cell(page, model),
            _startup_cell(page, model),
            *(_screen_cells(page, model) if screened else []),
        ],
    )


def _flags(page: _Page, model: str, cells: Sequence[Cell], columns: Sequence[Column]) -> list[str]:
    """Unstable, contended or flagged settings, failed items and tests, stopped groups."""

    def setting(m: Measurement) -> str:
        prompt, concurrency = Setting.of(m).prompt_tokens, Setting.of(m).concurrency
        rate = finite(m.params.get("request_rate"))
        if rate is not None:
            return f"{m.benchmark} {rate:g} req/s"
        return f"c{concurrency}" if prompt is None else f"p{prompt}-c{concurrency}"

    rows = [
        (m, throughput_row(m))
        for m in page.measurements
        if m.model == model and measurement_kind(m) == "throughput"
    ]
    contended = [setting(m) for m, row in rows if row.contended] + [
        search.search
        for knob, search in SEARCHES.items()
        if (m := page.latest(model, SEARCH_BENCHMARK[knob])) and stats_of(m, SearchStats).contended
    ]
    queued = [setting(m) for m, row in rows if row.stats.server_flagged_windows]
    carried: dict[str, list[str]] = {}
    for m, where in (
        (page.ratio(model), page.setting(model)),
        *((page.latest(model, search.ratio), search.short) for search in SEARCHES.values()),
    ):
        if m is not None and isinstance(m.stats, ThroughputRatioStats | SearchRatioStats):
            for flag in m.stats.reference_flags or ():
                carried.setdefault(f"reference {flag}", []).append(where)
    failed_items = [
        f"{m.benchmark} {failed} of {len(m.items)}"
        for m in page.measurements
        if m.model == model and measurement_kind(m) == "accuracy"
        if (failed := sum(item.failed for item in m.item_records()))
    ]
    # a comparison's test that failed on its own verdict (--fail-on) shows as that verdict
    judged = {
        m.test_id
        for m in page.measurements
        if m.model == model and isinstance(m.stats, COMPARISONS)
    }
    failed_tests = sorted({f.name for f in page.failures_of(model) if f.test_id not in judged})
    stopped = sorted(
        {c.group for c, cell in zip(columns, cells) if cell.why and cell.text == CANNOT_CONCLUDE}
    )
    return [
        f"{word} ({', '.join(found)})"
        for word, found in (
            ("unstable", [setting(m) for m, row in rows if row.stats.unstable]),
            ("contended", contended),
            ("server queued", queued),
            ("saturated", [setting(m) for m, row in rows if row.stats.saturated_windows]),
            *carried.items(),
            ("failed items", failed_items),
            ("failed tests", failed_tests),
            ("cannot conclude", stopped),
        )
        if found
    ]


# --------------------------------------------------------------------------- answer and Pareto
def _names(models: Sequence[str]) -> str:
    return ", ".join(models[:-1]) + " and " + models[-1] if len(models) > 1 else "".join(models)


def _nothing_to_choose(page: _Page) -> str:
    if not any(page.measured(model) for model in page.at):
        return "no throughput, capacity or cost was measured to choose among them"
    return f"no capacity, cost or {page.settings_text} throughput ratio to choose among them"


def _picks(page: _Page, pool: Sequence[str]) -> list[str]:
    """Among ``pool``: the highest capacity and the cheapest (from concluded cells only);
    without either, the highest throughput ratio."""
    picks = []
    capacities = page.capacities[CONCURRENCY]
    measured = {c: capacities[c] for c in pool if capacities[c].value is not None}
    if measured:
        best = max(cap.value or 0 for cap in measured.values())
        top = [c for c, cap in measured.items() if cap.value == best]
        shown = f"≥{best}" if all(measured[c].at_maximum for c in top) else str(best)
        picks.append(
            f"none of {_names(top)} meets the SLO even at concurrency 1"
            if best == 0
            else f"highest capacity under the SLO: {_names(top)} ({shown} concurrent requests)"
        )
    priced = {c: page.costs[c] for c in pool if page.costs[c].usd is not None}
    # each at its own capacity, else each at one throughput setting (the highest): one
    # basis, one price
    bases = {cost.basis for cost in priced.values()}
    basis = (
        "capacity"
        if "capacity" in bases
        else max(bases, key=lambda b: int(b.removeprefix("c")), default="")
    )
    comparable = {c: cost for c, cost in priced.items() if cost.basis == basis}
    if comparable and len({cost.usd_per_hour for cost in comparable.values()}) == 1:
        cheapest = min(cost.usd or 0.0 for cost in comparable.values())
        top = [c for c, cost in comparable.items() if cost.usd == cheapest]
        relative = page.relative.get(top[0], (None, ""))[0]
        versus = f", {format_ratio(relative)} the reference's" if relative is not None else ""
        picks.append(
            f"cheapest: {_names(top)} ({format_usd(cheapest, '$')}/1M output tokens "
            f"{comparable[top[0]].at}{versus})"
        )
        if elsewhere := [c for c in pool if c in priced and c not in comparable]:
            picks.append(
                f"no comparable cost for {_names(elsewhere)} (priced "
                f"{priced[elsewhere[0]].at}, not "
                f"{'at its capacity' if basis == 'capacity' else f'at {basis}'})"
            )
        if unpriced := [c for c in pool if c not in priced]:
            picks.append(f"no cost for {_names(unpriced)}")
    if picks:
        return picks
    ratios = {
        c: (value, stats_of(m, ThroughputRatioStats).verdict)
        for c in pool
        if (m := page.ratio(c)) is not None and (value := _decided_ratio(page, c)) is not None
    }
    if not ratios and any(page.ratio(c) is not None for c in pool):
        return [
            f"no capacity or cost measured, and no {page.settings_text} throughput ratio "
            f"decided (each 95% interval wider than ×/÷{DECIDED_RATIO_SPREAD:g})"
        ]
    if not ratios:
        return [_nothing_to_choose(page)]
    best_ratio = max(v for v, _ in ratios.values())
    top = [c for c, (v, _) in ratios.items() if v == best_ratio]
    return [
        (
            f"no capacity or cost measured; highest {page.setting(top[0])} throughput ratio: "
            f"{_names(top)} ({format_ratio(best_ratio)} the reference, "
            f"{ratios[top[0]][1] or ''})"
        )
    ]


def _decided_ratio(page: _Page, candidate: str) -> float | None:
    """The candidate's throughput ratio where its interval lies within ×/÷
    :data:`DECIDED_RATIO_SPREAD` of it, else None."""
    m = page.ratio(candidate)
    value = None if m is None else finite(m.value)
    low, high = page.ratio_interval(candidate)
    if value is None or low is None or high is None or low <= 0:
        return None
    return value if max(high / value, value / low) <= DECIDED_RATIO_SPREAD else None


def _output_rates(page: _Page, holding: Sequence[str]) -> str:
    """`` at 0.66× its output rate at c4``: the throughput ratios of the candidates that hold
    the reference's accuracy (``0.66× (a) and 1.83× (b)``), each only where its interval is
    narrow enough to be a figure (:func:`_decided_ratio`; else what would decide it); "" when
    none has one."""
    ratios = [
        c for c in holding if (m := page.ratio(c)) is not None and finite(m.value) is not None
    ]
    rates = [(c, format_ratio(v)) for c in ratios if (v := _decided_ratio(page, c)) is not None]
    undecided = [c for c in ratios if _decided_ratio(page, c) is None]
    said = ""
    if rates:
        settings = {page.setting(c) for c, _ in rates}
        one = len(settings) == 1
        shown = [
            (ratio if len(rates) == 1 else f"{ratio} ({c})")
            if one
            else f"{ratio} ({c}, at {page.setting(c)})"
            for c, ratio in rates
        ]
        said = f" at {_names(shown)} its output rate" + (f" at {settings.pop()}" if one else "")
    if undecided:
        said += (
            f" ({_names(undecided)}: output rate vs {page.reference} not decided, its 95% "
            f"interval wider than ×/÷{DECIDED_RATIO_SPREAD:g}; more repeats, or "
            "--interleave --repeats auto, decide it)"
        )
    return said


def _answer(page: _Page, metrics: Sequence[str], standings: Mapping[str, str]) -> str:
    """Who holds the reference's accuracy on every verdict, and among them the picks."""
    reference, candidates = page.reference, page.candidates
    if not metrics:
        found = _picks(page, candidates)
        return (
            f"No answer: this run has no accuracy verdict against {reference}, so no "
            "candidate is shown to match it (run an accuracy benchmark: -m gsm8k, -m bfcl "
            "or your own)"
            + (
                ""
                if found == [_nothing_to_choose(page)]
                else ". Not judged on accuracy: " + "; ".join(found)
            )
            + "."
        )
    labels = ", ".join(map(metric_label, metrics))
    holding = [c for c in candidates if not standings[c]]
    if not holding:
        said = "; ".join(f"{c} {standings[c]}" for c in candidates)
        return (
            f"No answer: no candidate matches {reference} on every accuracy verdict "
            f"({labels}): {said}."
        )
    better = {
        c: [
            metric_label(m)
            for m in metrics
            if (v := page.verdict(c, m)) is not None
            and str(stats_of(v, AccuracyVerdictStats).verdict) == "better"
        ]
        for c in holding
    }
    one = len(holding) == 1
    what = f"every accuracy verdict ({labels})"
    if all(len(on) == len(metrics) for on in better.values()):  # better on every verdict
        verb, what = "beats" if one else "beat", labels if len(metrics) == 1 else what
    elif any(better.values()):  # "matches" would undersell a candidate found better
        beats = "; ".join(f"{c} better on {', '.join(on)}" for c, on in better.items() if on)
        verb, what = "matches or beats" if one else "match or beat", f"{what[:-1]}: {beats})"
    else:
        verb = "matches" if one else "match"
    parts = [f"{_names(holding)} {verb} {reference} on {what}{_output_rates(page, holding)}"]
    if rest := [c for c in candidates if c not in holding]:
        parts.append("not " + "; not ".join(f"{c} ({standings[c]})" for c in rest))
    return "; ".join(parts + _picks(page, holding)) + "."


def _pareto(page: _Page, metrics: Sequence[str], standings: Mapping[str, str]) -> Pareto | str:
    """The Pareto plot's data against the throughput ratio, else relative cost; else why not."""
    candidates = page.candidates
    judged = [m for m in metrics if any(page.verdict(c, m) is not None for c in candidates)]
    if not judged:
        return "no accuracy verdict to plot against"
    label = metric_label(judged[0])
    settings = page.settings_text
    use_ratio = any(
        (m := page.ratio(c)) is not None and finite(m.value) is not None for c in candidates
    )
    if not use_ratio and not any(v is not None for v, _ in page.relative.values()):
        return f"neither a {settings} throughput ratio nor a relative cost to plot against"
    points = [
        ParetoPoint(page.reference, 1.0, 0.0, None, None, None, None, True, is_reference=True)
    ]
    left_out = []
    for c in candidates:
        verdict = page.verdict(c, judged[0])
        stats = None if verdict is None else stats_of(verdict, AccuracyVerdictStats)
        iv = None if stats is None else (stats.sequence or stats.interval)
        y = None if iv is None else finite(iv.difference)
        ratio = page.ratio(c)
        x, why = (
            (
                None if ratio is None else finite(ratio.value),
                f"no {page.setting(c)} throughput ratio",
            )
            if use_ratio
            else page.relative[c]
        )
        if y is None or iv is None or x is None:
            left_out.append(f"{c}: no {label} verdict" if y is None else f"{c}: {why}")
            continue
        x_low, x_high = page.ratio_interval(c) if use_ratio else (None, None)
        points.append(
            ParetoPoint(c, x, y, x_low, x_high, finite(iv.low), finite(iv.high), not standings[c])
        )
    front = pareto_front([(p.x, p.y) for p in points], x_higher_is_better=use_ratio)
    each = " (each model at its own)" if page.mixed else ""
    at = (
        "each at its capacity under the SLO"
        if page.costs[page.reference].basis == "capacity"
        else f"at {settings}{each}"
    )
    return Pareto(
        f"throughput at {settings}{each} ÷ the reference's (95% interval)"
        if use_ratio
        else f"$/1M output tokens ÷ the reference's, {at} (lower is cheaper)",
        f"{label} accuracy − the reference's (pp, 95% interval)",
        f"{settings} throughput ratio" if use_ratio else "relative cost",
        f"{label} difference",
        use_ratio,
        tuple(replace(p, on_front=on) for p, on in zip(points, front)),
        tuple(left_out),
    )


def pareto_front(
    points: Sequence[tuple[float, float]], x_higher_is_better: bool = True
) -> list[bool]:
    """Whether each point is on the Pareto front: no other point is at least as good on both
    axes and better on one (y: higher is better; x as ``x_higher_is_better`` says)."""
    sign = 1.0 if x_higher_is_better else -1.0
    scored = [(sign * x, y) for x, y in points]
    return [not any(o[0] >= p[0] and o[1] >= p[1] and o != p for o in scored) for p in scored]


# --------------------------------------------------------------------------- notes
def _notes(page: _Page, metrics: Sequence[str], groups: set[str]) -> list[str]:
    """What the shown ``groups`` of columns mean, the SLO, the price and where it came from."""
    searched = [
        (m, Setting.of(m))
        for m in page.measurements
        if m.benchmark in (*SEARCH_BENCHMARK.values(), CAPACITY_RATIO_BENCHMARK)
    ]
    slos = {_slo_text(s.slo) for _, s in searched if isinstance(s.slo, Mapping)}
    targets = {
        knob: " or ".join(
            f"{100 * t:g}%"
            for t in sorted(
                {
                    s.attainment_target
                    for m, s in searched
                    if m.benchmark == benchmark and s.attainment_target is not None
                }
            )
        )
        or "enough"
        for knob, benchmark in SEARCH_BENCHMARK.items()
    }
    prices = {
        p.describe()
        for m in page.measurements
        if (
            p := stats_of(m, ThroughputStats).pricing
            or (
                stats_of(m, SearchStats).pricing
                if m.benchmark == SEARCH_BENCHMARK[CONCURRENCY]
                else None
            )
        )
        and finite(p.usd_per_hour) is not None
    }
    capacity = "capacity under the SLO" in groups
    return [
        note
        for shown, note in (
            (
                metrics,
                (
                    "difference: candidate − reference accuracy in percentage points, paired "
                    "item by item (bootstrap interval); the reference row shows its own "
                    "accuracy (Wilson 95% interval)"
                ),
            ),
            (
                f"throughput at {page.settings_text}" in groups,
                (
                    "ratio: candidate ÷ reference output tokens/s at "
                    + (
                        f"{page.at[page.reference]} concurrent requests"
                        if not page.mixed
                        else "the highest concurrency at which both were measured alike (said in each cell)"
                    )
                    + ", short prompts (Welch t interval over the repeats)"
                ),
            ),
            (
                capacity or "req/s under the SLO" in groups,
                f"SLO: {'; '.join(sorted(slos)) or 'not recorded'}",
            ),
            (
                capacity,
                (
                    "capacity: the most "
                    "concurrent requests (up to the server's maximum) at which "
                    f"{targets[CONCURRENCY]} of "
                    "requests meet it, with the goodput there (requests per second that met "
                    "it)"
                ),
            ),
            (
                capacity
                and any(m.benchmark == CAPACITY_RATIO_BENCHMARK for m in page.measurements),
                (
                    "capacity vs reference: candidate ÷ reference capacity with its 90% interval "
                    "(last pass ÷ first miss, and first miss ÷ last pass, of both searches' 95% "
                    "capacity intervals); older one-window searches give a bracket with no level"
                ),
            ),
            (
                "req/s under the SLO" in groups,
                (
                    "capacity in req/s: the highest request rate (open-loop arrivals) at which "
                    f"{targets[RATE]} of requests "
                    "meet the SLO, each step decided from its 90% Clopper-Pearson interval; a "
                    "candidate's ratio to the reference's and the verdict from the interval the two "
                    "sweeps' brackets give"
                ),
            ),
            (
                "cold start" in groups,
                (
                    "cold start: seconds from launching the server to its first token, geometric "
                    "mean over fresh launches; cold: its files read from disk, warm: from a cache"
                ),
            ),
            (
                "cost" in groups,
                "cost: the machine's price ÷ output tokens/s, at the model's "
                "capacity under the SLO, else at "
                + (page.settings_text if not page.mixed else "its throughput setting")
                + "; price "
                + ("; ".join(sorted(prices)) if prices else "not given"),
            ),
        )
        if shown
    ]


def _slo_text(slo: Mapping[str, object]) -> str:
    try:
        return str(Slo.from_dict(slo))
    except (TypeError, ValueError, KeyError):
        return str(dict(slo))


# --------------------------------------------------------------------------- building
def _columns(page: _Page, metrics: Sequence[str], screened: bool) -> list[Column]:
    """The columns, grouped: each group's verdict first, then its figure and interval."""
    columns = []
    for label in map(metric_label, metrics):
        group = f"{label} vs reference"
        columns += [
            Column(group, "verdict", f"{label} verdict", verdict=True, block=ACCURACY_BLOCK),
            Column(
                group,
                "difference [95% interval]",
                f"{label} difference [95% interval]",
                block=ACCURACY_BLOCK,
            ),
        ]
    throughput, capacity, rate = (
        f"throughput at {page.settings_text}",
        "capacity under the SLO",
        "req/s under the SLO",
    )
    setting = "throughput" if page.mixed else page.settings_text
    columns += [
        Column(throughput, "verdict", f"{setting} verdict", verdict=True),
        Column(throughput, "ratio [95% interval]", f"{setting} ratio [95% interval]"),
        Column(capacity, "verdict", "capacity verdict", verdict=True),
        Column(capacity, "vs reference [interval]", "capacity vs reference [interval]"),
        Column(capacity, "concurrency", "capacity"),
        Column(rate, "verdict", "req/s verdict", verdict=True),
        Column(rate, "vs reference [interval]", "req/s vs reference [interval]"),
        Column(rate, "requests/s", "capacity in req/s"),
        Column("cost", "$/1M output tokens", "$/1M output tokens"),
        Column("cost", "vs reference", "cost vs reference"),
        Column("cold start", "first token", "cold start"),
    ]
    return columns + (
        [
            Column("screening", "licence", "licence"),
            Column("screening", "memory headroom", "memory headroom"),
        ]
        if screened
        else []
    )


def decision_page(
    measurements: Measurements, run: RunInfo, failures: Sequence[FailedTest] = ()
) -> DecisionPage | None:
    """The decision page of a run and its failed tests; None without a reference or candidate."""
    reference = run.reference or compared_reference(measurements)
    candidates = sorted({m.model for m in measurements} - {reference or "", ""})
    if reference is None or not candidates:
        return None
    page = _Page(measurements, reference, candidates, failures, run.run_id)
    metrics = _accuracy_metrics(page)
    screened = any(m.benchmark == SCREEN for m in measurements)
    columns = _columns(page, metrics, screened)
    rows = [_row(page, model, metrics, screened) for model in (reference, *candidates)]
    reasons: list[str] = []
    for row in rows:
        reasons += [
            line
            for line in dict.fromkeys(c.line for c in row.cells)
            if line and line not in reasons
        ]
        row.cells = [
            replace(cell, note=reasons.index(cell.line) + 1) if cell.line else cell
            for cell in row.cells
        ]
        row.flags = _flags(page, row.model, row.cells, columns)
    standings = {row.model: _standing(row, columns, metrics) for row in rows[1:]}
    pareto = _pareto(page, metrics, standings)
    columns, unmeasured = _without_unmeasured_groups(columns, rows)
    return DecisionPage(
        _answer(page, metrics, standings),
        columns,
        rows,
        reasons,
        _notes(page, metrics, {c.group for c in columns}),
        None if isinstance(pareto, str) else pareto,
        pareto if isinstance(pareto, str) else "",
        unmeasured,
        [f"{f.test_id}: {_one_line(f.message, 100)}" for f in page.failures if f.model is None],
    )


def _without_unmeasured_groups(
    columns: list[Column],
    rows: list[DecisionRow],
) -> tuple[list[Column], list[tuple[str, list[int]]]]:
    """The columns of groups some model has a figure in (or a cell that cannot conclude);
    the rest leave the table (their cells taken out of ``rows``), each with its notes."""
    dropped: list[tuple[str, list[int]]] = []
    keep: list[int] = []
    for group in dict.fromkeys(c.group for c in columns):
        indices = [i for i, c in enumerate(columns) if c.group == group]
        cells = [row.cells[i] for row in rows for i in indices]
        if all(c.why or c.text == REFERENCE for c in cells) and not any(
            c.text == CANNOT_CONCLUDE for c in cells
        ):
            dropped.append((group, sorted({c.note for c in cells if c.note is not None})))
        else:
            keep += indices
    for row in rows:
        row.cells = [row.cells[i] for i in keep]
    return [columns[i] for i in keep], dropped


def pareto_line(page: DecisionPage) -> str:
    """One line naming the Pareto front, or why there is no plot (both reports show it)."""
    if page.pareto is None:
        return f"No Pareto plot: {page.pareto_why}."
    left_out = "; not plotted: " + "; ".join(page.pareto.left_out) if page.pareto.left_out else ""
    return (
        f"Pareto front ({page.pareto.y_name} against {page.pareto.x_name}): "
        f"{', '.join(page.pareto.front)}{left_out}."
    )


def unplaced_line(page: DecisionPage) -> str:
    """The failed tests of models without a row, in one line ("" if none)."""
    count = len(page.unplaced)
    return (
        (
            f"Not in the table: {count} failed test{'s' if count != 1 else ''} of models that "
            "recorded nothing: "
            + "; ".join(page.unplaced[:3])
            + (f"; and {count - 3} more" if count > 3 else "")
            + "."
        )
        if count
        else ""
    )


def unmeasured_line(page: DecisionPage) -> str:
    """``Not measured for any model: capacity under the SLO [1]; cost [2].`` ("" if none)."""
    return (
        "Not measured for any model: "
        + "; ".join(
            f"{group} {' '.join(f'[{n}]' for n in notes)}".strip()
            for group, notes in page.unmeasured
        )
        + "."
        if page.unmeasured
        else ""
    )


# --------------------------------------------------------------------------- the table's layout
@dataclass(frozen=True)
class Line:
    """A line of a table cell: ``label`` (the benchmark, where a column holds several
    groups; else "") and the parts on it."""

    label: str
    parts: tuple[tuple[Column, Cell], ...]


@dataclass(frozen=True)
class Block:
    """A column of the table: one group, or several (every accuracy benchmark's), each with
    its parts (the index of the part's cell in a row, its column)."""

    title: str
    groups: tuple[tuple[str, tuple[tuple[int, Column], ...]], ...]

    @property
    def parts(self) -> str:
        """What its lines hold, in a few words: ``verdict · ratio [95% interval]``."""
        names = [c.name for _, c in self.groups[0][1]]
        return " · ".join((["benchmark"] if self.several else []) + names)

    @property
    def several(self) -> bool:
        return len(self.groups) > 1 or self.title == ACCURACY_BLOCK


def table_columns(page: DecisionPage) -> list[Block]:
    """The table's columns, in order: every accuracy group in one, each other group in one."""
    found: dict[str, dict[str, list[tuple[int, Column]]]] = {}
    for i, column in enumerate(page.columns):
        block = found.setdefault(column.block or column.group, {})
        block.setdefault(column.group, []).append((i, column))
    return [
        Block(title, tuple((group, tuple(parts)) for group, parts in groups.items()))
        for title, groups in found.items()
    ]


def _shown(parts: list[tuple[Column, Cell]], reference: bool) -> tuple[tuple[Column, Cell], ...]:
    """A group's parts as shown: without the reference row's placeholders, and a dash that
    points to the same line as another part shown once, by that part."""
    cells = [(c, cell) for c, cell in parts if not (reference and cell.text == REFERENCE)]
    kept: list[tuple[Column, Cell]] = []
    for column, cell in cells:
        repeated = (
            cell.text == DASH
            and cell.note is not None
            and (
                any(other.note == cell.note and other.text != DASH for _, other in cells)
                or any(other.note == cell.note for _, other in kept)
            )
        )
        if not repeated:
            kept.append((column, cell))
    return tuple(kept)


def cell_lines(block: Block, row: DecisionRow) -> list[Line]:
    """``row``'s cell in ``block``: a line per group (its label, then its parts) in a column
    of several groups, else a line per part."""
    lines = []
    for group, columns in block.groups:
        parts = _shown([(c, row.cells[i]) for i, c in columns], row.is_reference)
        if block.several:
            lines.append(Line(group.removesuffix(" vs reference"), parts))
        else:
            lines += [Line("", (part,)) for part in parts]
    return lines


def figure_lines(page: DecisionPage) -> list[str]:
    """The figures cells show in their tooltip only: ``qwen3-4b, capacity: at c3: ...``."""
    return [
        f"{row.model}, {column.title}: {cell.tip}"
        for row in page.rows
        for block in table_columns(page)
        for line in cell_lines(block, row)
        for column, cell in line.parts
        if cell.tip
    ]
