"""The decision page: one row per candidate with the figures that decide which model to serve.

Built from a run's measurements (the live run's or a results file's) and its
failed tests, for the HTML and Markdown reports to render at their top:

- per accuracy benchmark with verdicts (GSM8K, BFCL, and any ``verdict:<name>``
  a user's own evaluation records): the verdict, the paired difference and its interval;
- the throughput ratio at 16 concurrent requests (short prompts) with its interval and verdict;
- capacity under the SLO (``stats.capacity``; goodput at it), and its ratio to the
  reference's with the search bracket (not a confidence interval) and verdict;
- $/1M output tokens at that capacity (else at c16) and relative to the reference's, when
  both are priced on the same basis at the same price;
- licence and memory headroom, when the models were screened;
- flags: unstable or contended throughput, failed items, failed tests, cells that cannot conclude.

A cell shows a figure only when the measurement behind it succeeded; otherwise
it says ``not measured``, ``no price`` or ``cannot conclude`` and points (``[n]``) to a line
saying why (:attr:`DecisionPage.reasons`); a figure that needs a word (capacity 0, a
search that reached the server's maximum) points to its line the same way. A column group
no model has a figure in leaves the table and is named once (:attr:`DecisionPage.unmeasured`).
The answer above the table and the Pareto points come from concluded cells only. Pure: no
pytest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.cost import Pricing
from ..core.metrics import (
    METRICS,
    RATIO_BENCHMARK,
    VERDICT_PREFIX,
    Kind,
    metric_for,
    rank,
)
from ..core.slo import Slo
from ..core.stats import PairedInterval
from .tables import (
    NA,
    accuracy_interval,
    format_goodput,
    format_percent,
    format_percent_interval,
    format_points,
    format_points_interval,
    format_rate,
    format_ratio,
    measurement_kind,
    throughput_row,
)

CONCURRENCY = 16
"""The throughput setting the page compares: 16 concurrent requests, short prompts."""
CAPACITY = "capacity"
CAPACITY_RATIO = "capacity_ratio"
SCREEN = "screen"
HOLDS = ("matches", "equivalent", "better")
"""Verdicts under which a candidate holds the reference's accuracy."""

NOT_MEASURED = "not measured"
CANNOT_CONCLUDE = "cannot conclude"
NOT_JUDGED = "not judged"
NOT_SCREENED = "not screened"
NO_PRICE = "no price"
NO_PRICE_WHY = ("no price: give --usd-per-hour or a [pricing] table in the sweep (no cost is "
                "ever assumed)")
REFERENCE = "reference"
DASH = "—"


# --------------------------------------------------------------------------- the page


@dataclass(frozen=True)
class Cell:
    """One cell: a figure or verdict word, or why there is none.

    ``why`` (one line) is set exactly when the cell does not conclude; ``detail`` is a
    line a concluded figure needs (why a capacity is 0); ``note`` is the 1-based number
    of either line in :attr:`DecisionPage.reasons`. ``tip``: more about a concluded
    figure, for the HTML's tooltip only.
    """

    text: str
    why: str = ""
    note: int | None = None
    verdict: str | None = None
    detail: str = ""
    tip: str = ""

    @property
    def concluded(self) -> bool:
        return not self.why

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
    """A column: its group (``GSM8K vs reference``), its name in the group, a flat title."""

    group: str
    name: str
    title: str
    verdict: bool = False
    """Holds verdict words (renderers style them)."""
    text: bool = False
    """Holds words, not figures (renderers align it left)."""


@dataclass
class DecisionRow:
    """One model: the reference (its own figures) or a candidate (compared with it)."""

    model: str
    is_reference: bool
    cells: list[Cell]
    flags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ParetoPoint:
    """A model on the Pareto plot; ``x_low``/``x_high``/``y_low``/``y_high`` are None without
    an interval."""

    model: str
    x: float
    y: float
    x_low: float | None
    x_high: float | None
    y_low: float | None
    y_high: float | None
    holds: bool
    """Matches the reference on every accuracy verdict."""
    on_front: bool
    is_reference: bool = False


@dataclass(frozen=True)
class Pareto:
    """The Pareto plot's data: accuracy difference (y) against throughput ratio or relative cost."""

    x_label: str
    y_label: str
    x_name: str
    """The x axis in a few words: ``c16 throughput ratio``, ``relative cost``."""
    y_name: str
    x_higher_is_better: bool
    points: tuple[ParetoPoint, ...]
    left_out: tuple[str, ...]
    """``model: why`` of each candidate without a point."""

    @property
    def front(self) -> list[str]:
        """The models on the front, in x order."""
        return [p.model for p in sorted(self.points, key=lambda p: p.x) if p.on_front]


@dataclass
class DecisionPage:
    """The whole page: the answer line, the table, its reasons and notes, the Pareto data."""

    reference: str
    answer: str
    metrics: list[str]
    columns: list[Column]
    rows: list[DecisionRow]
    reasons: list[str]
    """The lines cells point to: why a cell has no figure, or what a figure needs said."""
    notes: list[str]
    pareto: Pareto | None
    pareto_why: str = ""
    unmeasured: list[tuple[str, list[int]]] = field(default_factory=list)
    """Column groups no model has a figure in, left out of the table: (group, the notes
    saying why)."""
    unplaced: list[str] = field(default_factory=list)
    """Failed tests of models that recorded nothing, so have no row: ``test id: message``."""


# --------------------------------------------------------------------------- reading


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _stats(m: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(m.get("stats"))


def _params(m: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(m.get("params"))


def _passed(m: Mapping[str, Any]) -> bool:
    return bool(m.get("outcome", "passed") == "passed")


def _failed_items(m: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [i for i in (m.get("items") or []) if isinstance(i, Mapping) and i.get("error")]


def metric_label(metric: str) -> str:
    """``GSM8K``, ``BFCL``; a user's benchmark by its own name."""
    known = METRICS.get(metric)
    return known.label.removesuffix(" accuracy") if known is not None else metric


def format_usd(value: Any) -> str:
    """Dollars: ``$1,234``, ``$12.35``, ``$0.0123``."""
    number = _number(value)
    if number is None:
        return NA
    if abs(number) >= 100:
        return f"${number:,.0f}"
    if abs(number) >= 1:
        return f"${number:.2f}"
    return f"${number:.3g}"


def _verdict_of(m: Mapping[str, Any]) -> str:
    return str(_stats(m).get("verdict") or _params(m).get("verdict") or "")


def _interval_suffix(stats: Mapping[str, Any]) -> str:
    confidence = _number(stats.get("confidence"))
    if confidence is None or abs(confidence - 0.95) < 1e-9:
        return ""
    return f" ({100 * confidence:.4g}%)"


@dataclass(frozen=True)
class _Failure:
    test_id: str
    message: str
    model: str | None
    rest: str
    """The test's parameters after the model's, e.g. ``gsm8k`` of ``test_verdict[m-gsm8k]``."""

    @property
    def function(self) -> str:
        """``test_verdict``."""
        return self.test_id.rsplit("::", 1)[-1].split("[", 1)[0]

    @property
    def name(self) -> str:
        """``test_verdict[gsm8k]``: the test's function and its parameters but the model."""
        return f"{self.function}[{self.rest}]" if self.rest else self.function


def _failures(failures: Iterable[Mapping[str, Any]], models: Sequence[str]) -> list[_Failure]:
    """Failed tests with the model each measured: its id's parameters start with the model's
    name (the plugin parametrizes the model first); the longest name that fits wins."""
    found = []
    for f in failures:
        test_id = str(f.get("test_id") or "")
        match = re.search(r"\[(.*)\]$", test_id)
        params = match.group(1) if match else ""
        model = max((m for m in models if params == m or params.startswith(m + "-")),
                    key=len, default=None)
        rest = params[len(model) + 1:] if model is not None else params
        message = str(f.get("message") or f.get("outcome") or "failed")
        found.append(_Failure(test_id, message.removeprefix("Failed: "), model, rest))
    return found


def _mentions(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w:.-]){re.escape(word)}(?![\w.-])", text) is not None


class _Run:
    """The run's measurements, indexed the ways the page asks for them (the last one wins)."""

    def __init__(self, measurements: Sequence[Mapping[str, Any]], reference: str,
                 failures: Sequence[Mapping[str, Any]], run_id: str | None = None) -> None:
        self.reference = reference
        self.run_id = run_id
        self.measurements = list(measurements)
        models = {str(m.get("model", "")) for m in self.measurements} | {reference}
        self.failures = _failures(failures, sorted(models))
        self.any_c16 = any(self.c16(model) is not None for model in models)
        self.any_capacity = any(m.get("benchmark") == CAPACITY for m in self.measurements)

    def earlier_runs(self, model: str, ratio_benchmark: str) -> list[str]:
        """Earlier runs whose measurement of ``model`` this run's comparisons used: a c16
        throughput ratio (``RATIO_BENCHMARK``) or a capacity ratio read from the store."""
        runs = set()
        for m in self.measurements:
            if m.get("benchmark") != ratio_benchmark or (
                    ratio_benchmark == RATIO_BENCHMARK
                    and self.c16_ratio(str(m.get("model", ""))) is not m):
                continue
            stats = _stats(m)
            for side, ran in ((m.get("model"), stats.get("candidate_run")),
                              (stats.get("reference", self.reference), stats.get("reference_run"))):
                if side == model and ran is not None and ran != self.run_id:
                    runs.add(str(ran))
        return sorted(runs) if self.run_id is not None else []

    def latest(self, model: str, benchmark: str, **params: Any) -> Mapping[str, Any] | None:
        found = None
        for m in self.measurements:
            if m.get("model") == model and m.get("benchmark") == benchmark and all(
                    _params(m).get(k) == v for k, v in params.items()):
                found = m
        return found

    def verdict(self, candidate: str, metric: str) -> Mapping[str, Any] | None:
        found = None
        for m in self.measurements:
            if (m.get("benchmark") == VERDICT_PREFIX + metric
                    and str(_stats(m).get("candidate") or m.get("model", "")) == candidate):
                found = m
        return found

    def c16(self, model: str) -> Mapping[str, Any] | None:
        return self.latest(model, "throughput", concurrency=CONCURRENCY, prompt_tokens=None)

    def c16_ratio(self, candidate: str) -> Mapping[str, Any] | None:
        found = None
        for m in self.measurements:
            params = _params(m)
            if (m.get("benchmark") == RATIO_BENCHMARK and m.get("model") == candidate
                    and params.get("benchmark", "throughput") == "throughput"
                    and params.get("concurrency") == CONCURRENCY
                    and params.get("prompt_tokens") is None):
                found = m
        return found

    def failures_of(self, model: str, word: str | None = None) -> list[_Failure]:
        """Failed tests of ``model``; with ``word``, those whose function, parameters or
        message name it."""
        return [f for f in self.failures if f.model == model and (
            word is None or word in f.rest.split("-") or word in f.function.split("_")
            or _mentions(f.message, word))]


# --------------------------------------------------------------------------- cells


def _absent(text: str, why: str) -> Cell:
    return Cell(text, why=why)


def _accuracy_side_why(run: _Run, model: str, role: str, metric: str) -> tuple[str, str] | None:
    """(cell text, why) when one side's own accuracy result stops the verdict; None if sound."""
    m = run.latest(model, metric)
    if m is None:
        return NOT_MEASURED, f"no {metric} result of the {role} {model} in this run"
    failed = _failed_items(m)
    if failed:
        total = len(m.get("items") or [])
        return CANNOT_CONCLUDE, (
            f"{len(failed)} of {total} {metric} items of the {role} {model} failed (first: "
            f"{_one_line(failed[0].get('error'))}); no verdict is drawn from a partial item set")
    if not _passed(m):
        return CANNOT_CONCLUDE, f"the {role} {model}'s {metric} test {m.get('outcome')}"
    return None


def _one_line(text: Any, limit: int = 160) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _too_few_line(stats: Mapping[str, Any], which: str) -> str:
    """Why a recorded paired interval supports no verdict (``PairedInterval.too_few_reason``),
    or "" when it does or the record is too old to say."""
    try:
        interval = PairedInterval.from_dict(stats)
    except (KeyError, TypeError):
        return ""
    reason = interval.too_few_reason()
    return f"{which}: no verdict from its interval: {reason}" if reason else ""


def _verdict_cells(run: _Run, candidate: str, metric: str) -> list[Cell]:
    """[verdict, difference with interval] of a candidate on one accuracy benchmark."""
    m = run.verdict(candidate, metric)
    if m is not None:
        stats = _stats(m)
        verdict = _verdict_of(m) or NA
        difference = stats.get("difference", m.get("value"))
        interval = format_points_interval(stats.get("low"), stats.get("high"))
        if _number(difference) is None or interval == NA:
            why = f"the {metric} verdict of {candidate} records no difference or interval"
            return [Cell(verdict, verdict=verdict), _absent(NA, why)]
        few = _too_few_line(stats, f"{candidate} vs the reference on {metric_label(metric)}")
        # the unit once: "-2.0 pp [-5.0, +1.0]"
        return [Cell(verdict, verdict=verdict), Cell(
            f"{format_points(difference)} {interval.removesuffix(' pp')}{_interval_suffix(stats)}",
            detail=few)]
    for model, role in ((run.reference, "reference"), (candidate, "candidate")):
        side = _accuracy_side_why(run, model, role, metric)
        if side is not None and side[0] == CANNOT_CONCLUDE:
            return [_absent(CANNOT_CONCLUDE, side[1]), _absent(DASH, side[1])]
    failed = run.failures_of(candidate, metric)
    if failed:
        why = f"{failed[0].name} failed: {_one_line(failed[0].message)}"
        return [_absent(CANNOT_CONCLUDE, why), _absent(DASH, why)]
    for model, role in ((run.reference, "reference"), (candidate, "candidate")):
        side = _accuracy_side_why(run, model, role, metric)
        if side is not None:
            return [_absent(side[0], side[1]), _absent(DASH, side[1])]
    why = (f"no verdict:{metric} measurement of {candidate}: its verdict test did not run "
           f"(a declared accuracy benchmark's test_verdict, docs/writing-benchmarks.md)")
    return [_absent(NOT_JUDGED, why), _absent(DASH, why)]


def _reference_accuracy_cells(run: _Run, metric: str) -> list[Cell]:
    """[reference, accuracy with its Wilson interval] of the reference on one benchmark."""
    side = _accuracy_side_why(run, run.reference, "reference", metric)
    if side is not None:
        return [Cell(REFERENCE), _absent(side[0], side[1])]
    m = run.latest(run.reference, metric)
    assert m is not None
    interval = accuracy_interval(m)
    shown = f" ({format_percent_interval(*interval)})" if interval else ""
    return [Cell(REFERENCE), Cell(f"{format_percent(m.get('value'))}{shown}")]


def _throughput_why(run: _Run, model: str, role: str) -> tuple[str, str] | None:
    """Why ``model``'s c16 throughput gives no figure (text, why), or None when it does."""
    m = run.c16(model)
    if m is None:
        earlier = run.earlier_runs(model, RATIO_BENCHMARK)
        if earlier:
            return NOT_MEASURED, (f"the {role} {model}'s c{CONCURRENCY} throughput comes from "
                                  f"earlier run {', '.join(earlier)} (the ratios use it); this "
                                  "report holds this run's measurements only")
        if not run.any_c16:
            return NOT_MEASURED, (f"no throughput measurement at c{CONCURRENCY} in this run "
                                  f"(benches/test_throughput.py -k c{CONCURRENCY})")
        return NOT_MEASURED, (f"no throughput measurement of the {role} {model} at c{CONCURRENCY} "
                              f"(benches/test_throughput.py -k c{CONCURRENCY})")
    if not _passed(m):
        failed = run.failures_of(model, f"c{CONCURRENCY}")
        said = f": {_one_line(failed[0].message)}" if failed else ""
        return CANNOT_CONCLUDE, (f"the {role} {model}'s c{CONCURRENCY} throughput test "
                                 f"{m.get('outcome')}{said}")
    return None


def _ratio_cells(run: _Run, candidate: str) -> list[Cell]:
    """[ratio with interval, verdict] of a candidate's c16 throughput against the reference's."""
    m = run.c16_ratio(candidate)
    if m is not None:
        stats = _stats(m)
        verdict = _verdict_of(m) or NA
        low, high = _number(stats.get("low")), _number(stats.get("high"))
        ratio = format_ratio(m.get("value"))
        if ratio == NA:
            why = f"the c{CONCURRENCY} ratio of {candidate} records no value"
            return [_absent(NA, why), Cell(verdict, verdict=verdict)]
        if low is None or high is None:
            why = (f"{candidate}'s c{CONCURRENCY} ratio has no interval: a side has a single "
                   "repeat (run --repeats 2 or more)")
            return [Cell(f"{ratio} (no interval)", why=why), Cell(verdict, verdict=verdict)]
        return [Cell(f"{ratio} [{low:.2f}, {high:.2f}]{_interval_suffix(stats)}"),
                Cell(verdict, verdict=verdict)]
    for model, role in ((run.reference, "reference"), (candidate, "candidate")):
        side = _throughput_why(run, model, role)
        if side is not None:
            return [_absent(side[0], side[1]), _absent(DASH, side[1])]
    failed = [f for f in run.failures_of(candidate, f"c{CONCURRENCY}")
              if f.name.startswith("test_throughput_ratio")]
    if failed:
        why = f"{failed[0].name} failed: {_one_line(failed[0].message)}"
        return [_absent(CANNOT_CONCLUDE, why), _absent(DASH, why)]
    why = (f"no c{CONCURRENCY} throughput ratio of {candidate}: its ratio test did not run "
           f"(test_throughput_ratio in benches/test_throughput.py)")
    return [_absent(NOT_JUDGED, why), _absent(DASH, why)]


def _reference_throughput_cells(run: _Run) -> list[Cell]:
    side = _throughput_why(run, run.reference, "reference")
    if side is not None:
        return [_absent(side[0], side[1]), Cell(REFERENCE)]
    m = run.c16(run.reference)
    assert m is not None
    return [Cell(f"{format_rate(throughput_row(m).mean)} tokens/s"), Cell(REFERENCE)]


@dataclass(frozen=True)
class _Capacity:
    """A model's capacity: ``value`` (``stats.capacity``) when its search concluded, else
    None with the cell's ``text`` and ``why``."""

    measurement: Mapping[str, Any] | None
    value: int | None
    text: str = ""
    why: str = ""

    @property
    def stats(self) -> Mapping[str, Any]:
        return _stats(self.measurement) if self.measurement is not None else {}

    @property
    def at_maximum(self) -> bool:
        """The search passed at the server's maximum: the capacity is at least that."""
        bracket = self.stats.get("bracket")
        return (self.value is not None and self.value > 0 and isinstance(bracket, list)
                and len(bracket) == 2 and bracket[1] is None)

    @property
    def step(self) -> Mapping[str, Any]:
        """The passing step at the capacity ({} if none)."""
        for step in self.stats.get("steps") or []:
            if isinstance(step, Mapping) and step.get("concurrency") == self.value \
                    and step.get("passed"):
                return step
        return {}

    def shown(self) -> str:
        """``3``; ``≥4`` when the search reached the server's maximum."""
        return f"≥{self.value}" if self.at_maximum else str(self.value)


def _capacity(run: _Run, model: str, role: str) -> _Capacity:
    """The model's capacity under the SLO: ``stats.capacity`` of a passed capacity test (null
    when the search broke off), else why there is none."""
    m = run.latest(model, CAPACITY)
    failed = [f for f in run.failures_of(model) if f.function == "test_capacity"]
    if m is None:
        if failed:
            return _Capacity(None, None, CANNOT_CONCLUDE, f"the {role} {model}'s "
                             f"{failed[0].name} failed: {_one_line(failed[0].message)}")
        earlier = run.earlier_runs(model, CAPACITY_RATIO)
        if earlier:
            return _Capacity(None, None, NOT_MEASURED, (
                f"the {role} {model}'s capacity comes from earlier run {', '.join(earlier)} (the "
                "capacity ratios use it); this report holds this run's measurements only"))
        if not run.any_capacity:
            return _Capacity(None, None, NOT_MEASURED, (
                "no capacity measurement in this run (benches/test_capacity.py; it needs "
                "--slo, e.g. --slo ttft=500ms,tpot=50ms)"))
        return _Capacity(None, None, NOT_MEASURED,
                         f"no capacity measurement of the {role} {model} in this run")
    stats = _stats(m)
    value = stats.get("capacity")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or not _passed(m):
        said = (stats.get("error") or (failed[0].message if failed else "")
                or (f"its test {m.get('outcome')}" if not _passed(m)
                    else "it records no capacity"))
        return _Capacity(m, None, CANNOT_CONCLUDE,
                         f"the {role} {model}'s capacity search did not conclude: "
                         f"{_one_line(said)}")
    return _Capacity(m, value)


def _capacity_cell(capacity: _Capacity, model: str) -> Cell:
    """The capacity with the goodput at it; 0 and the server's maximum say so."""
    if capacity.value is None:
        return _absent(capacity.text, capacity.why)
    stats = capacity.stats
    reason = _one_line(stats.get("reason"))
    if capacity.value == 0:
        return Cell("0 (misses the SLO at concurrency 1)",
                    detail=f"{model}'s capacity is 0: {reason or 'no step met the SLO'}")
    goodput = _number(stats.get("goodput_rps"))
    said = f"goodput {format_goodput(goodput)} req/s" if goodput is not None else ""
    figures = []
    attainment = _number(stats.get("slo_attainment"))
    if attainment is not None:
        step = capacity.step
        counted = f" ({step.get('good')}/{step.get('requests')})" if step else ""
        figures.append(f"{100 * attainment:.0f}% of requests met the SLO{counted}")
    if said:
        figures.append(said)
    if _number(stats.get("output_tokens_per_s")) is not None:
        figures.append(f"{format_rate(stats.get('output_tokens_per_s'))} output tokens/s")
    tip = (f"at c{capacity.value}: {', '.join(figures)}; " if figures else "") + (
        f"search bracket {_bracket_text(stats.get('bracket'))}")
    if capacity.at_maximum:
        text = f"{capacity.shown()} (the server's maximum{'; ' + said if said else ''})"
        return Cell(text, detail=f"{model}: {reason}" if reason else "", tip=tip)
    return Cell(f"{capacity.value} ({said})" if said else str(capacity.value), tip=tip)


def _bracket_text(bracket: Any) -> str:
    if isinstance(bracket, list) and len(bracket) == 2:
        return f"[{bracket[0]}, {'open' if bracket[1] is None else bracket[1]}]"
    return NA


def _capacity_ratio_cells(run: _Run, candidate: str, mine: _Capacity,
                          reference: _Capacity) -> list[Cell]:
    """[ratio with its search bracket, verdict] of a candidate's capacity against the
    reference's, from its ``capacity_ratio`` measurement, else why there is none."""
    ratio = run.latest(candidate, CAPACITY_RATIO)
    if ratio is not None:
        stats = _stats(ratio)
        verdict = _verdict_of(ratio) or NA
        value = format_ratio(ratio.get("value"))
        if value == NA:
            why = f"{candidate}'s capacity ratio records no value"
            return [_absent(CANNOT_CONCLUDE, why), Cell(verdict, verdict=verdict)]
        low, high = _number(stats.get("bracket_low")), stats.get("bracket_high")
        if stats.get("degenerate"):
            return [Cell(f"{value} (no bracket)", detail=(
                f"{candidate}'s capacity ratio has no bracket: both searches passed at their "
                "server's maximum concurrency, so neither capacity is bounded above")),
                Cell(verdict, verdict=verdict)]
        if low is None or (high is not None and _number(high) is None):
            why = f"{candidate}'s capacity ratio records no search bracket"
            return [Cell(value, why=why), Cell(verdict, verdict=verdict)]
        upper = "∞)" if high is None else f"{float(high):.2f}]"
        return [Cell(f"{value} [{low:.2f}, {upper}"), Cell(verdict, verdict=verdict)]
    if mine.value is None:
        return [_absent(DASH, mine.why), _absent(DASH, mine.why)]
    failed = [f for f in run.failures_of(candidate) if f.function == "test_capacity_ratio"]
    if failed:
        why = f"{failed[0].name} failed: {_one_line(failed[0].message)}"
        return [_absent(CANNOT_CONCLUDE, why), _absent(DASH, why)]
    if reference.value is None:
        why = f"no capacity of the reference to compare with: {reference.why}"
        return [_absent(DASH, why), _absent(DASH, why)]
    why = (f"no capacity_ratio measurement of {candidate}: its ratio test did not run "
           "(test_capacity_ratio in benches/test_capacity.py)")
    return [_absent(NOT_JUDGED, why), _absent(DASH, why)]


@dataclass(frozen=True)
class _Cost:
    usd: float | None
    basis: str
    """``capacity`` or ``c16``; "" without a cost."""
    at: str
    """``at c12``, ``at c16``."""
    interval: tuple[float, float] | None
    why: str
    text: str = NOT_MEASURED
    usd_per_hour: float | None = None
    """The price the cost was computed at."""


def _priced(stats: Mapping[str, Any]) -> float | None:
    """The machine's price a measurement was recorded with (None: no price given)."""
    return _number(_mapping(stats.get("pricing")).get("usd_per_hour"))


def _none(why: str, text: str = NOT_MEASURED) -> _Cost:
    return _Cost(None, "", "", None, why, text)


def _cost(run: _Run, model: str, role: str, capacity: _Capacity) -> _Cost:
    """The model's $/1M output tokens at its capacity, else at c16, else why there is none.

    A capacity of 0 has no cost at it (no concurrency meets the SLO); a capacity search that
    did not conclude leaves the c16 cost, when that measurement succeeded.
    """
    if capacity.value is not None and capacity.value > 0:
        stats = capacity.stats
        usd = _number(stats.get("usd_per_million_output_tokens"))
        at = f"at c{capacity.value}"
        if usd is not None:
            return _Cost(usd, "capacity", at, None, "", usd_per_hour=_priced(stats))
        if _priced(stats) is None:
            return _none(NO_PRICE_WHY, NO_PRICE)
        return _none(f"the {role} {model}'s capacity records a price but no $/1M output tokens",
                     CANNOT_CONCLUDE)
    if capacity.value == 0:
        return _none(f"the {role} {model} misses the SLO even at concurrency 1 (capacity 0): "
                     "no cost at its capacity", NA)
    c16 = run.c16(model)
    throughput_why = _throughput_why(run, model, role)
    if c16 is not None and throughput_why is None:
        stats = _stats(c16)
        usd = _number(stats.get("usd_per_million_output_tokens"))
        if usd is not None:
            return _Cost(usd, "c16", f"at c{CONCURRENCY}", _pair(stats.get(
                "usd_per_million_output_tokens_interval")), "", usd_per_hour=_priced(stats))
        if _priced(stats) is None:
            return _none(NO_PRICE_WHY, NO_PRICE)
        return _none(f"the {role} {model}'s c{CONCURRENCY} throughput records a price but no "
                     "$/1M output tokens", CANNOT_CONCLUDE)
    if capacity.text == CANNOT_CONCLUDE:
        return _none(capacity.why, CANNOT_CONCLUDE)
    if throughput_why is not None and throughput_why[0] == CANNOT_CONCLUDE:
        return _none(throughput_why[1], CANNOT_CONCLUDE)
    if not run.any_capacity and not run.any_c16:
        return _none(f"no capacity or c{CONCURRENCY} throughput measurement in this run to "
                     "price")
    return _none(f"no capacity or c{CONCURRENCY} throughput measurement of the {role} {model} "
                 "to price")


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        low, high = _number(value[0]), _number(value[1])
        if low is not None and high is not None:
            return low, high
    return None


def _cost_cell(cost: _Cost) -> Cell:
    if cost.usd is None:
        return _absent(cost.text, cost.why)
    interval = (f" [{format_usd(cost.interval[0])}, {format_usd(cost.interval[1])}]"
                if cost.interval else "")
    return Cell(f"{format_usd(cost.usd)}{interval} {cost.at}")


def _relative_cost(candidate: _Cost, reference: _Cost, name: str) -> tuple[float | None, str]:
    """(candidate ÷ reference cost, why not): only both at their capacity or both at c16,
    priced at the same rate."""
    if candidate.usd is None:
        return None, candidate.why
    if reference.usd is None:
        return None, f"the reference has no cost: {reference.why}"
    if candidate.basis != reference.basis:
        return None, (f"{name} is priced {candidate.at} and the reference {reference.at}: "
                      "not the same basis, so no ratio")
    if candidate.usd_per_hour is None or reference.usd_per_hour is None:
        return None, f"{name}'s or the reference's cost records no price per hour: no ratio"
    if candidate.usd_per_hour != reference.usd_per_hour:
        return None, (f"{name} and the reference are priced at different rates "
                      f"({format_usd(candidate.usd_per_hour)}/h and "
                      f"{format_usd(reference.usd_per_hour)}/h): no ratio")
    return candidate.usd / reference.usd, ""


def _relative_cost_cell(run: _Run, candidate: str, cost: _Cost,
                        relative: tuple[float | None, str]) -> Cell:
    """Candidate ÷ reference cost with its interval: at c16 (one price) it is the inverse of
    the c16 throughput ratio, so its interval is that ratio's, inverted; at the capacities
    each cost comes from one search window, so there is none, and the cell says so."""
    value = relative[0]
    if value is None:
        return _absent(DASH if cost.usd is None else CANNOT_CONCLUDE, relative[1])
    if cost.basis == "c16":
        ratio = run.c16_ratio(candidate)
        stats = _stats(ratio) if ratio is not None else {}
        low, high = _number(stats.get("low")), _number(stats.get("high"))
        if low is not None and high is not None and low > 0:
            return Cell(f"{format_ratio(value)} [{1 / high:.2f}, {1 / low:.2f}]")
        why = (f"{candidate}'s cost vs the reference has no interval: its c{CONCURRENCY} "
               "throughput ratio has none (a side has a single repeat: run --repeats 2 or more)")
    else:
        why = (f"{candidate}'s cost vs the reference has no interval: each cost at its "
               "capacity comes from one search window")
    return Cell(f"{format_ratio(value)} (no interval)", why=why)


def _screen_cells(run: _Run, model: str) -> list[Cell]:
    m = run.latest(model, SCREEN)
    if m is None:
        failed = run.failures_of(model, SCREEN)
        why = (f"{model}'s {failed[0].name} failed: {_one_line(failed[0].message)}" if failed
               else f"no screening of {model} (pytest benches -m screen; Hugging Face sources "
                    "only)")
        return [_absent(NOT_SCREENED, why), _absent(DASH, why)]
    stats = _stats(m)
    licence = str(stats.get("license") or "unknown")
    headroom = _number(stats.get("kv_headroom_gib", m.get("value")))
    if headroom is None:
        return [Cell(licence), _absent(NA, f"the screening of {model} found no weight size")]
    verdict = "" if stats.get("accepted", True) else " (rejected)"
    return [Cell(licence), Cell(f"{headroom:.1f} GiB KV{verdict}")]


# --------------------------------------------------------------------------- flags


def _is_comparison(m: Mapping[str, Any]) -> bool:
    metric = metric_for(str(m.get("benchmark", "")), m.get("unit"))
    return metric is not None and metric.kind is Kind.COMPARISON or m.get("benchmark") in (
        CAPACITY_RATIO,)


def _setting(m: Mapping[str, Any]) -> str:
    params = _params(m)
    prompt = params.get("prompt_tokens")
    concurrency = params.get("concurrency")
    return f"c{concurrency}" if prompt is None else f"p{prompt}-c{concurrency}"


def _reference_side_flags(run: _Run, candidate: str) -> list[str]:
    """The reference's doubts carried into a candidate's comparisons, e.g. ``reference
    unstable (CV 53%) (c16)``: a stored reference measurement is not in this run's rows."""
    carried: dict[str, list[str]] = {}
    for m, where in ((run.c16_ratio(candidate), f"c{CONCURRENCY}"),
                     (run.latest(candidate, CAPACITY_RATIO), "capacity")):
        if m is None:
            continue
        for flag in _stats(m).get("reference_flags") or []:
            carried.setdefault(str(flag), []).append(where)
    return [f"reference {flag} ({', '.join(where)})" for flag, where in carried.items()]


def _flags(run: _Run, model: str, cells: Sequence[Cell], columns: Sequence[Column]) -> list[str]:
    flags = []
    throughput = [m for m in run.measurements if m.get("model") == model
                  and measurement_kind(m) == "throughput"]
    for word in ("unstable", "contended"):
        settings = [_setting(m) for m in throughput if getattr(throughput_row(m), word)]
        if word == "contended":
            capacity = run.latest(model, CAPACITY)
            if capacity is not None and _stats(capacity).get("contended"):
                settings.append("capacity search")
        if settings:
            flags.append(f"{word} ({', '.join(settings)})")
    flags += _reference_side_flags(run, model)
    failed_items = []
    for m in run.measurements:
        if m.get("model") == model and measurement_kind(m) == "accuracy":
            failed = _failed_items(m)
            if failed:
                failed_items.append(f"{m.get('benchmark')} {len(failed)} of "
                                    f"{len(m.get('items') or [])}")
    if failed_items:
        flags.append(f"failed items ({', '.join(failed_items)})")
    # a comparison's test that failed on its own verdict (--fail-on) shows as that verdict
    judged = {str(m.get("test_id")) for m in run.measurements
              if m.get("model") == model and _is_comparison(m)}
    failed_tests = sorted({f.name for f in run.failures_of(model) if f.test_id not in judged})
    if failed_tests:
        flags.append(f"failed tests ({', '.join(failed_tests)})")
    stopped = sorted({c.group for c, cell in zip(columns, cells)
                      if cell.why and cell.text == CANNOT_CONCLUDE})
    if stopped:
        flags.append(f"cannot conclude ({', '.join(stopped)})")
    return flags


# --------------------------------------------------------------------------- answer and Pareto


@dataclass(frozen=True)
class _Standing:
    """A candidate's accuracy verdicts in short: holds all, worse somewhere, or undecided."""

    holds: bool
    said: str
    """``worse on GSM8K``, ``cannot conclude on BFCL``, ``inconclusive on arith``."""


def _standing(row: DecisionRow, columns: Sequence[Column], metrics: Sequence[str]) -> _Standing:
    """From a candidate's numbered verdict cells: a verdict word, or why there is none."""
    problems = []
    for metric in metrics:
        label = metric_label(metric)
        index = next(i for i, c in enumerate(columns) if c.title == f"{label} verdict")
        cell = row.cells[index]
        if cell.why:
            problems.append(f"{cell.text} on {label} [{cell.note}]")
        elif cell.verdict not in HOLDS:
            problems.append(f"{cell.verdict} on {label}")
    return _Standing(not problems, ", ".join(problems))


def _names(models: Sequence[str]) -> str:
    if len(models) <= 1:
        return "".join(models)
    return ", ".join(models[:-1]) + " and " + models[-1]


NOTHING_TO_CHOOSE = f"no capacity, cost or c{CONCURRENCY} throughput ratio to choose among them"


def _picks(run: _Run, pool: Sequence[str], capacities: Mapping[str, _Capacity],
           costs: Mapping[str, _Cost], relative_costs: Mapping[str, tuple[float | None, str]],
           ) -> list[str]:
    """Among ``pool``: the highest capacity and the cheapest (from concluded cells only);
    without either, the highest c16 throughput ratio."""
    picks = []
    measured = {c: capacities[c] for c in pool if capacities[c].value is not None}
    if measured:
        best = max(cap.value or 0 for cap in measured.values())
        top = [c for c, cap in measured.items() if cap.value == best]
        if best == 0:
            picks.append(f"none of {_names(top)} meets the SLO even at concurrency 1")
        else:
            shown = (f"≥{best}" if all(measured[c].at_maximum for c in top) else str(best))
            picks.append(f"highest capacity under the SLO: {_names(top)} ({shown} concurrent "
                         "requests)")
    priced = {c: costs[c] for c in pool if costs[c].usd is not None}
    # each at its own capacity, else each at c16: one basis, one price
    basis = "capacity" if any(cost.basis == "capacity" for cost in priced.values()) else "c16"
    comparable = {c: cost for c, cost in priced.items() if cost.basis == basis}
    if len({cost.usd_per_hour for cost in comparable.values()}) > 1:
        comparable = {}
    if comparable:
        cheapest = min(cost.usd or 0.0 for cost in comparable.values())
        top = [c for c, cost in comparable.items() if cost.usd == cheapest]
        relative = relative_costs.get(top[0], (None, ""))[0]
        versus = f", {format_ratio(relative)} the reference's" if relative is not None else ""
        picks.append(f"cheapest: {_names(top)} ({format_usd(cheapest)}/1M output tokens "
                     f"{comparable[top[0]].at}{versus})")
    if comparable:
        elsewhere = [c for c in pool if c in priced and c not in comparable]
        unpriced = [c for c in pool if c not in priced]
        if elsewhere:
            picks.append(f"no comparable cost for {_names(elsewhere)} (priced "
                         f"{priced[elsewhere[0]].at}, not at its capacity)")
        if unpriced:
            picks.append(f"no cost for {_names(unpriced)}")
    if not picks:
        ratios = {}
        for c in pool:
            m = run.c16_ratio(c)
            value = _number(m.get("value")) if m is not None else None
            if value is not None:
                ratios[c] = (value, _verdict_of(m) if m is not None else "")
        if ratios:
            best_ratio = max(v for v, _ in ratios.values())
            top = [c for c, (v, _) in ratios.items() if v == best_ratio]
            picks.append(f"no capacity or cost measured; highest c{CONCURRENCY} throughput "
                         f"ratio: {_names(top)} ({format_ratio(best_ratio)} the reference, "
                         f"{ratios[top[0]][1]})")
        else:
            picks.append(NOTHING_TO_CHOOSE)
    return picks


def _answer(run: _Run, candidates: Sequence[str], metrics: Sequence[str],
            standings: Mapping[str, _Standing], capacities: Mapping[str, _Capacity],
            costs: Mapping[str, _Cost],
            relative_costs: Mapping[str, tuple[float | None, str]]) -> str:
    reference = run.reference
    if not metrics:
        line = (f"No answer: this run has no accuracy verdict against {reference}, so no "
                "candidate is shown to match it (run an accuracy benchmark: -m gsm8k, -m bfcl "
                "or your own)")
        picks = _picks(run, candidates, capacities, costs, relative_costs)
        if picks != [NOTHING_TO_CHOOSE]:
            line += ". Not judged on accuracy: " + "; ".join(picks)
        return line + "."
    labels = ", ".join(metric_label(m) for m in metrics)
    holding = [c for c in candidates if standings[c].holds]
    if not holding:
        said = "; ".join(f"{c} {standings[c].said}" for c in candidates)
        return f"No answer: no candidate matches {reference} on every accuracy verdict ({labels}): {said}."
    verb = "matches" if len(holding) == 1 else "match"
    parts = [f"{_names(holding)} {verb} {reference} on every accuracy verdict ({labels})"]
    rest = [c for c in candidates if c not in holding]
    if rest:
        parts.append("not " + "; not ".join(f"{c} ({standings[c].said})" for c in rest))
    return "; ".join(parts + _picks(run, holding, capacities, costs, relative_costs)) + "."


def pareto_front(points: Sequence[tuple[float, float]], x_higher_is_better: bool = True) -> list[bool]:
    """Whether each point is on the Pareto front: no other point is at least as good on both
    axes and better on one (y: higher is better; x as ``x_higher_is_better`` says)."""
    sign = 1.0 if x_higher_is_better else -1.0

    def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return (sign * a[0] >= sign * b[0] and a[1] >= b[1]
                and (sign * a[0] > sign * b[0] or a[1] > b[1]))

    return [not any(dominates(other, point) for other in points if other is not point)
            for point in points]


def _pareto(run: _Run, candidates: Sequence[str], metrics: Sequence[str],
            standings: Mapping[str, _Standing],
            relative_costs: Mapping[str, tuple[float | None, str]],
            reference_cost: _Cost) -> tuple[Pareto | None, str]:
    judged = [m for m in metrics if any(run.verdict(c, m) is not None for c in candidates)]
    if not judged:
        return None, "no accuracy verdict to plot against"
    metric = judged[0]
    ratios = {c: run.c16_ratio(c) for c in candidates}
    use_ratio = any(m is not None and _number(m.get("value")) is not None for m in ratios.values())
    if not use_ratio and not any(v is not None for v, _ in relative_costs.values()):
        return None, (f"neither a c{CONCURRENCY} throughput ratio nor a relative cost to plot "
                      "against")
    raw: list[tuple[str, float, float, float | None, float | None, float | None, float | None]] = []
    left_out = []
    for c in candidates:
        verdict = run.verdict(c, metric)
        y = _number(_stats(verdict).get("difference", verdict.get("value"))) if verdict else None
        if y is None:
            left_out.append(f"{c}: no {metric_label(metric)} verdict")
            continue
        y_low, y_high = (_number(_stats(verdict).get("low")), _number(_stats(verdict).get("high"))
                         ) if verdict else (None, None)
        if use_ratio:
            m = ratios[c]
            x = _number(m.get("value")) if m is not None else None
            if x is None or m is None:
                left_out.append(f"{c}: no c{CONCURRENCY} throughput ratio")
                continue
            x_low, x_high = _number(_stats(m).get("low")), _number(_stats(m).get("high"))
        else:
            x, why = relative_costs[c]
            if x is None:
                left_out.append(f"{c}: {why}")
                continue
            x_low = x_high = None
        raw.append((c, x, y, x_low, x_high, y_low, y_high))
    coordinates = [(1.0, 0.0)] + [(x, y) for _, x, y, *_ in raw]
    front = pareto_front(coordinates, x_higher_is_better=use_ratio)
    points = [ParetoPoint(run.reference, 1.0, 0.0, None, None, None, None, True, front[0], True)]
    points += [ParetoPoint(c, x, y, x_low, x_high, y_low, y_high, standings[c].holds, on)
               for (c, x, y, x_low, x_high, y_low, y_high), on in zip(raw, front[1:])]
    at = ("each at its capacity under the SLO" if reference_cost.basis == "capacity"
          else f"at c{CONCURRENCY}")
    x_label = (f"throughput at c{CONCURRENCY} ÷ the reference's (95% interval)" if use_ratio
               else f"$/1M output tokens ÷ the reference's, {at} (lower is cheaper)")
    y_label = f"{metric_label(metric)} accuracy − the reference's (pp, 95% interval)"
    x_name = f"c{CONCURRENCY} throughput ratio" if use_ratio else "relative cost"
    return Pareto(x_label, y_label, x_name, f"{metric_label(metric)} difference", use_ratio,
                  tuple(points), tuple(left_out)), ""


def pareto_line(page: DecisionPage) -> str:
    """One line naming the Pareto front, or why there is no plot (both reports show it)."""
    if page.pareto is None:
        return f"No Pareto plot: {page.pareto_why}."
    line = f"Pareto front ({page.pareto.y_name} against {page.pareto.x_name}): "
    line += ", ".join(page.pareto.front)
    if page.pareto.left_out:
        line += "; not plotted: " + "; ".join(page.pareto.left_out)
    return line + "."



# --------------------------------------------------------------------------- building


def reference_of(measurements: Iterable[Mapping[str, Any]], run: Mapping[str, Any]) -> str | None:
    """The run's reference: as the run says, else as its comparisons say."""
    if run.get("reference"):
        return str(run["reference"])
    for m in measurements:
        metric = metric_for(str(m.get("benchmark", "")), m.get("unit"))
        if metric is not None and metric.kind is Kind.COMPARISON:
            named = _stats(m).get("reference") or _params(m).get("reference")
            if named:
                return str(named)
    return None


def _accuracy_metrics(run: _Run, candidates: Sequence[str]) -> list[str]:
    """Benchmarks with a verdict, and accuracy benchmarks both the reference and a candidate
    measured (their verdict cells then say why there is none), in report order."""
    found = set()
    for m in run.measurements:
        benchmark = str(m.get("benchmark", ""))
        if benchmark.startswith(VERDICT_PREFIX):
            found.add(str(_stats(m).get("metric") or benchmark[len(VERDICT_PREFIX):]))
    measured: dict[str, set[str]] = {}
    for m in run.measurements:
        if measurement_kind(m) == "accuracy":
            measured.setdefault(str(m.get("benchmark", "")), set()).add(str(m.get("model", "")))
    for benchmark, models in measured.items():
        if run.reference in models and models & set(candidates):
            found.add(benchmark)
    return sorted(found, key=lambda name: (rank(name), name))


def _columns(metrics: Sequence[str], screened: bool) -> list[Column]:
    columns = []
    for metric in metrics:
        group = f"{metric_label(metric)} vs reference"
        label = metric_label(metric)
        columns += [Column(group, "verdict", f"{label} verdict", verdict=True),
                    Column(group, "difference [95% interval]",
                           f"{label} difference [95% interval]")]
    group = f"throughput at c{CONCURRENCY}"
    columns += [Column(group, "ratio [95% interval]", f"c{CONCURRENCY} ratio [95% interval]"),
                Column(group, "verdict", f"c{CONCURRENCY} verdict", verdict=True)]
    group = "capacity under the SLO"
    columns += [Column(group, "concurrency", "capacity"),
                Column(group, "vs reference [search bracket]",
                       "capacity vs reference [search bracket]"),
                Column(group, "verdict", "capacity verdict", verdict=True)]
    group = "cost"
    columns += [Column(group, "$/1M output tokens", "$/1M output tokens"),
                Column(group, "vs reference", "cost vs reference")]
    if screened:
        group = "screening"
        columns += [Column(group, "licence", "licence", text=True),
                    Column(group, "memory headroom", "memory headroom")]
    return columns


def _notes(run: _Run, metrics: Sequence[str], groups: Collection[str]) -> list[str]:
    """What the shown ``groups`` of columns mean, the SLO, the price and where it came from."""
    notes = []
    if metrics:
        notes.append("difference: candidate − reference accuracy in percentage points, paired "
                     "item by item (bootstrap interval); the reference row shows its own "
                     "accuracy (Wilson 95% interval)")
    if f"throughput at c{CONCURRENCY}" in groups:
        notes.append(f"ratio: candidate ÷ reference output tokens/s at {CONCURRENCY} concurrent "
                     "requests, short prompts (Welch t interval over the repeats)")
    if "capacity under the SLO" in groups:
        slos = set()
        for m in run.measurements:
            if m.get("benchmark") in (CAPACITY, CAPACITY_RATIO):
                slo = _params(m).get("slo")
                if isinstance(slo, Mapping):
                    try:
                        slos.add(str(Slo.from_dict(slo)))
                    except (TypeError, ValueError, KeyError):
                        slos.add(str(dict(slo)))
        targets = sorted({float(t) for m in run.measurements if m.get("benchmark") == CAPACITY
                          if (t := _number(_params(m).get("attainment_target"))) is not None})
        share = " or ".join(f"{100 * t:g}%" for t in targets) or "enough"
        notes.append(f"SLO: {'; '.join(sorted(slos)) or 'not recorded'}; capacity: the most "
                     f"concurrent requests (up to the server's maximum) at which {share} of "
                     "requests meet it, with the goodput there (requests per second that met "
                     "it)")
        if any(m.get("benchmark") == CAPACITY_RATIO for m in run.measurements):
            notes.append("capacity vs reference: candidate ÷ reference capacity with the "
                         "bracket the two searches allow (last pass ÷ first miss, and first miss "
                         "÷ last pass): a search bracket, not a confidence interval")
    if "cost" in groups:
        prices = set()
        for m in run.measurements:
            pricing = _stats(m).get("pricing")
            if isinstance(pricing, Mapping) and _number(pricing.get("usd_per_hour")) is not None:
                prices.add(Pricing(float(pricing["usd_per_hour"]),
                                   str(pricing.get("source") or ""),
                                   str(pricing.get("as_of") or ""),
                                   bool(pricing.get("example"))).describe())
        notes.append("cost: the machine's price ÷ output tokens/s, at the model's capacity under "
                     f"the SLO, else at c{CONCURRENCY}; price "
                     + ("; ".join(sorted(prices)) if prices else "not given"))
    return notes


def decision_page(
    measurements: Sequence[Mapping[str, Any]], run: Mapping[str, Any],
    failures: Sequence[Mapping[str, Any]] = (),
) -> DecisionPage | None:
    """The decision page of a run; None without a reference or without a candidate measured.

    ``failures`` are the run's failed tests (``{"test_id", "message", ...}``, as the
    results file's ``summary.failures`` lists them): a cell whose test failed says so.
    """
    reference = reference_of(measurements, run)
    if reference is None:
        return None
    data = _Run(measurements, reference, failures, run.get("run_id"))
    candidates = sorted({str(m.get("model", "")) for m in measurements} - {reference, ""})
    if not candidates:
        return None
    metrics = _accuracy_metrics(data, candidates)
    screened = any(m.get("benchmark") == SCREEN for m in measurements)
    columns = _columns(metrics, screened)

    reference_capacity = _capacity(data, reference, "reference")
    reference_cost = _cost(data, reference, "reference", reference_capacity)
    cells: list[Cell] = []
    for metric in metrics:
        cells += _reference_accuracy_cells(data, metric)
    cells += _reference_throughput_cells(data)
    cells += [_capacity_cell(reference_capacity, reference), Cell(REFERENCE), Cell(REFERENCE)]
    cells += [_cost_cell(reference_cost), Cell(REFERENCE)]
    if screened:
        cells += _screen_cells(data, reference)
    rows = [DecisionRow(reference, True, cells)]

    capacities: dict[str, _Capacity] = {}
    costs: dict[str, _Cost] = {}
    relative_costs: dict[str, tuple[float | None, str]] = {}
    for candidate in candidates:
        cells = []
        for metric in metrics:
            cells += _verdict_cells(data, candidate, metric)
        cells += _ratio_cells(data, candidate)
        capacity = capacities[candidate] = _capacity(data, candidate, "candidate")
        cells += [_capacity_cell(capacity, candidate),
                  *_capacity_ratio_cells(data, candidate, capacity, reference_capacity)]
        cost = costs[candidate] = _cost(data, candidate, "candidate", capacity)
        relative = relative_costs[candidate] = _relative_cost(cost, reference_cost, candidate)
        cells += [_cost_cell(cost), _relative_cost_cell(data, candidate, cost, relative)]
        if screened:
            cells += _screen_cells(data, candidate)
        rows.append(DecisionRow(candidate, False, cells))

    reasons: list[str] = []
    for row in rows:
        numbered = []
        for cell in row.cells:
            if cell.line and cell.line not in reasons:
                reasons.append(cell.line)
            numbered.append(replace(cell, note=reasons.index(cell.line) + 1)
                            if cell.line else cell)
        row.cells = numbered
        row.flags = _flags(data, row.model, row.cells, columns)

    standings = {row.model: _standing(row, columns, metrics) for row in rows[1:]}
    pareto, pareto_why = _pareto(data, candidates, metrics, standings, relative_costs,
                                 reference_cost)
    columns, unmeasured = _without_unmeasured_groups(columns, rows)
    return DecisionPage(
        reference=reference,
        answer=_answer(data, candidates, metrics, standings, capacities, costs,
                       relative_costs),
        metrics=metrics, columns=columns, rows=rows, reasons=reasons,
        notes=_notes(data, metrics, {c.group for c in columns}),
        pareto=pareto, pareto_why=pareto_why,
        unmeasured=unmeasured,
        unplaced=[f"{f.test_id}: {_one_line(f.message, 100)}" for f in data.failures
                  if f.model is None],
    )


def _without_unmeasured_groups(
    columns: list[Column], rows: list[DecisionRow],
) -> tuple[list[Column], list[tuple[str, list[int]]]]:
    """The columns of groups some model has a figure in (or a cell that cannot conclude);
    the rest leave the table (their cells taken out of ``rows``), each with its notes."""
    groups = list(dict.fromkeys(c.group for c in columns))
    dropped: list[tuple[str, list[int]]] = []
    keep: list[int] = []
    for group in groups:
        indices = [i for i, c in enumerate(columns) if c.group == group]
        cells = [row.cells[i] for row in rows for i in indices]
        empty = all(c.why or c.text == REFERENCE for c in cells) and not any(
            c.text == CANNOT_CONCLUDE for c in cells)
        if empty:
            dropped.append((group, sorted({c.note for c in cells if c.note is not None})))
        else:
            keep += indices
    for row in rows:
        row.cells = [row.cells[i] for i in keep]
    return [columns[i] for i in keep], dropped


def unplaced_line(page: DecisionPage) -> str:
    """The failed tests of models without a row, in one line ("" if none)."""
    if not page.unplaced:
        return ""
    count = len(page.unplaced)
    return (f"Not in the table: {count} failed test{'s' if count != 1 else ''} of models that "
            f"recorded nothing: " + "; ".join(page.unplaced[:3])
            + (f"; and {count - 3} more" if count > 3 else "") + ".")


def unmeasured_line(page: DecisionPage) -> str:
    """``Not measured for any model: capacity under the SLO [1]; cost [2].`` ("" if none)."""
    if not page.unmeasured:
        return ""
    return "Not measured for any model: " + "; ".join(
        f"{group} {' '.join(f'[{n}]' for n in notes)}".strip() for group, notes in page.unmeasured
    ) + "."


__all__ = [
    "CANNOT_CONCLUDE",
    "CONCURRENCY",
    "NOT_JUDGED",
    "NOT_MEASURED",
    "NOT_SCREENED",
    "Cell",
    "Column",
    "DecisionPage",
    "DecisionRow",
    "Pareto",
    "ParetoPoint",
    "decision_page",
    "format_usd",
    "metric_label",
    "pareto_front",
    "pareto_line",
    "reference_of",
    "unmeasured_line",
    "unplaced_line",
]
