"""A sweep's history in a store: each model's gated figures across runs, in time order.

A series is one model × benchmark × setting under the same serving flags and request settings
(a run under other settings starts a series shown apart); image, server and commit may change
along it and label its runs. Each run is judged against the one before it by the gate, and
:func:`~..core.stats.changes.change_points` locates the changes beyond run-to-run noise (on
the log of a rate or a time). Output: Markdown tables, an HTML page with plots, JSON.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from html import escape
from typing import Any

from ..core.codec import Record
from ..core.errors import DataError, ModelsweepError
from ..core.measurements import (
    AccuracyStats,
    Measurement,
    StartupStats,
    ThroughputStats,
    measurements_of,
)
from ..core.metrics import Kind, metric_for
from ..core.options import DEFAULTS, Thresholds
from ..core.stats.changes import ALPHA, MIN_RUNS, change_points
from ..judging.gate import GateRow, compare_with_baseline, gateable, setting_of, shown_setting_of
from ..judging.pairing import RequestSettings, unlike_requests
from ..serving.endpoint import serving_identity
from ..store.database import Store
from .markdown import escape_markdown, markdown_table
from .plots import (
    _label,
    _new_figure,
    _style,
    _svg,
    drawn,
    error_bars,
    matplotlib_available,
)
from .tables import Table, accuracy_interval, format_value

MAX_RUNS = 30  # The newest runs of a sweep a history reads (the change rule is made for 6-30).
HISTORY_TITLE = "History"
_SECTION = f'<section class="modelsweep" id="modelsweep-history"><h2>{HISTORY_TITLE}</h2>'

REGRESSION, WITHIN_NOISE, IMPROVEMENT, UNJUDGED = (
    "regression",
    "within noise",
    "improvement",
    "unjudged",
)
_DECISION_OF = {"regressed": REGRESSION, "ok": WITHIN_NOISE, "improved": IMPROVEMENT}
_COLOURS = {
    REGRESSION: "#cf222e",
    WITHIN_NOISE: "#57606a",
    IMPROVEMENT: "#1a7f37",
    UNJUDGED: "#bf8700",
}
RULE_LINE = (
    f"Changes: binary segmentation, max-|t| against the series' own run-to-run noise, "
    f"family-wise false-alarm rate {ALPHA:.0%} over an unchanged series "
    "(docs/ci.md#history). Gate: each run against the run before it in its series."
)


@dataclass(frozen=True)
class HistoryPoint(Record):
    """One run's figure in a series, the gate's decision on it and whether a change starts."""

    run_id: str = ""
    started_at: str = ""
    commit: str | None = None
    image_digest: str | None = None
    value: float = math.nan
    low: float | None = None
    high: float | None = None
    decision: str = UNJUDGED  # regression, within noise, improvement or unjudged.
    why: str = ""  # The gate's note (unjudged: its status and reason).
    change: bool = False  # The change rule located a change from the run before to this one.


@dataclass(frozen=True)
class SeriesChange(Record):
    """A change the rule located: the level before and after (the figure's unit)."""

    run_id: str = ""
    before: float = math.nan
    after: float = math.nan
    p_value: float = math.nan


@dataclass(frozen=True)
class HistorySeries(Record):
    """One model × benchmark × setting under one set of serving flags and request settings."""

    model: str = ""
    benchmark: str = ""
    setting: str = ""
    unit: str = ""
    points: tuple[HistoryPoint, ...] = ()
    changes: tuple[SeriesChange, ...] = ()
    apart: str = ""  # Why this series is not the newest one of its setting ("" if it is).
    note: str = ""  # Why no change was looked for (too few runs), else "".

    @property
    def title(self) -> str:
        return " · ".join(p for p in (self.model, self.benchmark, self.setting) if p)


@dataclass(frozen=True)
class History(Record):
    """A sweep's series in a store."""

    store: str = ""
    sweep: str = ""
    runs: tuple[str, ...] = ()
    series: tuple[HistorySeries, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Run:
    run_id: str
    started_at: str
    commit: str | None
    measurements: list[Measurement]


# --------------------------------------------------------------------------- reading
def sweep_runs(store: Store, sweep: str) -> list[dict[str, Any]]:
    """The store's runs of ``sweep`` in start order; none is a DataError with the fix."""
    runs = store.runs()
    found = [run for run in runs if run["sweep_name"] == sweep]
    if not found:
        held = sorted({str(run["sweep_name"]) for run in runs})
        raise DataError(
            f"{store.path}: no runs of sweep {sweep!r} (it holds "
            f"{', '.join(held) if held else 'no runs'}); pass --sweep with a sweep "
            "it holds, or run pytest benches with --store there first"
        )
    return found


def no_history_line(store: Store, runs: Sequence[Mapping[str, Any]], sweep: str) -> str | None:
    """The one line of a store without history of ``sweep`` (one run), else None."""
    if len(runs) >= 2:
        return None
    return (
        f"no history yet: {store.path} holds one run of sweep {sweep} "
        f"({runs[0]['run_id']}); a history needs two or more"
    )


def _matches(m: Measurement, settings: Mapping[str, str]) -> bool:
    """Whether each ``k=v`` of ``settings`` is one of ``m``'s parameters or serving flags."""
    flags = serving_identity(m.provenance)["serving_flags"]
    return all(str(m.params.get(k, flags.get(k))) == v for k, v in settings.items())


def _like_key(m: Measurement) -> str:
    """What must be alike along a series: serving flags and request settings."""
    return json.dumps(
        {
            "flags": serving_identity(m.provenance)["serving_flags"],
            "requests": RequestSettings.of_measurement(m).settings,
        },
        sort_keys=True,
        default=str,
    )


def _why_apart(old: Measurement, old_run: str, new: Measurement, new_run: str) -> str:
    """One line: how ``old``'s settings differ from the newest series'."""
    a, b = f"run {old_run}", f"run {new_run}"
    flags_a, flags_b = (serving_identity(m.provenance)["serving_flags"] for m in (old, new))
    for key in sorted(set(flags_a) | set(flags_b)):
        if flags_a.get(key) != flags_b.get(key):
            return (
                f"measured under other serving flags: {key} {flags_a.get(key)!r} in {a}, "
                f"{flags_b.get(key)!r} in {b}; a series holds only like measurements"
            )
    return (
        "measured under other request settings: "
        + (
            unlike_requests(
                a, RequestSettings.of_measurement(old), b, RequestSettings.of_measurement(new)
            )
            or "they differ"
        )
        + "; a series holds only like measurements"
    )


def _interval(m: Measurement) -> tuple[float, float] | None:
    """The 95% interval of a run's figure: throughput's over its repeats, accuracy's Wilson
    interval, a cold start's over its launches."""
    stats = m.stats
    return (
        stats.interval
        if isinstance(stats, ThroughputStats)
        else accuracy_interval(m)
        if isinstance(stats, AccuracyStats)
        else stats.first_token_s_interval
        if isinstance(stats, StartupStats)
        else None
    )


def _on_log_scale(m: Measurement) -> bool:
    metric = metric_for(m.benchmark, m.unit)
    return metric is None or metric.kind is not Kind.ACCURACY


def _within_variance(m: Measurement) -> float:
    """The variance of the run's figure from its own repeats, on the change rule's scale."""
    stats = m.stats
    values = (
        stats.repeat_values
        if isinstance(stats, ThroughputStats)
        else stats.first_token_values
        if isinstance(stats, StartupStats)
        else None
    )
    if values is None and (isinstance(stats, AccuracyStats) or not _on_log_scale(m)):
        return m.value * (1 - m.value) / m.n if m.n > 0 and 0 <= m.value <= 1 else math.nan
    logs = [math.log(v) for v in values or () if v > 0]
    if len(logs) < 2:
        return math.nan
    mean = sum(logs) / len(logs)
    return sum((x - mean) ** 2 for x in logs) / (len(logs) - 1) / len(logs)


def _decision(row: GateRow) -> tuple[str, str]:
    """The history's word for a gate row's status, and why (an unjudged row: its status too)."""
    decision = _DECISION_OF.get(row.status)
    if decision is not None:
        return decision, row.note
    if not row.note or row.note.startswith(row.status):
        return UNJUDGED, row.note or row.status
    return UNJUDGED, f"{row.status}: {row.note}"


def read_history(
    store: Store,
    sweep: str,
    *,
    benchmark: str | None = None,
    settings: Mapping[str, str] | None = None,
    thresholds: Thresholds = DEFAULTS.fail_on_regression,
    max_runs: int = MAX_RUNS,
) -> History:
    """The series of ``sweep``'s newest ``max_runs`` runs (of ``benchmark``, ``settings``)."""
    listed = sweep_runs(store, sweep)
    runs = [
        _Run(
            run_id,
            str(row["started_at"]),
            str(project["commit"])
            if isinstance(project, Mapping) and project.get("commit") is not None
            else None,
            list(
                {  # each measurement's latest
                    f"{m.model}\0{m.benchmark}\0{setting_of(m)}": m
                    for m in gateable(measurements_of(store.measurements(run_id)))
                    if (benchmark is None or m.benchmark == benchmark)
                    and _matches(m, settings or {})
                }.values()
            ),
        )
        for row in listed[-max_runs:]
        for run_id in [str(row["run_id"])]
        for project in [store.run(run_id).get("project")]
    ]
    return History(
        str(store.path),
        sweep,
        tuple(r.run_id for r in runs),
        _series(runs, thresholds),
        (f"the newest {max_runs} of {len(listed)} runs",) if len(listed) > max_runs else (),
    )


def _series(runs: Sequence[_Run], thresholds: Thresholds) -> tuple[HistorySeries, ...]:
    """Group the runs' measurements into series, judge each run, locate the changes."""
    members: dict[tuple[str, str, str, str], list[tuple[_Run, Measurement]]] = {}
    decisions: dict[tuple[str, int], tuple[str, str]] = {}
    for run in runs:
        judged: list[tuple[Measurement, Measurement]] = []  # (this run's, the one before it)
        for m in run.measurements:
            line = members.setdefault((m.model, m.benchmark, setting_of(m), _like_key(m)), [])
            if line:
                judged.append((m, line[-1][1]))
            line.append((run, m))
        current = [m for m, _ in judged]
        rows = compare_with_baseline(current, [before for _, before in judged], thresholds)
        decisions.update({(run.run_id, id(m)): _decision(row) for m, row in zip(current, rows)})
    order = {run.run_id: i for i, run in enumerate(runs)}
    newest = {  # the series whose last run is the newest
        key[:3]: line[-1]
        for key, line in sorted(members.items(), key=lambda kv: order[kv[1][-1][0].run_id])
    }
    return tuple(
        _one_series(line, decisions, newest[key[:3]])
        for key, line in sorted(
            members.items(), key=lambda kv: (kv[0][:3], -order[kv[1][-1][0].run_id])
        )
    )


def _one_series(
    line: Sequence[tuple[_Run, Measurement]],
    decisions: Mapping[tuple[str, int], tuple[str, str]],
    newest: tuple[_Run, Measurement],
) -> HistorySeries:
    """A series of like measurements, each run judged against the one before it, its
    changes located; ``newest``: the last run of the newest series of its setting."""
    first, (last_run, last), (newest_run, newest_m) = line[0][1], line[-1], newest
    log = _on_log_scale(first)
    points = [
        HistoryPoint(
            run.run_id,
            run.started_at,
            run.commit,
            _text(m.provenance.get("image_digest")),
            m.value,
            None if interval is None else interval[0],
            None if interval is None else interval[1],
            *decisions.get(
                (run.run_id, id(m)),
                (
                    UNJUDGED,
                    "the first run of this series: nothing earlier to compare with"
                    if i == 0
                    else "not judged",
                ),
            ),
        )
        for i, (run, m) in enumerate(line)
        for interval in [_interval(m)]
    ]
    changes, values = [], [p.value for p in points]
    note = (
        f"{len(points)} run{'s' if len(points) != 1 else ''}: the change rule needs "
        f"{MIN_RUNS} or more"
        if len(points) < MIN_RUNS
        else "a figure of 0 or less: no change looked for"
        if log and any(not v > 0 for v in values)
        else "a figure without a value: no change looked for"
        if any(not math.isfinite(v) for v in values)
        else ""
    )
    if not note:
        for change in change_points(
            [math.log(v) for v in values] if log else values,
            [_within_variance(m) for _, m in line],
        ):
            before, after = (
                (math.exp(change.before), math.exp(change.after))
                if log
                else (change.before, change.after)
            )
            changes.append(SeriesChange(points[change.index].run_id, before, after, change.p_value))
            points[change.index] = replace(points[change.index], change=True)
    return HistorySeries(
        first.model,
        first.benchmark,
        shown_setting_of(first),
        first.unit,
        tuple(points),
        tuple(changes),
        ""
        if newest_run is last_run
        else _why_apart(last, last_run.run_id, newest_m, newest_run.run_id),
        note,
    )


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


# --------------------------------------------------------------------------- text
def _short(text: str | None, size: int = 12) -> str:
    if not text:
        return "-"
    algorithm, _, value = text.rpartition(":")
    return f"{algorithm}:{value[:size]}" if algorithm else text[:size]


def changes_line(series: HistorySeries) -> str:
    """``changes: at run R: 100.0 → 25.0 tokens/s (0.25×, p=0.0001)`` or why there are none."""
    if series.note:
        return f"changes: none looked for ({series.note})"
    if not series.changes:
        return "changes: none beyond run-to-run noise"
    return "changes: " + "; ".join(
        f"at run {c.run_id}: {format_value(c.before)} → {format_value(c.after)} {series.unit} "
        f"({(c.after / c.before if c.before else math.nan):.2f}×, p={c.p_value:.3g})"
        for c in series.changes
    )


def series_table(series: HistorySeries) -> Table:
    """A series as a table: a row per run, oldest first."""
    return Table(
        f"{series.title} ({series.unit})" + (", apart" if series.apart else ""),
        [
            "run",
            "started",
            "commit",
            "image",
            series.unit or "value",
            "95% interval",
            "gate",
            "change",
        ],
        [
            [
                p.run_id,
                p.started_at,
                _short(p.commit, 10),
                _short(p.image_digest),
                format_value(p.value),
                "-"
                if p.low is None or p.high is None
                else f"[{format_value(p.low)}, {format_value(p.high)}]",
                p.decision + (f" ({p.why})" if p.decision == UNJUDGED and p.why else ""),
                "CHANGE" if p.change else "",
            ]
            for p in series.points
        ],
        kind="history",
        notes=[changes_line(series)] + ([f"apart: {series.apart}"] if series.apart else []),
    )


def history_markdown(history: History) -> str:
    """The history as Markdown: a heading, the rule's line, a table per series."""
    lines = [
        f"# modelsweep history: sweep {escape_markdown(history.sweep)}",
        "",
        escape_markdown(
            f"{len(history.runs)} runs in {history.store}"
            + "".join(f"; {n}" for n in history.notes)
            + ". "
            + RULE_LINE
        ),
        "",
        *(
            []
            if history.series
            else ["No gated measurement (accuracy, throughput, startup) matches.", ""]
        ),
        *(
            line
            for table in map(series_table, history.series)
            for line in (
                f"## {escape_markdown(table.title)}",
                "",
                *markdown_table(table),
                "",
                *(escape_markdown(note) + "  " for note in table.notes),
                "",
            )
        ),
    ]
    return "\n".join(lines)


def history_json(history: History) -> str:
    return json.dumps(history.to_dict(), indent=1, default=str) + "\n"


# --------------------------------------------------------------------------- HTML
def series_plot(series: HistorySeries) -> str | None:
    """The figure across runs coloured by the gate's decision; None without matplotlib."""
    if not matplotlib_available() or not series.points:
        return None
    times = [_time(p.started_at, i).timestamp() / 3600 for i, p in enumerate(series.points)]
    figure, axes = _new_figure(7.5, 3.6)
    for decision, colour in _COLOURS.items():
        shown = [(t, p) for t, p in zip(times, series.points) if p.decision == decision]
        if shown:
            ys = [p.value for _, p in shown]
            axes.errorbar(
                [t for t, _ in shown],
                ys,
                yerr=error_bars(ys, [p.low for _, p in shown], [p.high for _, p in shown]),
                fmt="o",
                capsize=3,
                color=colour,
                label=decision,
            )
    changes = [i for i, p in enumerate(series.points) if p.change]
    for a, b in itertools.pairwise([0, *changes, len(times)]):
        values = [p.value for p in series.points[a:b]]
        if values:
            axes.hlines(
                sum(values) / len(values), times[a], times[b - 1], color="#0969da", linewidth=1
            )
    for i in changes:
        axes.axvline(
            times[i - 1] + (times[i] - times[i - 1]) / 2,
            color="#cf222e",
            linestyle="--",
            linewidth=1,
        )
    axes.set_xticks(
        times,
        [
            _label(
                f"{p.started_at[5:16].replace('T', ' ')}\n"
                f"{_short(p.commit, 7)}\n{_short(p.image_digest, 8)}"
            )
            for p in series.points
        ],
        fontsize=6,
        rotation=90,
    )
    axes.set_ylabel(_label(series.unit))
    axes.set_title(_label(series.title), fontsize=9, loc="left")
    _style(axes, legend=7)
    return _svg(figure)


def _time(text: str, index: int) -> datetime:
    """A run's start (its place in the series where the store kept no time)."""
    try:
        started = datetime.fromisoformat(text)
        return started if started.tzinfo else started.replace(tzinfo=UTC)
    except ValueError:
        return datetime.fromtimestamp(index, UTC)


def history_html(history: History) -> str:
    """The history as an HTML section (plots inline as SVG images, a table per series)."""
    from .html import _NO_PLOTS, _figure, escape_text, table_html

    heading = (
        f"sweep {history.sweep}: {len(history.runs)} runs in {history.store}"
        + "".join(f"; {note}" for note in history.notes)
        + ". "
        + RULE_LINE
    )
    return (
        f'{_SECTION}<p class="ms-notes">{escape_text(heading)}</p>'
        + ("" if matplotlib_available() else _NO_PLOTS)
        + "".join(
            f'<div class="ms-history-series" data-series="{escape_text(series.title)}">'
            + _figure(
                svg,
                f"{series.title} across runs",
                changes_line(series),
                what=f"the plot of {series.title}",
            )
            + table_html(series_table(series))
            + "</div>"
            for series in history.series
            for svg in [drawn(lambda: series_plot(series))]  # noqa: B023 (called at once)
        )
        + "</section>"
    )


def history_document(history: History) -> str:
    """A standalone page of the history."""
    from .html import CSS

    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(f'modelsweep history: sweep {history.sweep}')}</title>"
        f"<style>{CSS}</style></head>"
        f'<body style="margin: 16px 24px; background: #fff;">{history_html(history)}'
        "</body></html>\n"
    )


def history_section(store: Store, sweep: str) -> str:
    """The pytest-html report's History section ("" with fewer than two runs of ``sweep``)."""
    from .html import escape_text

    try:
        runs = [run for run in store.runs() if run["sweep_name"] == sweep]
        return history_html(read_history(store, sweep)) if len(runs) >= 2 else ""
    except ModelsweepError as error:  # the report is written all the same
        return f'{_SECTION}<p class="ms-notes">no history: {escape_text(error)}</p></section>'
