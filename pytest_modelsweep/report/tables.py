"""Plain-data summary tables of a run's measurements, shared by the Markdown and HTML reports.

Every cell is already formatted (a string) or a count (an int), so that two
renderers of the same measurements show the same numbers. Conventions:
accuracy in percent with one decimal (``41.2%``), accuracy differences in
percentage points (``+2.0 pp``), tokens/s with one decimal, latencies in
milliseconds with one decimal, ratios with two decimals (``0.85×``).

Nothing here escapes anything: cells hold text as it came (model names,
error types); each renderer escapes for its own format.

Which table a measurement lands in, table titles and their order come from
the metric table (:mod:`..metrics`); a benchmark the table lacks is placed
by its unit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from statistics import fmean, median, stdev
from typing import Any

from ..core.cost import Pricing
from ..core.metrics import VERDICT_PREFIX, Kind, label_of, metric_for, rank
from ..core.slo import Slo

Cell = str | int
"""A table cell: formatted text, or a count."""

NA = "n/a"
_Z95 = 1.959963984540054


@dataclass
class Table:
    """One summary table: a title, column names, rows of cells and short notes under it.

    ``kind`` is one of ``verdicts``, ``accuracy``, ``throughput``,
    ``throughput_ratio``, ``other``; ``status_column`` is the index of the
    column that holds a verdict word, if any (renderers may style it).
    """

    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    kind: str = "other"
    notes: list[str] = field(default_factory=list)
    status_column: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy."""
        return asdict(self)


# --------------------------------------------------------------------------- formatting


def _number(value: Any) -> float | None:
    """A finite float, or None for None, NaN, infinities and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _rounded(value: float, digits: int) -> float:
    # round, then add 0.0 so that a tiny negative prints as 0.0, not -0.0
    return round(value, digits) + 0.0


def format_percent(value: Any) -> str:
    """A proportion as a percentage with one decimal: 0.4123 -> ``41.2%``."""
    number = _number(value)
    return NA if number is None else f"{_rounded(100 * number, 1):.1f}%"


def format_points(value: Any) -> str:
    """A difference of proportions in signed percentage points: 0.02 -> ``+2.0 pp``."""
    number = _number(value)
    return NA if number is None else f"{_rounded(100 * number, 1):+.1f} pp"


def format_points_interval(low: Any, high: Any) -> str:
    """An interval of differences in percentage points: ``[-1.0, +5.0] pp``."""
    lo, hi = _number(low), _number(high)
    if lo is None or hi is None:
        return NA
    return f"[{_rounded(100 * lo, 1):+.1f}, {_rounded(100 * hi, 1):+.1f}] pp"


def format_percent_interval(low: Any, high: Any) -> str:
    """An interval of proportions in percent: ``37.0–45.5%``."""
    lo, hi = _number(low), _number(high)
    if lo is None or hi is None:
        return NA
    return f"{_rounded(100 * lo, 1):.1f}–{_rounded(100 * hi, 1):.1f}%"


def format_rate(value: Any) -> str:
    """Tokens per second with one decimal and a thousands separator: ``1,234.5``."""
    number = _number(value)
    return NA if number is None else f"{_rounded(number, 1):,.1f}"


def format_ms(value: Any) -> str:
    """Milliseconds with one decimal (the value is already in ms)."""
    number = _number(value)
    return NA if number is None else f"{_rounded(number, 1):,.1f}"


def format_ratio(value: Any) -> str:
    """A ratio with two decimals: ``0.85×``."""
    number = _number(value)
    return NA if number is None else f"{_rounded(number, 2):.2f}×"


def format_goodput(value: Any) -> str:
    """Requests per second: two decimals (``1.78``), three significant digits below 1
    (``0.0781``)."""
    number = _number(value)
    if number is None:
        return NA
    return f"{_rounded(number, 2):,.2f}" if abs(number) >= 1 else f"{number:#.3g}"


def format_usd(value: Any) -> str:
    """Dollars without the sign: ``1,234``, ``1.39``, ``0.278`` (three significant digits
    below 1)."""
    number = _number(value)
    if number is None:
        return NA
    if abs(number) >= 100:
        return f"{_rounded(number, 0):,.0f}"
    if abs(number) >= 1:
        return f"{_rounded(number, 2):.2f}"
    return f"{number:#.3g}"


def format_usd_interval(value: Any, interval: tuple[float, float] | None) -> str:
    """A cost and its interval: ``0.278 [0.270, 0.290]``; the cost alone without one."""
    shown = format_usd(value)
    if shown == NA or interval is None:
        return shown
    return f"{shown} [{format_usd(interval[0])}, {format_usd(interval[1])}]"


def format_value(value: Any) -> str:
    """A value of unknown kind: three significant decimals below 1, one above."""
    number = _number(value)
    if number is None:
        return NA
    if number != 0 and (abs(number) < 0.001 or abs(number) >= 1e7):
        return f"{number:.3g}"
    if abs(number) < 1:
        return f"{_rounded(number, 3):.3f}"
    return f"{_rounded(number, 1):,.1f}"


def wilson_interval(successes: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion (95% by default); (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def accuracy_interval(measurement: Mapping[str, Any]) -> tuple[float, float] | None:
    """The Wilson 95% interval of an accuracy measurement, or None without a usable n."""
    accuracy = _number(measurement.get("value"))
    n = measurement.get("n")
    if accuracy is None or not isinstance(n, int) or n <= 0:
        return None
    return wilson_interval(round(accuracy * n), n)


# --------------------------------------------------------------------------- run heading


def _short_commit(run: Mapping[str, Any]) -> str | None:
    project = run.get("project") or {}
    commit = project.get("commit") if isinstance(project, Mapping) else None
    if not commit:
        return None
    text = str(commit)[:10]
    return text + " (dirty)" if project.get("dirty") else text


def run_title(run: Mapping[str, Any]) -> str:
    """``modelsweep: sweep embedded, reference gemma3-270m, commit 0123456789``."""
    parts = []
    if run.get("sweep_name"):
        parts.append(f"sweep {run['sweep_name']}")
    if run.get("reference"):
        parts.append(f"reference {run['reference']}")
    commit = _short_commit(run)
    if commit:
        parts.append(f"commit {commit}")
    return "modelsweep: " + ", ".join(parts) if parts else "modelsweep"


def servers_of(measurements: Iterable[Mapping[str, Any]]) -> list[str]:
    """Distinct ``server version (image digest)`` descriptions, in first-seen order."""
    seen: dict[str, None] = {}
    for m in measurements:
        provenance = m.get("provenance") or {}
        if not isinstance(provenance, Mapping) or not provenance.get("server_name"):
            continue
        text = str(provenance["server_name"])
        version = provenance.get("server_version")
        if version and version != "unknown":
            text += f" {version}"
        digest = provenance.get("image_digest")
        if digest:
            text += f", image {_short_digest(str(digest))}"
        seen.setdefault(text, None)
    return list(seen)


def _short_digest(digest: str) -> str:
    algorithm, _, value = digest.rpartition(":")
    return f"{algorithm or 'sha256'}:{value[:12]}" if value else digest


def provenance_line(measurements: Sequence[Mapping[str, Any]], run: Mapping[str, Any]) -> str:
    """One short line: server and version (image digest if any), run id, measurement count."""
    parts = servers_of(measurements)
    if not parts:
        serving = run.get("serving") or {}
        backend = serving.get("backend") if isinstance(serving, Mapping) else None
        if backend:
            image = serving.get("image")
            parts.append(str(backend) + (f", image {_short_digest(str(image))}" if image else ""))
    if run.get("run_id"):
        parts.append(f"run {run['run_id']}")
    count = len(measurements)
    parts.append(f"{count} measurement{'s' if count != 1 else ''}")
    return " · ".join(parts)


# --------------------------------------------------------------------------- helpers


def _params(m: Mapping[str, Any]) -> Mapping[str, Any]:
    value = m.get("params")
    return value if isinstance(value, Mapping) else {}


def _stats(m: Mapping[str, Any]) -> Mapping[str, Any]:
    value = m.get("stats")
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> Cell:
    return value if isinstance(value, int) and not isinstance(value, bool) else NA


def _model_order(reference: str | None) -> Any:
    def key(model: Any) -> tuple[bool, str]:
        return (str(model) != reference, str(model))

    return key


def _outcome_notes(measurements: Iterable[Mapping[str, Any]]) -> list[str]:
    notes: dict[str, None] = {}
    for m in measurements:
        outcome = m.get("outcome")
        if outcome and outcome != "passed":
            notes.setdefault(f"{m.get('model', '')}: its test {outcome}; see the test's report", None)
    return list(notes)


def _infer_reference(measurements: Iterable[Mapping[str, Any]]) -> str | None:
    for m in measurements:
        metric = metric_for(str(m.get("benchmark", "")), m.get("unit"))
        if metric is not None and metric.kind is Kind.COMPARISON:
            reference = _stats(m).get("reference") or _params(m).get("reference")
            if reference:
                return str(reference)
    return None


def is_throughput(m: Mapping[str, Any]) -> bool:
    """Whether a measurement is one throughput setting (not a ratio, not a smoke run)."""
    return measurement_kind(m) == "throughput"


_TABLE_OF_KIND = {Kind.ACCURACY: "accuracy", Kind.THROUGHPUT: "throughput",
                  Kind.SMOKE: "other", Kind.SCREENING: "other"}
_TABLE_OF_COMPARISON = {Kind.ACCURACY: "verdicts", Kind.THROUGHPUT: "throughput_ratio"}


def measurement_kind(m: Mapping[str, Any]) -> str:
    """The table a measurement belongs in: verdicts, throughput_ratio, throughput, accuracy
    or other, by its metric's kind; by its unit for a benchmark the metric table lacks."""
    metric = metric_for(str(m.get("benchmark", "")), m.get("unit"))
    if metric is not None:
        if metric.kind is Kind.COMPARISON:
            return _TABLE_OF_COMPARISON.get(metric.compares or metric.kind, "other")
        return _TABLE_OF_KIND.get(metric.kind, "other")
    if m.get("unit") == "tokens/s" and "concurrency" in _params(m):
        return "throughput"
    if m.get("unit") == "accuracy":
        return "accuracy"
    return "other"


def _prompt_setting(params: Mapping[str, Any]) -> str:
    prompt = params.get("prompt_tokens")
    return "short" if prompt is None else f"{prompt:,}" if isinstance(prompt, int) else str(prompt)


def _setting_key(params: Mapping[str, Any]) -> tuple[int, int]:
    concurrency = params.get("concurrency")
    prompt = params.get("prompt_tokens")
    return (
        prompt if isinstance(prompt, int) else -1,
        concurrency if isinstance(concurrency, int) else -1,
    )


# --------------------------------------------------------------------------- verdicts


def verdict_table(measurements: Sequence[Mapping[str, Any]]) -> Table:
    """Paired verdicts: candidate, reference, metric, difference, interval, n, discordant, verdict."""
    confidences = {_number(_stats(m).get("confidence")) for m in measurements}
    plain = confidences <= {0.95, None}
    columns = [
        "candidate", "reference", "metric", "difference",
        "95% interval" if plain else "interval", "n", "discordant", "detectable", "verdict",
    ]
    rows: list[tuple[tuple[str, str], list[Cell]]] = []
    margins: set[float] = set()
    holm = False
    for m in measurements:
        stats, params = _stats(m), _params(m)
        metric = str(stats.get("metric") or str(m.get("benchmark", ""))[len(VERDICT_PREFIX):])
        candidate = str(stats.get("candidate") or m.get("model", ""))
        interval = format_points_interval(stats.get("low"), stats.get("high"))
        confidence = _number(stats.get("confidence"))
        if not plain and confidence is not None and interval != NA:
            interval += f" ({_rounded(100 * confidence, 1):g}%)"
        detectable = _number(stats.get("min_detectable_difference"))
        margin = _number(stats.get("margin", params.get("margin")))
        if margin is not None:
            margins.add(margin)
        holm = holm or str(stats.get("rule", "")).startswith("holm") or params.get("holm") is True
        rows.append(((metric, candidate), [
            candidate,
            str(stats.get("reference") or params.get("reference") or ""),
            metric,
            format_points(stats.get("difference", m.get("value"))),
            interval,
            _count(stats.get("n", m.get("n"))),
            _count(stats.get("discordant")),
            NA if detectable is None else f"±{_rounded(100 * detectable, 1):.1f} pp",
            str(stats.get("verdict") or params.get("verdict") or NA),
        ]))
    notes = [(
        "difference: candidate minus reference accuracy, paired item by item (bootstrap interval); "
        "detectable: the difference this n finds with 80% power"
    )]
    for margin in sorted(margins):
        notes.append(f"equivalence margin ±{_rounded(100 * margin, 1):.1f} pp")
    if holm:
        notes.append("intervals Holm-adjusted across the candidates")
    return Table(
        title="Verdicts",
        columns=columns,
        rows=[row for _, row in sorted(rows, key=lambda r: (rank(r[0][0]), r[0]))],
        kind="verdicts",
        notes=notes,
        status_column=columns.index("verdict"),
    )


# --------------------------------------------------------------------------- accuracy


def _subset(params: Mapping[str, Any]) -> str:
    if params.get("subset") is True or params.get("limit") is not None:
        limit = params.get("limit")
        return f"first {limit}" if limit is not None else "subset"
    if params.get("subset") is False:
        return "full"
    return NA


def _error_types(stats: Mapping[str, Any]) -> str:
    types = stats.get("error_types")
    if not isinstance(types, Mapping) or not types:
        return "none" if isinstance(types, Mapping) else NA
    ordered = sorted(types.items(), key=lambda kv: (-int(kv[1]), str(kv[0])))
    return ", ".join(f"{kind} {count}" for kind, count in ordered)


def accuracy_table(
    benchmark: str, measurements: Sequence[Mapping[str, Any]], reference: str | None = None
) -> Table:
    """One accuracy benchmark: a row per model, GSM8K and BFCL with their own columns."""
    ordered = sorted(measurements, key=lambda m: _model_order(reference)(m.get("model", "")))
    rows: list[list[Cell]] = []
    notes: list[str] = []
    if benchmark == "gsm8k":
        columns = ["model", "accuracy", "95% interval", "strict-match", "n", "subset",
                   "truncated", "failed"]
        notes.append("accuracy: flexible-extract, as lm-evaluation-harness scores it; "
                     "interval: Wilson 95%")
    elif benchmark == "bfcl":
        columns = ["model", "accuracy", "95% interval", "n", "subset", "parse failures",
                   "failed", "error types"]
        notes.append("interval: Wilson 95%; error types count the wrong answers by BFCL's checker")
    else:
        columns = ["model", "accuracy", "95% interval", "n", "subset"]
        notes.append("interval: Wilson 95%")
    for m in ordered:
        stats, params = _stats(m), _params(m)
        interval = accuracy_interval(m)
        row: list[Cell] = [
            str(m.get("model", "")),
            format_percent(m.get("value")),
            format_percent_interval(*interval) if interval else NA,
        ]
        if benchmark == "gsm8k":
            row += [
                format_percent(stats.get("strict_match_accuracy")),
                _count(m.get("n")),
                _subset(params),
                format_percent(stats.get("truncated_rate")),
                _count(stats.get("failed", stats.get("errors"))),
            ]
        elif benchmark == "bfcl":
            row += [
                _count(m.get("n")),
                _subset(params),
                _count(stats.get("parse_failures")),
                _count(stats.get("failed", stats.get("errors"))),
                _error_types(stats),
            ]
        else:
            row += [_count(m.get("n")), _subset(params)]
        rows.append(row)
    notes.extend(_outcome_notes(ordered))
    return Table(
        title=label_of(benchmark, f"{benchmark} accuracy"),
        columns=columns, rows=rows, kind="accuracy", notes=notes,
    )


# --------------------------------------------------------------------------- throughput


def latency_ms(stats: Mapping[str, Any], name: str, quantity: str) -> float | None:
    """A latency figure in ms from a stats dict.

    Accepts ``stats[name][quantity + "_ms"]`` (ms), ``stats[name][quantity]``
    (seconds), ``stats[f"{name}_{quantity}_ms"]`` or ``stats[f"{name}_{quantity}"]`` (seconds).
    """
    nested = stats.get(name)
    if isinstance(nested, Mapping):
        if f"{quantity}_ms" in nested:
            return _number(nested[f"{quantity}_ms"])
        seconds = _number(nested.get(quantity))
        return None if seconds is None else seconds * 1e3
    if f"{name}_{quantity}_ms" in stats:
        return _number(stats[f"{name}_{quantity}_ms"])
    seconds = _number(stats.get(f"{name}_{quantity}"))
    return None if seconds is None else seconds * 1e3


LATENCY_NAMES = ("ttft", "tpot", "itl", "e2e")
"""The latencies a throughput window records, in report order."""
LATENCY_QUANTITIES = ("mean", "p50", "p90", "p99")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) with linear interpolation (numpy's default method)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class LatencyFigures:
    """One latency of a throughput setting in milliseconds (None: not measured)."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    n: int | None = None

    def get(self, quantity: str) -> float | None:
        """The figure named ``mean``, ``p50``, ``p90`` or ``p99``."""
        value = getattr(self, quantity, None)
        return value if isinstance(value, float) else None

    @property
    def measured(self) -> bool:
        return any(self.get(q) is not None for q in LATENCY_QUANTITIES)

    @classmethod
    def of_ms(cls, values: Sequence[float]) -> LatencyFigures:
        """Mean and percentiles of values already in ms; all None when there are none."""
        if not values:
            return cls(n=0)
        return cls(fmean(values), percentile(values, 0.5), percentile(values, 0.9),
                   percentile(values, 0.99), len(values))


@dataclass(frozen=True)
class RepeatFigures:
    """One timed window (repeat) of a throughput setting, as the bench recorded it."""

    index: int
    tokens_per_s: float | None
    duration_s: float | None
    completed: int | None
    fidelity: float | None
    latency: Mapping[str, LatencyFigures]
    contended: bool
    contention: Mapping[str, Any]
    goodput_rps: float | None = None
    slo_attainment: float | None = None
    usd_per_million_output_tokens: float | None = None


LatencySource = str
"""``requests``: percentiles over every timed request of the setting (exact);
``repeats``: the median over repeats of each repeat's own percentile (no request
records); ``""``: no latency recorded."""


@dataclass(frozen=True)
class ThroughputRow:
    """Everything a throughput measurement (one setting, all its repeats) says, typed.

    Read by :func:`throughput_row` from what ``benches/test_throughput.py``
    writes: ``value`` (mean tokens/s over repeats), ``params`` (concurrency,
    prompt_tokens, output_tokens, timed_requests, repeats), ``stats.repeat_values``,
    ``stats.repeats`` (one ``ThroughputResult.as_stats()`` per repeat), optional
    ``stats.cv`` / ``unstable`` / ``contended`` / ``contended_windows``, with ``--slo``
    ``stats.slo`` / ``goodput_rps`` / ``slo_attainment``, with a price ``stats.pricing`` /
    ``usd_per_million_output_tokens`` / ``usd_per_million_output_tokens_interval``, and
    ``requests`` (every timed request, with its ``repeat`` index).
    """

    benchmark: str
    model: str
    concurrency: int | None
    prompt_tokens: int | None
    """The long-prompt setting; None for the short-prompt settings."""
    short_prompt_tokens: int | None
    """The prompt length a short-prompt setting actually used (from its repeats); for the
    benchmark's own prompts, their mean length."""
    own_prompts: int | None
    """How many prompt texts of its own the benchmark sent in turn (None: drawn prompts)."""
    output_tokens: int | None
    mean: float | None
    """Mean output tokens/s over the repeats."""
    repeat_values: tuple[float, ...]
    cv: float | None
    """Coefficient of variation of the repeats: as recorded, else standard deviation ÷ mean."""
    unstable: bool
    contended: bool
    contended_windows: int | None
    latency: Mapping[str, LatencyFigures]
    latency_source: LatencySource
    fidelity: float | None
    """Our token count ÷ the server's, lowest over the repeats."""
    repeats: tuple[RepeatFigures, ...]
    outcome: str
    slo: Mapping[str, Any] | None = None
    """The SLO targets goodput was measured against (``Slo.as_dict()``); None: no ``--slo``."""
    goodput_rps: float | None = None
    """Good requests per second, mean over repeats."""
    slo_attainment: float | None = None
    """Share of requests meeting every target, mean over repeats."""
    pricing: Mapping[str, Any] | None = None
    """The price the cost was computed with (``Pricing.as_dict()``); None: no price."""
    usd_per_million_output_tokens: float | None = None
    usd_interval: tuple[float, float] | None = None
    """``[low, high]`` of the cost; None without an interval (one repeat)."""

    @property
    def repeat_count(self) -> int:
        return len(self.repeat_values)

    @property
    def low(self) -> float | None:
        return min(self.repeat_values) if self.repeat_values else None

    @property
    def high(self) -> float | None:
        return max(self.repeat_values) if self.repeat_values else None

    @property
    def flags(self) -> list[str]:
        """``unstable`` and ``contended`` where they apply."""
        return [word for word, on in (("unstable", self.unstable), ("contended", self.contended))
                if on]

    def figure(self, name: str, quantity: str) -> float | None:
        """A latency figure in ms: ``figure("ttft", "p50")``."""
        figures = self.latency.get(name)
        return None if figures is None else figures.get(quantity)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _window_latency(stats: Mapping[str, Any]) -> dict[str, LatencyFigures]:
    figures = {}
    for name in LATENCY_NAMES:
        nested = stats.get(name)
        n = _int(nested.get("n")) if isinstance(nested, Mapping) else None
        figures[name] = LatencyFigures(
            latency_ms(stats, name, "mean"), latency_ms(stats, name, "p50"),
            latency_ms(stats, name, "p90"), latency_ms(stats, name, "p99"), n)
    return figures


def _request_latencies(requests: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """TTFT, TPOT, ITL and E2E in ms of every successful request, as the workload defines them."""
    out: dict[str, list[float]] = {name: [] for name in LATENCY_NAMES}
    for r in requests:
        if r.get("error"):
            continue
        start, end, first = _number(r.get("start")), _number(r.get("end")), _number(r.get("first_token"))
        if start is None or end is None:
            continue
        out["e2e"].append(1e3 * (end - start))
        if first is not None:
            ttft = first - start
            out["ttft"].append(1e3 * ttft)
            tokens = _int(r.get("completion_tokens"))
            if tokens is not None and tokens >= 2:
                out["tpot"].append(1e3 * (end - start - ttft) / (tokens - 1))
        times = [t for t in (_number(v) for v in (r.get("token_times") or [])) if t is not None]
        out["itl"] += [1e3 * (b - a) for a, b in pairwise(times)]
    return out


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def _sample_cv(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = fmean(values)
    return stdev(values) / mean if mean > 0 else None


def throughput_row(m: Mapping[str, Any]) -> ThroughputRow:
    """The one reader of a throughput measurement (see :class:`ThroughputRow`).

    Latency percentiles come from every timed request of the setting when the
    measurement carries its ``requests`` (exact), else from the median of the
    repeats' own percentiles; a measurement without ``stats.repeats`` (an
    older results file) is read as a single window from its top-level stats.
    """
    stats, params = _stats(m), _params(m)
    raw_repeats = stats.get("repeats")
    windows: list[Mapping[str, Any]] = (
        [w for w in raw_repeats if isinstance(w, Mapping)] if isinstance(raw_repeats, list)
        else [stats])
    repeats = tuple(
        RepeatFigures(
            index=i,
            tokens_per_s=_number(w.get("output_tokens_per_s")),
            duration_s=_number(w.get("duration_s")),
            completed=_int(w.get("completed")),
            fidelity=_number(w.get("fidelity")),
            latency=_window_latency(w),
            contended=_contention(w).get("contended") is True,
            contention=_contention(w),
            goodput_rps=_number(w.get("goodput_rps")),
            slo_attainment=_number(w.get("slo_attainment")),
            usd_per_million_output_tokens=_number(w.get("usd_per_million_output_tokens")),
        )
        for i, w in enumerate(windows)
    )
    raw_values = stats.get("repeat_values")
    if isinstance(raw_values, list):
        values = tuple(v for v in (_number(x) for x in raw_values) if v is not None)
    else:
        per_window = [r.tokens_per_s for r in repeats if r.tokens_per_s is not None]
        single = _number(m.get("value"))
        values = tuple(per_window) if per_window else (() if single is None else (single,))
    mean = _number(m.get("value"))
    if mean is None and values:
        mean = fmean(values)

    requests = [r for r in (m.get("requests") or []) if isinstance(r, Mapping)]
    from_requests = _request_latencies(requests)
    latency: dict[str, LatencyFigures] = {}
    source = ""
    if any(from_requests.values()):
        latency = {name: LatencyFigures.of_ms(v) for name, v in from_requests.items()}
        source = "requests"
    else:
        for name in LATENCY_NAMES:
            figures = [r.latency[name] for r in repeats]
            counts = [f.n for f in figures if f.n is not None]
            average, p50, p90, p99 = (_median(f.get(q) for f in figures) for q in LATENCY_QUANTITIES)
            latency[name] = LatencyFigures(average, p50, p90, p99, sum(counts) if counts else None)
        if any(f.measured for f in latency.values()):
            source = "repeats"

    fidelities = [r.fidelity for r in repeats if r.fidelity is not None]
    cv = _number(stats["cv"]) if "cv" in stats else _sample_cv(values)
    windows_contended = _int(stats.get("contended_windows"))
    short = None
    if params.get("prompt_tokens") is None:
        short = next((p for p in (_int(w.get("prompt_tokens")) for w in windows) if p is not None),
                     None)
    return ThroughputRow(
        benchmark=str(m.get("benchmark", "")),
        model=str(m.get("model", "")),
        concurrency=_int(params.get("concurrency")),
        prompt_tokens=_int(params.get("prompt_tokens")),
        short_prompt_tokens=short,
        own_prompts=_int(params.get("user_prompts")),
        output_tokens=_int(params.get("output_tokens")),
        mean=mean,
        repeat_values=values,
        cv=cv,
        unstable=stats.get("unstable") is True,
        contended=stats.get("contended") is True or any(r.contended for r in repeats),
        contended_windows=windows_contended,
        latency=latency,
        latency_source=source,
        fidelity=min(fidelities) if fidelities else None,
        repeats=repeats,
        outcome=str(m.get("outcome") or ""),
        slo=_mapping_or_none(stats.get("slo")),
        goodput_rps=_number(stats.get("goodput_rps")),
        slo_attainment=_number(stats.get("slo_attainment")),
        pricing=_mapping_or_none(stats.get("pricing")),
        usd_per_million_output_tokens=_number(stats.get("usd_per_million_output_tokens")),
        usd_interval=_pair(stats.get("usd_per_million_output_tokens_interval")),
    )


def _mapping_or_none(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _pair(value: Any) -> tuple[float, float] | None:
    """``[low, high]`` of two finite numbers, else None."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    low, high = _number(value[0]), _number(value[1])
    return None if low is None or high is None else (low, high)


def _contention(window: Mapping[str, Any]) -> Mapping[str, Any]:
    value = window.get("contention")
    return value if isinstance(value, Mapping) else {}


def format_cv(value: Any) -> str:
    """A coefficient of variation in percent with one decimal: 0.052 -> ``5.2%``."""
    return format_percent(value)


def format_flags(row: ThroughputRow) -> str:
    """``unstable``, ``contended`` (with the contended windows when known), or ``""``."""
    words = []
    if row.unstable:
        words.append("unstable")
    if row.contended:
        count = row.contended_windows
        if count is None:
            count = sum(1 for r in row.repeats if r.contended) or None
        words.append(f"contended ({count}/{row.repeat_count})"
                     if count is not None and row.repeat_count else "contended")
    return ", ".join(words)


def _prompt_of(row: ThroughputRow) -> str:
    if row.own_prompts is not None:
        return "own" if row.short_prompt_tokens is None else f"own (≈{row.short_prompt_tokens:,})"
    return "short" if row.prompt_tokens is None else f"{row.prompt_tokens:,}"


THROUGHPUT_COLUMNS = [
    "model", "concurrency", "prompt tokens", "tokens/s", "range", "repeats", "CV", "flags",
    *(f"{name.upper()} {q} (ms)" for name in ("ttft", "tpot", "itl") for q in ("p50", "p90", "p99")),
    "fidelity",
]
"""The columns every Throughput or Long-prompt table has."""

GOODPUT_COLUMNS = ["goodput (req/s)", "SLO attainment"]
"""Columns after ``flags`` when a measurement of the table has goodput (``--slo``)."""
COST_COLUMNS = ["$/1M output tokens"]
"""The column after those when a measurement of the table has a price."""


def throughput_columns(goodput: bool = False, cost: bool = False) -> list[str]:
    """:data:`THROUGHPUT_COLUMNS` with the goodput and cost columns the table needs."""
    at = THROUGHPUT_COLUMNS.index("flags") + 1
    extra = (GOODPUT_COLUMNS if goodput else []) + (COST_COLUMNS if cost else [])
    return [*THROUGHPUT_COLUMNS[:at], *extra, *THROUGHPUT_COLUMNS[at:]]


def throughput_cells(row: ThroughputRow, goodput: bool = False, cost: bool = False) -> list[Cell]:
    """A :class:`ThroughputRow` as the cells of :func:`throughput_columns` (``n/a`` where
    the row lacks a figure its table shows)."""
    low, high = row.low, row.high
    spread = (f"{format_rate(low)}–{format_rate(high)}"
              if low is not None and high is not None and row.repeat_count > 1 else NA)
    extra: list[Cell] = []
    if goodput:
        extra += [format_goodput(row.goodput_rps), format_percent(row.slo_attainment)]
    if cost:
        extra.append(format_usd_interval(row.usd_per_million_output_tokens, row.usd_interval))
    return [
        row.model,
        _count(row.concurrency),
        _prompt_of(row),
        format_rate(row.mean),
        spread,
        row.repeat_count,
        format_cv(row.cv),
        format_flags(row),
        *extra,
        *(format_ms(row.figure(name, q)) for name in ("ttft", "tpot", "itl")
          for q in ("p50", "p90", "p99")),
        NA if row.fidelity is None else f"{_rounded(row.fidelity, 3):.3f}",
    ]


def format_slo(slo: Mapping[str, Any]) -> str:
    """``ttft=500ms,tpot=50ms``; the stored targets as they are when they cannot be read."""
    try:
        return str(Slo.from_dict(slo))
    except (TypeError, ValueError):
        return ", ".join(f"{k}={v}" for k, v in slo.items())


def format_pricing(pricing: Mapping[str, Any]) -> str:
    """``$1.2/h (source, as of)``, ``an example price`` said so."""
    price = _number(pricing.get("usd_per_hour"))
    return Pricing(usd_per_hour=math.nan if price is None else price,
                   source=str(pricing.get("source") or ""), as_of=str(pricing.get("as_of") or ""),
                   example=pricing.get("example") is True).describe()


def goodput_cost_notes(rows: Sequence[ThroughputRow]) -> list[str]:
    """The notes under a throughput table for its goodput and cost columns: the SLO, the
    price and its source (once per distinct price), how the figures are made, and what
    ``n/a`` means there."""
    notes: list[str] = []
    slos = list(dict.fromkeys(format_slo(r.slo) for r in rows if r.slo is not None))
    if slos:
        notes.append(f"goodput: requests per second of the window that met every SLO target "
                     f"({'; '.join(slos)}), a failed request never; SLO attainment: their share "
                     "of the window's requests; both the mean over repeats")
    prices = list(dict.fromkeys(format_pricing(r.pricing) for r in rows if r.pricing is not None))
    if prices:
        notes.append(f"$/1M output tokens = price per hour ÷ (mean output tokens/s × 3600) × 1e6 "
                     f"at {'; '.join(prices)}; [low, high]: the price through the 95% t interval "
                     "of the mean log tokens/s over the repeats (none with one repeat)")
    missing = []
    if slos and any(r.goodput_rps is None or r.slo_attainment is None for r in rows):
        missing.append("goodput and SLO attainment where the run had no --slo (or no request "
                       "was timed)")
    if prices and any(r.usd_per_million_output_tokens is None for r in rows):
        missing.append("$/1M where the run had no price (or no tokens/s)")
    if missing:
        notes.append(f"{NA}: {'; '.join(missing)}")
    return notes


def throughput_rows(measurements: Iterable[Mapping[str, Any]]) -> list[ThroughputRow]:
    """:func:`throughput_row` of each throughput measurement, in recording order."""
    return [throughput_row(m) for m in measurements if is_throughput(m)]


def throughput_table(
    benchmark: str, measurements: Sequence[Mapping[str, Any]], reference: str | None = None
) -> Table:
    """One throughput benchmark: a row per model and setting, its repeats summarised."""
    order = _model_order(reference)
    rows = [throughput_row(m) for m in measurements]
    rows.sort(key=lambda r: (order(r.model), (r.prompt_tokens if r.prompt_tokens is not None else -1,
                                              r.concurrency if r.concurrency is not None else -1)))
    notes = []
    outputs = sorted({r.output_tokens for r in rows if r.output_tokens is not None})
    if outputs:
        notes.append(f"{', '.join(f'{o:,}' for o in outputs)} output tokens per request")
    known_short = sorted({r.short_prompt_tokens for r in rows
                          if r.short_prompt_tokens is not None and r.own_prompts is None})
    if known_short:
        notes.append(f"short: {', '.join(map(str, known_short))}-token prompts")
    own = sorted({r.own_prompts for r in rows if r.own_prompts is not None})
    if own:
        notes.append(f"own: the benchmark's {', '.join(map(str, own))} prompt texts, sent in "
                     "turn (≈ their mean length in tokens)")
    notes.append("tokens/s: mean over repeats (range: lowest–highest repeat); CV: the repeats' "
                 "coefficient of variation; fidelity: our token count ÷ the server's (lowest repeat)")
    sources = {r.latency_source for r in rows}
    if "requests" in sources:
        notes.append("latencies: percentiles over every timed request of the setting")
    if "repeats" in sources:
        notes.append(("latencies of settings without request records" if "requests" in sources
                      else "latencies") + ": median over repeats of each repeat's percentile")
    notes.extend(goodput_cost_notes(rows))
    notes.extend(_outcome_notes(measurements))
    goodput = any(r.slo is not None for r in rows)
    cost = any(r.pricing is not None for r in rows)
    return Table(
        title=label_of(benchmark, f"{benchmark} throughput"),
        columns=throughput_columns(goodput, cost),
        rows=[throughput_cells(r, goodput, cost) for r in rows],
        kind="throughput",
        notes=notes,
    )


def ratio_table(measurements: Sequence[Mapping[str, Any]]) -> Table:
    """Throughput ratios candidate ÷ reference per setting, with their intervals."""
    columns = ["candidate", "reference", "concurrency", "prompt tokens", "ratio", "95% interval"]
    keyed: list[tuple[Any, list[Cell]]] = []
    for m in measurements:
        stats, params = _stats(m), _params(m)
        low, high = _number(stats.get("low")), _number(stats.get("high"))
        if stats.get("degenerate") is True:
            interval = "n/a (single repeat)"
        elif low is None or high is None:
            # NaN bounds: too few repeats for an interval (a missing one is just not recorded)
            interval = "no interval" if _is_nan(stats.get("low")) or _is_nan(stats.get("high")) else NA
        else:
            interval = f"[{_rounded(low, 2):.2f}, {_rounded(high, 2):.2f}]"
        candidate = str(m.get("model", ""))
        keyed.append(((candidate, _setting_key(params)), [
            candidate,
            str(stats.get("reference") or params.get("reference") or ""),
            _count(params.get("concurrency")),
            _prompt_setting(params),
            format_ratio(m.get("value")),
            interval,
        ]))
    notes = [("ratio: candidate's mean output tokens/s ÷ the reference's, same setting; "
              "interval: Welch t on log tokens/s over the repeats (ratio of geometric means)")]
    return Table(
        title="Throughput relative to the reference",
        columns=columns,
        rows=[row for _, row in sorted(keyed, key=lambda kr: kr[0])],
        kind="throughput_ratio",
        notes=notes,
    )


# --------------------------------------------------------------------------- other


def other_table(measurements: Sequence[Mapping[str, Any]]) -> Table:
    """Measurements no other table knows (smoke, custom benchmarks), in recording order."""
    rows: list[list[Cell]] = []
    for m in measurements:
        params = " ".join(f"{k}={v}" for k, v in _params(m).items())
        value = format_value(m.get("value"))
        rows.append([
            str(m.get("model", "")),
            str(m.get("benchmark", "")),
            params,
            f"{value} {m.get('unit', '')}".strip(),
            _count(m.get("n")),
            str(m.get("outcome", "") or ""),
        ])
    return Table(
        title="Other measurements",
        columns=["model", "benchmark", "parameters", "value", "n", "outcome"],
        rows=rows,
        kind="other",
    )


# --------------------------------------------------------------------------- all


def summary_tables(
    measurements: Sequence[Mapping[str, Any]], reference: str | None = None
) -> list[Table]:
    """Every table of a run: verdicts, accuracy per benchmark, throughput ratios,
    throughput per benchmark, then anything else.

    ``reference`` (default: read from verdict or ratio measurements) is listed first.
    """
    reference = reference or _infer_reference(measurements)
    by_kind: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for m in measurements:
        kind = measurement_kind(m)
        benchmark = "" if kind in ("verdicts", "throughput_ratio", "other") else str(
            m.get("benchmark", ""))
        by_kind.setdefault(kind, {}).setdefault(benchmark, []).append(m)

    def benchmark_order(name: str) -> tuple[int, str]:
        return (rank(name), name)

    tables: list[Table] = []
    if "verdicts" in by_kind:
        tables.append(verdict_table(by_kind["verdicts"][""]))
    accuracy = by_kind.get("accuracy", {})
    for name in sorted(accuracy, key=benchmark_order):
        tables.append(accuracy_table(name, accuracy[name], reference))
    if "throughput_ratio" in by_kind:
        tables.append(ratio_table(by_kind["throughput_ratio"][""]))
    throughput = by_kind.get("throughput", {})
    for name in sorted(throughput, key=benchmark_order):
        tables.append(throughput_table(name, throughput[name], reference))
    if "other" in by_kind:
        tables.append(other_table(by_kind["other"][""]))
    return tables
