"""Plain-data summary tables of a run's measurements, shared by the Markdown and HTML reports.

Every cell is formatted here (text) or a count, each figure by its one formatter, from the
typed records (:func:`records`, :class:`Setting`); nothing here escapes anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any, TypeVar

from ..core.measurements import (
    CONCURRENCY,
    DEGENERATE,
    RATE,
    SATURATED,
    SEARCH_BENCHMARK,
    SERVER_QUEUED,
    AccuracyStats,
    AccuracyVerdictStats,
    Latency,
    Measurement,
    SearchRatioStats,
    SearchStats,
    StartupStats,
    ThroughputRatioStats,
    ThroughputStats,
)
from ..core.metrics import METRICS, label_of, rank
from ..core.records import RequestRecord
from ..core.stats.intervals import wilson_interval
from ..store.results import RunInfo
from ..workloads.throughput import itls, latency_ms, tpot

Cell = str | int  # formatted text, or a count
TEXT_COLUMNS = frozenset(
    {
        "model",
        "candidate",
        "reference",
        "metric",
        "verdict",
        "subset",
        "error types",
        "benchmark",
        "parameters",
        "outcome",
        "flags",
        "stopped",
        "cache",
        "backend",
        "errors",
        "design",
    }
)
"""Columns of words, not figures (aligned left)."""

NA = "n/a"
COMPARISONS = (AccuracyVerdictStats, ThroughputRatioStats, SearchRatioStats)
Measurements = Sequence[Measurement]
StatsT = TypeVar("StatsT")


def records(measurements: Iterable[Measurement | Mapping[str, Any]]) -> list[Measurement]:
    """Measurements given as records or dicts, as records (every report reads these)."""
    return [m if isinstance(m, Measurement) else Measurement.from_dict(m) for m in measurements]


def stats_of(m: Measurement, kind: type[StatsT]) -> StatsT:
    """``m``'s stats as a ``kind`` record (an empty one for a measurement of another kind)."""
    return m.stats if isinstance(m.stats, kind) else kind()


@dataclass
class Table:
    """One summary table; ``status_column``: the verdict words' column."""

    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    kind: str = "other"
    notes: list[str] = field(default_factory=list)
    status_column: int | None = None


# --------------------------------------------------------------------------- formatting
def finite(value: Any) -> float | None:
    """A finite float, or None for None, NaN, infinities and non-numbers."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if number and math.isfinite(value) else None


def _rounded(value: float, digits: int) -> float:
    """Rounded; a tiny negative prints as 0.0, not -0.0."""
    return round(value, digits) + 0.0


def _format(form: Callable[..., str], doc: str) -> Callable[..., str]:
    """A formatter: ``form`` of the finite numbers it is given, ``n/a`` when one is not."""

    def formatted(*values: Any) -> str:
        numbers = [finite(v) for v in values]
        return NA if None in numbers else form(*numbers)

    formatted.__doc__ = doc
    return formatted


def _value(x: float) -> str:
    if x != 0 and (abs(x) < 0.001 or abs(x) >= 1e7):
        return f"{x:.3g}"
    return f"{_rounded(x, 3):.3f}" if abs(x) < 1 else f"{_rounded(x, 1):,.1f}"


# One formatter per figure (each takes the figure, or an interval's two bounds).
format_percent = _format(lambda x: f"{_rounded(100 * x, 1):.1f}%", "0.4123 -> ``41.2%``")
format_points = _format(lambda x: f"{_rounded(100 * x, 1):+.1f} pp", "0.02 -> ``+2.0 pp``")
format_points_interval = _format(
    lambda lo, hi: f"[{_rounded(100 * lo, 1):+.1f}, {_rounded(100 * hi, 1):+.1f}] pp",
    "An interval of differences in percentage points: ``[-1.0, +5.0] pp``.",
)
format_percent_interval = _format(
    lambda lo, hi: f"{_rounded(100 * lo, 1):.1f}–{_rounded(100 * hi, 1):.1f}%",
    "An interval of proportions in percent: ``37.0–45.5%``.",
)
format_rate = format_ms = _format(
    lambda x: f"{_rounded(x, 1):,.1f}", "Tokens/s or milliseconds: one decimal, ``1,234.5``."
)
format_ratio = _format(lambda x: f"{_rounded(x, 2):.2f}×", "A ratio: ``0.85×``.")
format_goodput = _format(
    lambda x: f"{_rounded(x, 2):,.2f}" if abs(x) >= 1 else f"{x:#.3g}",
    "Requests/s: ``1.78``, three significant digits below 1: ``0.0781``.",
)
format_ratio_interval = _format(
    lambda lo, hi: f"[{_rounded(lo, 2):.2f}, {_rounded(hi, 2):.2f}]",
    "A ratio's interval: ``[0.81, 0.93]``.",
)
format_value = _format(
    _value, "A value of unknown kind: three significant decimals below 1, one above."
)
format_rps = _format(
    lambda x: f"{x:.3g}" if abs(x) < 10 else f"{_rounded(x, 1):,.1f}",
    "A request rate: ``1.41``, three significant digits below 10: ``0.707``.",
)
format_count = _format(lambda x: f"{x:.0f}", "A count of requests in flight: ``4``.")


def format_usd(value: Any, sign: str = "") -> str:
    """Dollars: ``1,234``, ``1.39``, ``0.278``, ``0.0000831`` (no exponent); ``sign``: ``$``."""
    x = finite(value)
    if x is None:
        return NA
    if abs(x) >= 100:
        return f"{sign}{_rounded(x, 0):,.0f}"
    if abs(x) >= 1 or x == 0:
        return f"{sign}{_rounded(x, 2):.2f}"
    three = float(f"{x:.3g}")  # rounded first: 0.0009996 is 0.00100, not 0.001000
    return f"{sign}{three:.{2 - math.floor(math.log10(abs(three)))}f}"


def _count(value: int | None) -> Cell:
    return NA if value is None else value


def whole(value: Any) -> int | None:
    """An int that is not a bool, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def accuracy_interval(m: Measurement) -> tuple[float, float] | None:
    """The Wilson 95% interval of an accuracy measurement, or None without a usable n."""
    accuracy = finite(m.value)
    return None if accuracy is None or m.n <= 0 else wilson_interval(round(accuracy * m.n), m.n)


# --------------------------------------------------------------------------- the run
def run_title(run: RunInfo) -> str:
    """``modelsweep: sweep embedded, reference gemma3-270m, commit 0123456789``."""
    commit = run.commit and run.commit[:10] + (" (dirty)" if run.dirty else "")
    parts = [
        f"{word} {value}"
        for word, value in (
            ("sweep", run.sweep_name),
            ("reference", run.reference),
            ("commit", commit),
        )
        if value
    ]
    return "modelsweep: " + ", ".join(parts) if parts else "modelsweep"


def _short_digest(digest: str) -> str:
    algorithm, _, value = digest.rpartition(":")
    return f"{algorithm or 'sha256'}:{value[:12]}" if value else digest


def serving_facts_text(provenance: dict[str, Any]) -> str:
    """A provenance's image and serving flags as the report shows them: the image digest
    Docker ran (pinned by the sweep, or observed from a tag), each flag observed from the
    server or only declared by the sweep."""
    digest, pinned = provenance.get("image_digest"), provenance.get("image_pinned")
    how = "" if pinned is None else " (pinned)" if pinned else " (observed; the sweep names a tag)"
    settings = provenance.get("server_settings") or {}
    sources = provenance.get("flag_sources") or {}
    flags = {
        source: [f"{flag} {settings.get(flag)}" for flag, said in sources.items() if said == source]
        for source in ("observed", "declared")
    }
    return ", ".join(
        [
            *([f"image {_short_digest(str(digest))}{how}"] if digest else []),
            *(f"{source}: {', '.join(found)}" for source, found in flags.items() if found),
        ]
    )


def provenance_line(measurements: Measurements, run: RunInfo) -> str:
    """Each distinct server and version with its image and serving facts
    (:func:`serving_facts_text`), else the backend; run id; count."""
    servers = list(
        dict.fromkeys(
            str(name)
            + (f" {version}" if version and version != "unknown" else "")
            + (f", {facts}" if facts else "")
            for m in measurements
            if (name := m.provenance.get("server_name"))
            for version, facts in [
                (m.provenance.get("server_version"), serving_facts_text(m.provenance))
            ]
        )
    )
    return " · ".join(
        [
            *(
                servers
                or (
                    [run.backend + (f", image {_short_digest(run.image)}" if run.image else "")]
                    if run.backend
                    else []
                )
            ),
            *([f"run {run.run_id}"] if run.run_id else []),
            f"{len(measurements)} measurement{'s' if len(measurements) != 1 else ''}",
        ]
    )


# --------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class Setting:
    """The parameters of a measurement the reports read (``prompt_tokens`` None: short)."""

    concurrency: Any
    prompt_tokens: Any
    output_tokens: int | None
    user_prompts: int | None
    benchmark: Any
    limit: Any
    subset: Any
    slo: Any
    attainment_target: float | None

    @classmethod
    def of(cls, m: Measurement) -> Setting:
        return cls(
            m.params.get("concurrency"),
            m.params.get("prompt_tokens"),
            whole(m.params.get("output_tokens")),
            whole(m.params.get("user_prompts")),
            m.params.get("benchmark", "throughput"),
            m.params.get("limit"),
            m.params.get("subset"),
            m.params.get("slo"),
            finite(m.params.get("attainment_target")),
        )

    @property
    def prompt(self) -> str:
        """``short``, or the long prompt's length: ``1,024``."""
        return (
            "short"
            if self.prompt_tokens is None
            else f"{self.prompt_tokens:,}"
            if isinstance(self.prompt_tokens, int)
            else str(self.prompt_tokens)
        )

    @property
    def key(self) -> tuple[int, int]:
        """Long prompts after short ones, then by concurrency."""
        prompt, concurrency = whole(self.prompt_tokens), whole(self.concurrency)
        return (-1 if prompt is None else prompt, -1 if concurrency is None else concurrency)


def _reference_first(reference: str | None, model: str) -> tuple[bool, str]:
    """The sort key of a model's rows: the reference's first, then by name."""
    return model != reference, model


def outcome_notes(measurements: Iterable[Measurement]) -> list[str]:
    """``model: its test failed; see the test's report`` once per such model and outcome."""
    return list(
        dict.fromkeys(
            f"{m.model}: its test {m.outcome}; see the test's report"
            for m in measurements
            if not m.passed and m.outcome
        )
    )


def compared_reference(measurements: Iterable[Measurement]) -> str | None:
    """The reference the run's comparisons name (the first that names one)."""
    return next(
        (
            m.stats.reference
            for m in measurements
            if isinstance(m.stats, COMPARISONS) and m.stats.reference
        ),
        None,
    )


_TABLE_OF = {
    AccuracyVerdictStats: "verdicts",
    AccuracyStats: "accuracy",
    ThroughputRatioStats: "throughput_ratio",
    ThroughputStats: "throughput",
    StartupStats: "startup",
}


def measurement_kind(m: Measurement) -> str:
    """The table a measurement belongs in, by the record of its stats (else ``other``); a
    search and its ratio by their knob: ``capacity``, ``rate_capacity``."""
    return (
        SEARCH_BENCHMARK[m.stats.knob]
        if isinstance(m.stats, SearchStats | SearchRatioStats)
        else _TABLE_OF.get(type(m.stats), "other")
    )


# --------------------------------------------------------------------------- verdicts
def _verdict_figures(m: Measurement, s: AccuracyVerdictStats, plain: bool) -> list[Cell]:
    """A verdict's difference, interval, n, discordant pairs and detectable difference (a
    sequential verdict's from its confidence sequence); ``plain``: every interval is 95%."""
    seq, iv = s.sequence, s.interval
    if seq is not None:  # --until-decided: the confidence sequence
        return [
            format_points(seq.difference),
            format_points_interval(seq.low, seq.high),
            seq.n,
            seq.discordant,
            NA,
        ]
    interval = NA if iv is None else format_points_interval(iv.low, iv.high)
    if not plain and iv is not None and interval != NA:
        interval += f" ({_rounded(100 * iv.confidence, 1):g}%)"
    detectable = None if iv is None else finite(iv.min_detectable_difference)
    return [
        format_points(m.value if iv is None else iv.difference),
        interval,
        m.n if iv is None else iv.n,
        NA if iv is None else iv.discordant,
        NA if detectable is None else f"±{_rounded(100 * detectable, 1):.1f} pp",
    ]


def verdict_table(measurements: Measurements) -> Table:
    """Paired verdicts: candidate, reference, metric, difference, interval, n, discordant, verdict."""
    verdicts = [(m, stats_of(m, AccuracyVerdictStats)) for m in measurements]
    plain = all(s.interval is None or s.interval.confidence == 0.95 for _, s in verdicts)
    columns = [
        "candidate",
        "reference",
        "metric",
        "difference",
        "95% interval" if plain else "interval",
        "n",
        "discordant",
        "detectable",
        "verdict",
    ]
    named = [
        (s.metric or m.benchmark.split(":", 1)[-1], s.candidate or m.model, m, s)
        for m, s in verdicts
    ]
    sequential = [
        f"{candidate} on {metric}: {s.sequence.text()}"
        for metric, candidate, _, s in named
        if s.sequence is not None
    ]
    margins = sorted({margin for _, s in verdicts if (margin := finite(s.margin)) is not None})
    notes = [
        note
        for shown, note in (
            (
                True,
                "difference: candidate minus reference accuracy, paired item by item (bootstrap "
                "interval); detectable: the difference this n finds with 80% power",
            ),
            (
                sequential,
                "sequential verdicts (--until-decided): the interval is the 95% confidence "
                "sequence, valid where the items stopped (no detectable difference): "
                + "; ".join(sequential),
            ),
            *((True, f"equivalence margin ±{_rounded(100 * m, 1):.1f} pp") for m in margins),
            (
                any(s.rule.startswith("holm") for _, s in verdicts),
                "intervals Holm-adjusted across the candidates",
            ),
        )
        if shown
    ]
    return Table(
        "Verdicts",
        columns,
        [
            [
                candidate,
                s.reference,
                metric,
                *_verdict_figures(m, s, plain),
                NA if s.verdict is None else s.verdict.value,
            ]
            for metric, candidate, m, s in sorted(named, key=lambda r: (rank(r[0]), r[0], r[1]))
        ],
        "verdicts",
        notes,
        columns.index("verdict"),
    )


# --------------------------------------------------------------------------- accuracy
def accuracy_table(
    benchmark: str,
    measurements: Measurements,
    reference: str | None = None,
) -> Table:
    """One accuracy benchmark: a row per model, GSM8K and BFCL with their own columns."""
    ordered = sorted(measurements, key=lambda m: _reference_first(reference, m.model))
    head = ["model", "accuracy", "95% interval"]
    columns, notes = {
        "gsm8k": (
            [*head, "strict-match", "n", "subset", "truncated", "failed"],
            (
                "accuracy: flexible-extract, as lm-evaluation-harness scores it; "
                "interval: Wilson 95%"
            ),
        ),
        "bfcl": (
            [*head, "n", "subset", "parse failures", "failed", "error types"],
            "interval: Wilson 95%; error types count the wrong answers by BFCL's checker",
        ),
    }.get(benchmark, ([*head, "n", "subset"], "interval: Wilson 95%"))
    rows: list[list[Cell]] = []
    for m in ordered:
        stats, interval, setting = stats_of(m, AccuracyStats), accuracy_interval(m), Setting.of(m)
        subset = (
            stats.sequence.text()  # --until-decided: the items it stopped after
            if stats.sequence is not None
            else ("subset" if setting.limit is None else f"first {setting.limit}")
            if setting.subset is True or setting.limit is not None
            else "full"
            if setting.subset is False
            else NA
        )
        errors = sorted(stats.error_types.items(), key=lambda kv: (-int(kv[1]), kv[0]))
        cells: dict[str, Cell] = {  # every benchmark's, each shows its columns'
            "model": m.model,
            "accuracy": format_percent(m.value),
            "95% interval": format_percent_interval(*interval) if interval else NA,
            "strict-match": format_percent(stats.strict_match_accuracy),
            "n": m.n,
            "subset": subset,
            "truncated": format_percent(stats.truncated_rate),
            "parse failures": _count(stats.parse_failures),
            "failed": stats.failed,
            "error types": ", ".join(f"{kind} {count}" for kind, count in errors) or "none",
        }
        rows.append([cells[column] for column in columns])
    return Table(
        label_of(benchmark, f"{benchmark} accuracy"),
        columns,
        rows,
        "accuracy",
        [notes, *outcome_notes(ordered)],
    )


# --------------------------------------------------------------------------- throughput
LATENCY_NAMES = ("ttft", "tpot", "itl", "e2e")  # a throughput window's, in report order
LATENCY_QUANTITIES = ("mean", "p50", "p90", "p99")


def latency_figure(latency: Latency, quantity: str) -> float | None:
    """One figure of a latency in ms (``mean``, ``p50``, ``p90``, ``p99``); None if unmeasured."""
    return finite(getattr(latency, f"{quantity}_ms"))


def request_latencies(requests: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """TTFT, TPOT, ITL and E2E in seconds of every successful request."""
    ok = [r for r in requests if not r.error]
    return {
        "ttft": [t for r in ok if (t := r.ttft) is not None],
        "tpot": [t for r in ok if (t := tpot(r)) is not None],
        "itl": [gap for r in ok for gap in itls(r)],
        "e2e": [r.latency for r in ok],
    }


@dataclass(frozen=True)
class ThroughputRow:
    """A throughput measurement (one setting, all its repeats) as the reports read it.
    Latencies from every timed request (``latency_source`` ``requests``), else the median over
    repeats of each repeat's percentile (``repeats``); ``fidelity``: the lowest repeat's;
    ``cells``: its cell in every column a throughput table can show (``flags``: ``unstable``,
    ``contended (1/3)`` where the contended windows are known, or ``""``)."""

    m: Measurement
    stats: ThroughputStats
    setting: Setting
    latency: Mapping[str, Latency]
    latency_source: str
    mean: float | None
    low: float | None
    high: float | None
    fidelity: float | None
    contended: bool
    short_prompt_tokens: int | None
    has_goodput: bool  # Measured against ``--slo``.
    open_loop: bool  # Requests sent at an offered rate (the table's rate columns).
    cells: Mapping[str, Cell]


def _median_latency(latencies: Sequence[Latency]) -> Latency:
    def middle(quantity: str) -> float:
        present = [v for v in (latency_figure(lat, quantity) for lat in latencies) if v is not None]
        return median(present) if present else math.nan

    return Latency(
        middle("mean"), middle("p50"), middle("p90"), middle("p99"), sum(lat.n for lat in latencies)
    )


def throughput_row(m: Measurement) -> ThroughputRow:
    """The one reader of a throughput measurement (see :class:`ThroughputRow`)."""
    stats, setting = stats_of(m, ThroughputStats), Setting.of(m)
    from_requests = request_latencies(m.request_records())
    latency = (
        {name: latency_ms(values) for name, values in from_requests.items()}
        if any(from_requests.values())
        else {
            name: _median_latency([getattr(w, name) for w in stats.repeats])
            for name in LATENCY_NAMES
        }
    )
    source = (
        "requests"
        if any(from_requests.values())
        else "repeats"
        if any(
            latency_figure(lat, q) is not None
            for lat in latency.values()
            for q in LATENCY_QUANTITIES
        )
        else ""
    )
    values, windows = stats.repeat_values, stats.repeats
    low, high, count = min(values, default=None), max(values, default=None), len(values)
    contended = stats.contended or any(w.contended for w in windows)
    short = windows[0].prompt_tokens if windows and setting.prompt_tokens is None else None
    windows_contended = stats.contended_windows or sum(w.contended for w in windows)
    flags = [
        *(["unstable"] if stats.unstable else []),
        *(
            [
                f"contended ({windows_contended}/{count})"
                if windows_contended and count
                else "contended"
            ]
            if contended
            else []
        ),
        *(
            f"{flag} ({flagged}/{len(windows)})"
            for flag, flagged in (
                (SERVER_QUEUED, stats.server_flagged_windows),
                (SATURATED, stats.saturated_windows),
                (DEGENERATE, stats.degenerate_windows),
            )
            if flagged
        ),
    ]
    loops = [w.open_loop.saturation for w in windows if w.open_loop is not None]
    offered = [r for s in loops if (r := finite(s.offered_rps)) is not None]
    achieved = [r for s in loops if (r := finite(s.achieved_rps)) is not None]
    goodput, cost = stats.goodput, stats.cost
    cost_cell = NA if cost is None else format_usd(cost.usd_per_million_output_tokens)
    if cost is not None and cost.interval is not None and cost_cell != NA:
        cost_cell += f" [{format_usd(cost.interval[0])}, {format_usd(cost.interval[1])}]"
    fidelity = min((f for w in windows if (f := finite(w.fidelity)) is not None), default=None)
    return ThroughputRow(
        m,
        stats,
        setting,
        latency,
        source,
        finite(m.value),
        low,
        high,
        fidelity,
        contended,
        short,
        goodput is not None and goodput.slo is not None,
        bool(offered),
        dict(
            zip(
                throughput_columns(goodput=True, cost=True, open_loop=True),
                [
                    m.model,
                    _count(whole(setting.concurrency)),
                    format_goodput(sum(offered) / len(offered) if offered else None),
                    format_goodput(sum(achieved) / len(achieved) if achieved else None),
                    setting.prompt
                    if setting.user_prompts is None
                    else "own"
                    if short is None
                    else f"own (≈{short:,})",
                    format_rate(m.value),
                    f"{format_rate(low)}–{format_rate(high)}"
                    if low is not None and high is not None and count > 1
                    else NA,
                    count,
                    format_percent(stats.cv),
                    ", ".join(flags),
                    format_goodput(goodput and goodput.goodput_rps),
                    format_percent(goodput and goodput.slo_attainment),
                    cost_cell,
                    *(
                        format_ms(latency_figure(latency[name], q))
                        for name in ("ttft", "tpot", "itl")
                        for q in ("p50", "p90", "p99")
                    ),
                    NA if fidelity is None else f"{_rounded(fidelity, 3):.3f}",
                ],
            )
        ),
    )


_THROUGHPUT_COLUMNS = (
    ("model", ""),
    ("concurrency", ""),
    ("offered (req/s)", "open_loop"),
    ("achieved (req/s)", "open_loop"),
    ("prompt tokens", ""),
    ("tokens/s", ""),
    ("range", ""),
    ("repeats", ""),
    ("CV", ""),
    ("flags", ""),
    ("goodput (req/s)", "goodput"),
    ("SLO attainment", "goodput"),
    ("$/1M output tokens", "cost"),
    *(
        (f"{name.upper()} {q} (ms)", "")
        for name in ("ttft", "tpot", "itl")
        for q in ("p50", "p90", "p99")
    ),
    ("fidelity", ""),
)
"""Every column a throughput table can show, in order, each with the switch of
:func:`throughput_columns` that shows it ("": always)."""


def throughput_columns(
    goodput: bool = False, cost: bool = False, open_loop: bool = False
) -> list[str]:
    """The throughput table's columns: the goodput and cost columns asked for after
    ``flags``, an open loop's rates after ``concurrency`` (there the client's cap in flight)."""
    shown = {"": True, "goodput": goodput, "cost": cost, "open_loop": open_loop}
    return [column for column, switch in _THROUGHPUT_COLUMNS if shown[switch]]


def throughput_rows(measurements: Measurements) -> list[ThroughputRow]:
    """:func:`throughput_row` of each throughput measurement, in recording order."""
    return [throughput_row(m) for m in measurements if isinstance(m.stats, ThroughputStats)]


def throughput_table(
    benchmark: str,
    measurements: Measurements,
    reference: str | None = None,
) -> Table:
    """One throughput benchmark: a row per model and setting, its repeats summarised."""
    rows = sorted(
        throughput_rows(measurements),
        key=lambda r: (_reference_first(reference, r.m.model), r.setting.key),
    )
    outputs = sorted({o for r in rows if (o := r.setting.output_tokens) is not None})
    short = sorted(
        {
            p
            for r in rows
            if (p := r.short_prompt_tokens) is not None and r.setting.user_prompts is None
        }
    )
    own = sorted({p for r in rows if (p := r.setting.user_prompts) is not None})
    sources, looped = {r.latency_source for r in rows}, any(r.open_loop for r in rows)
    slos = list(
        dict.fromkeys(str(r.stats.goodput and r.stats.goodput.slo) for r in rows if r.has_goodput)
    )
    prices = list(dict.fromkeys(r.stats.cost.pricing.describe() for r in rows if r.stats.cost))
    missing = [
        said
        for shown, said in (
            (
                slos
                and any(
                    NA in (r.cells["goodput (req/s)"], r.cells["SLO attainment"]) for r in rows
                ),
                "goodput and SLO attainment where the run had no --slo (or no request was timed)",
            ),
            (
                prices and any(r.cells["$/1M output tokens"] == NA for r in rows),
                "$/1M where the run had no price (or no tokens/s)",
            ),
        )
        if shown
    ]
    notes = [
        note
        for shown, note in (
            (outputs, f"{', '.join(f'{o:,}' for o in outputs)} output tokens per request"),
            (short, f"short: {', '.join(map(str, short))}-token prompts"),
            (
                own,
                (
                    f"own: the benchmark's {', '.join(map(str, own))} prompt texts, sent in turn "
                    "(≈ their mean length in tokens)"
                ),
            ),
            (
                True,
                (
                    "tokens/s: mean over repeats (range: lowest–highest repeat); CV: the repeats' "
                    "coefficient of variation; fidelity: our token count ÷ the server's (lowest "
                    "repeat)"
                ),
            ),
            (
                "requests" in sources,
                "latencies: percentiles over every timed request of the setting",
            ),
            (
                "repeats" in sources,
                (
                    "latencies of settings without request records"
                    if "requests" in sources
                    else "latencies"
                )
                + ": median over repeats of each repeat's percentile",
            ),
            (
                looped,
                (
                    "open loop: requests sent at the offered rate whatever was in flight "
                    "(concurrency: the client's cap), latencies from each request's scheduled "
                    "send time; achieved: the completions' rate against the schedule (least-squares "
                    "slopes over the window), the mean over repeats; "
                    f"{SATURATED}: completions fell more than 10% behind"
                ),
            ),
            (
                any(r.stats.server_flagged_windows for r in rows),
                (
                    f"{SERVER_QUEUED}: the server's /metrics showed requests waiting (or preempted) "
                    "while the client had them in flight: it ran fewer at once than the client sent"
                ),
            ),
            (
                slos,
                (
                    f"goodput: requests per second of the window that met every SLO target "
                    f"({'; '.join(slos)}), a failed request never; SLO attainment: their share of "
                    "the window's requests; both the mean over repeats"
                ),
            ),
            (
                prices,
                (
                    f"$/1M output tokens = price per hour ÷ (mean output tokens/s × 3600) × 1e6 "
                    f"at {'; '.join(prices)}; [low, high]: the price through the 95% t interval "
                    "of the mean log tokens/s over the repeats (none with one repeat)"
                ),
            ),
            (missing, f"{NA}: {'; '.join(missing)}"),
        )
        if shown
    ]
    columns = throughput_columns(bool(slos), bool(prices), looped)
    return Table(
        label_of(benchmark, f"{benchmark} throughput"),
        columns,
        [[r.cells[column] for column in columns] for r in rows],
        "throughput",
        notes + outcome_notes(measurements),
    )


def ratio_table(measurements: Measurements) -> Table:
    """Throughput ratios candidate ÷ reference per benchmark and setting, with intervals (a
    design column when back-to-back and interleaved both occur)."""
    designs = {stats_of(m, ThroughputRatioStats).design for m in measurements}
    keyed: list[tuple[Any, list[Cell]]] = [
        (
            (m.model, rank(benchmark), benchmark, setting.key, stats.design),
            [
                m.model,
                stats.reference,
                benchmark,
                _count(whole(setting.concurrency)),
                setting.prompt if benchmark in METRICS else "own",
                *([stats.design] if len(designs) > 1 else []),
                format_ratio(m.value),
                "n/a (single repeat)"
                if stats.interval is not None and stats.interval.degenerate
                else NA
                if stats.interval is None
                else format_ratio_interval(stats.interval.low, stats.interval.high),
            ],
        )
        for m in measurements
        for stats, setting in [(stats_of(m, ThroughputRatioStats), Setting.of(m))]
        for benchmark in [str(setting.benchmark)]
    ]
    notes = [
        "ratio: candidate's mean output tokens/s ÷ the reference's, same benchmark and "
        "setting; interval: Welch t on log tokens/s over the repeats (ratio of geometric "
        "means)"
        + (
            "; interleaved (--interleave): the two models' windows measured in pairs, a "
            "paired t interval on the pairs' log ratios"
            if len(designs) > 1
            else ""
        ),
        *(
            ["own: the benchmark's own prompt texts"]
            if any(row[2] not in METRICS for _, row in keyed)
            else []
        ),
    ]
    return Table(
        "Throughput relative to the reference",
        [
            "candidate",
            "reference",
            "benchmark",
            "concurrency",
            "prompt tokens",
            *(["design"] if len(designs) > 1 else []),
            "ratio",
            "95% interval",
        ],
        [row for _, row in sorted(keyed, key=lambda kr: kr[0])],
        "throughput_ratio",
        notes,
    )


def rate_bracket_text(bracket: tuple[float, float | None] | None, knob: str = RATE) -> str:
    """``[1.41, 2]`` req/s, ``[3, 4]`` concurrent requests; ``[64, open]`` when the search's
    maximum passed."""
    if bracket is None:
        return NA
    value = format_rps if knob == RATE else format_count
    return f"[{value(bracket[0])}, {'open' if bracket[1] is None else value(bracket[1])}]"


_SEARCH_NOTES = {
    CONCURRENCY: (
        "the most concurrent requests (up to the server's maximum)",
        "each step's attainment decided from the Clopper-Pearson interval of its windows' "
        "pooled requests (pass: its low end reaches the target)",
        "search",
        "searches",
    ),
    RATE: (
        "the highest request rate",
        "each step's attainment decided from its 90% Clopper-Pearson interval "
        "(pass: its low end reaches the target)",
        "sweep",
        "sweeps",
    ),
}
"""A knob's search in its table's notes: what the capacity is, how a step is decided, and
what the search is called (and more than one)."""


def capacity_table(measurements: Measurements, reference: str | None = None) -> Table:
    """Capacity under the SLO over one knob (in its unit): a row per model's search, then
    each candidate's ratio."""
    found = sorted(
        (m for m in measurements if isinstance(m.stats, SearchStats)),
        key=lambda m: _reference_first(reference, m.model),
    )
    knob = next(
        m.stats.knob for m in measurements if isinstance(m.stats, SearchStats | SearchRatioStats)
    )
    unit = "req/s" if knob == RATE else "concurrent requests"
    rows: list[list[Cell]] = [
        [
            m.model,
            format_rps(stats.capacity) if knob == RATE else format_count(stats.capacity),
            rate_bracket_text(stats.bracket, knob),
            len(stats.steps),
            format_goodput(at and at.goodput_rps),
            format_percent(at and at.slo_attainment),
            format_rate(at and at.output_tokens_per_s),
            ", ".join(stats.flags),
            stats.error or stats.stopped,
        ]
        for m in found
        for stats in [stats_of(m, SearchStats)]
        for at in [stats.at_capacity]
    ]
    rows += [
        [
            m.model,
            f"{format_ratio(m.value)} {ratio.reference}",
            NA
            if ratio.ratio is None
            else "n/a (both open above)"
            if ratio.ratio.degenerate
            else f"[{_rounded(ratio.ratio.low, 2):.2f}, "
            f"{'∞' if math.isinf(ratio.ratio.high) else f'{ratio.ratio.high:.2f}'}]",
            "",
            "",
            "",
            "",
            ", ".join(ratio.candidate_flags),
            NA if ratio.verdict is None else ratio.verdict.value,
        ]
        for m in sorted(
            (m for m in measurements if isinstance(m.stats, SearchRatioStats)),
            key=lambda m: m.model,
        )
        for ratio in [stats_of(m, SearchRatioStats)]
    ]
    what, decided, search, searches = _SEARCH_NOTES[knob]
    notes = [
        f"capacity: {what} at which the SLO "
        f"({'; '.join(sorted({str(Setting.of(m).slo) for m in found}))}) was met, "
        f"{decided}; bracket: [last pass, first miss or saturation] {unit}; goodput, "
        "attainment and tokens/s of the passing step at the capacity; stopped: why the "
        f"{search} ended",
        *(
            [
                f"a candidate's row under the {searches}: its capacity ÷ the reference's, the "
                "interval the two brackets give, and the verdict from that interval"
            ]
            if any(isinstance(m.stats, SearchRatioStats) for m in measurements)
            else []
        ),
    ]
    return Table(
        label_of(SEARCH_BENCHMARK[knob], SEARCH_BENCHMARK[knob]),
        [
            "model",
            f"capacity ({unit})",
            "bracket",
            "steps",
            "goodput (req/s)",
            "SLO attainment",
            "tokens/s",
            "flags",
            "stopped",
        ],
        rows,
        SEARCH_BENCHMARK[knob],
        notes + outcome_notes(measurements),
    )


def format_seconds_interval(value: float | None, interval: tuple[float, float] | None) -> str:
    """``4.21 [3.90, 4.55]`` seconds; the value alone without an interval."""
    x = finite(value)
    if x is None:
        return NA
    return f"{x:.2f}" + ("" if interval is None else f" [{interval[0]:.2f}, {interval[1]:.2f}]")


def startup_table(measurements: Measurements, reference: str | None = None) -> Table:
    """Cold starts: a row per model, launch → first token and → ready over its launches."""
    return Table(
        label_of("startup", "Cold start"),
        ["model", "first token (s)", "ready (s)", "launches", "cache", "backend", "errors"],
        [
            [
                m.model,
                format_seconds_interval(stats.first_token_s, stats.first_token_s_interval),
                format_seconds_interval(stats.ready_s, stats.ready_s_interval),
                len(stats.launches),
                stats.cache,
                stats.backend,
                "; ".join(stats.errors) or "",
            ]
            for m in sorted(measurements, key=lambda m: _reference_first(reference, m.model))
            for stats in [stats_of(m, StartupStats)]
        ],
        "startup",
        [
            (
                "first token: seconds from spawning the server to the first token of its "
                "first request; ready: to its /health answering; geometric mean over fresh "
                "launches [95% interval]; cache: whether each launch read its files cold "
                "(llama-server's model file dropped from the page cache first; vLLM's compile "
                "caches empty) or warm"
            ),
            *outcome_notes(measurements),
        ],
    )


def other_table(measurements: Measurements) -> Table:
    """Measurements no other table knows (smoke, custom), in recording order."""
    return Table(
        "Other measurements",
        ["model", "benchmark", "parameters", "value", "n", "outcome"],
        [
            [
                m.model,
                m.benchmark,
                " ".join(f"{k}={v}" for k, v in m.params.items()),
                f"{format_value(m.value)} {m.unit}".strip(),
                m.n,
                m.outcome or "",
            ]
            for m in measurements
        ],
        "other",
    )


# --------------------------------------------------------------------------- all
def summary_tables(measurements: Measurements, reference: str | None = None) -> list[Table]:
    """Every table of a run, ``reference`` (default: the comparisons') listed first."""
    reference = reference or compared_reference(measurements)
    by_kind: dict[str, dict[str, list[Measurement]]] = {}
    for m in measurements:
        kind = measurement_kind(m)
        by_kind.setdefault(kind, {}).setdefault(
            m.benchmark if kind in ("accuracy", "throughput") else "", []
        ).append(m)

    def tables(kind: str, table: Callable[[str, Measurements], Table]) -> list[Table]:
        found = by_kind.get(kind, {})
        return [table(name, found[name]) for name in sorted(found, key=lambda b: (rank(b), b))]

    return [
        *tables("verdicts", lambda _, ms: verdict_table(ms)),
        *tables("accuracy", lambda name, ms: accuracy_table(name, ms, reference)),
        *tables("throughput_ratio", lambda _, ms: ratio_table(ms)),
        *tables("throughput", lambda name, ms: throughput_table(name, ms, reference)),
        *(
            table
            for benchmark in SEARCH_BENCHMARK.values()
            for table in tables(benchmark, lambda _, ms: capacity_table(ms, reference))
        ),
        *tables("startup", lambda _, ms: startup_table(ms, reference)),
        *tables("other", lambda _, ms: other_table(ms)),
    ]
