"""The run's summary in HTML: a pytest-html section, per-test extras, a standalone file.

Every text from a model, a sweep or a results file is escaped; the only markup is this module's.
Plots are SVG ``data:`` images: the page needs no other file and no plot can run script in it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from html import escape
from typing import Any

from ..core.measurements import (
    RATE,
    AccuracyVerdictStats,
    Measurement,
    SearchStats,
    ServerMetricsWindow,
    StartupStats,
    ThroughputStats,
)
from ..core.records import RequestRecord
from ..store.results import FailedTest, RunInfo
from ..workloads.throughput import latency_ms
from .decision.build import decision_page
from .decision.layout import (
    Block,
    cell_lines,
    figure_lines,
    pareto_line,
    table_columns,
    unmeasured_line,
    unplaced_line,
)
from .decision.page import FIGURES_TITLE, Cell, Column, DecisionRow, Pareto
from .plots import (
    MATPLOTLIB_HINT,
    NotDrawn,
    drawn,
    matplotlib_available,
    pareto_plot,
    summary_plots,
)
from .tables import (
    LATENCY_NAMES,
    LATENCY_QUANTITIES,
    NA,
    TEXT_COLUMNS,
    Measurements,
    Setting,
    Table,
    ThroughputRow,
    finite,
    format_goodput,
    format_ms,
    format_percent,
    format_points,
    format_rate,
    format_ratio,
    format_usd,
    format_value,
    latency_figure,
    measurement_kind,
    provenance_line,
    records,
    request_latencies,
    run_title,
    stats_of,
    summary_tables,
    throughput_row,
)

SUMMARY_TITLE = "modelsweep summary"
DECISION_TITLE = "Decision: which model to serve"
MAX_ITEMS = 5
MAX_RESPONSE_CHARS = 1500

CSS = """
.modelsweep { color: #24292f; font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  font-size: 13px; line-height: 1.45; margin: 16px 0; }
.modelsweep h2 { font-size: 18px; margin: 8px 0 4px; color: #24292f; }
.modelsweep h3 { font-size: 14px; margin: 18px 0 6px; color: #24292f; }
.modelsweep h4 { font-size: 13px; margin: 10px 0 4px; color: #24292f; }
.modelsweep .ms-title { font-weight: 600; margin: 2px 0; }
.modelsweep .ms-provenance { color: #57606a; margin: 2px 0 10px; }
.modelsweep table.ms-table { border-collapse: collapse; margin: 4px 0; background: #fff; }
.modelsweep table.ms-table th, .modelsweep table.ms-table td { border: 1px solid #d0d7de;
  padding: 3px 8px; text-align: right; vertical-align: top; }
.modelsweep table.ms-table th { background: #f6f8fa; font-weight: 600; }
.modelsweep table.ms-table td.ms-text, .modelsweep table.ms-table th.ms-text { text-align: left; }
.modelsweep .ms-notes { color: #57606a; font-size: 12px; margin: 2px 0 8px; }
.modelsweep .ms-verdict { font-weight: 700; text-transform: uppercase; }
.modelsweep .ms-verdict-better { color: #1a7f37; }
.modelsweep .ms-verdict-worse { color: #cf222e; }
.modelsweep .ms-verdict-matches { color: #57606a; }
.modelsweep .ms-verdict-equivalent { color: #0969da; }
.modelsweep .ms-verdict-inconclusive { color: #bf8700; }
.modelsweep .ms-plots { display: flex; flex-wrap: wrap; gap: 12px; }
.modelsweep figure.ms-plot { margin: 4px 0; }
.modelsweep figure.ms-plot img { max-width: 720px; width: 100%; height: auto; border: 1px solid #d0d7de; }
.modelsweep figure.ms-plot figcaption { color: #57606a; font-size: 12px; }
.modelsweep pre.ms-response { white-space: pre-wrap; word-break: break-word; margin: 0;
  max-height: 16em; overflow: auto; font-family: ui-monospace, Menlo, Consolas, monospace;
  font-size: 12px; text-align: left; }
.modelsweep dl.ms-kv { display: grid; grid-template-columns: repeat(3, minmax(220px, max-content));
  gap: 2px 24px; margin: 4px 0; }
.modelsweep dl.ms-kv div { display: flex; gap: 8px; border-bottom: 1px solid #eaeef2; }
.modelsweep dl.ms-kv dt { font-weight: 600; min-width: 110px; }
.modelsweep dl.ms-kv dd { margin: 0; word-break: break-word; }
.modelsweep details { margin: 6px 0; }
.modelsweep summary { cursor: pointer; }
.modelsweep .ms-answer { font-size: 14px; font-weight: 600; margin: 4px 0 8px; padding: 6px 10px;
  background: #ddf4ff; border-left: 4px solid #0969da; max-width: 1100px; }
.modelsweep table.ms-decision-table { font-size: 12px; font-variant-numeric: tabular-nums; }
.modelsweep table.ms-decision-table th { vertical-align: bottom; padding: 4px 6px; }
.modelsweep table.ms-decision-table th .ms-parts { display: block; font-weight: 400;
  font-size: 11px; color: #57606a; }
.modelsweep table.ms-decision-table td { padding: 4px 6px; }
.modelsweep table.ms-decision-table .ms-part { white-space: pre; }
.modelsweep table.ms-decision-table .ms-lines { display: grid; column-gap: 8px;
  grid-template-columns: max-content max-content max-content; }
.modelsweep table.ms-decision-table .ms-lines .ms-wide { grid-column: span 2; }
.modelsweep table.ms-decision-table .ms-label { color: #57606a; }
.modelsweep table.ms-decision-table .ms-part.ms-why { color: #57606a; font-style: italic; }
.modelsweep table.ms-decision-table td.ms-model { font-weight: 600; white-space: nowrap; }
.modelsweep table.ms-decision-table .ms-role { display: block; font-weight: 400; font-size: 11px;
  color: #57606a; }
.modelsweep table.ms-decision-table td.ms-flags { min-width: 100px; max-width: 220px;
  color: #57606a; font-size: 11px; }
.modelsweep table.ms-decision-table tr.ms-reference td { background: #f6f8fa; }
.modelsweep ul.ms-column-notes { margin-top: 8px; }
.modelsweep details.ms-figures { color: #57606a; font-size: 12px; }
.modelsweep ul.ms-reasons { list-style: none; padding: 0; margin: 4px 0; color: #57606a;
  font-size: 12px; }
"""

_TEXT_COLUMNS = TEXT_COLUMNS | {"value"}


def escape_text(value: object) -> str:
    """Escaped text for an element's content or a quoted attribute."""
    return escape(str(value), quote=True)


# --------------------------------------------------------------------------- tables and plots
def table_html(table: Table) -> str:
    """A :class:`Table` as an HTML table with its title and notes."""
    classes = ["ms-text" if c in _TEXT_COLUMNS else "ms-num" for c in table.columns]
    head = "".join(f'<th class="{k}">{escape_text(c)}</th>' for c, k in zip(table.columns, classes))
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{classes[i] if i < len(classes) else "ms-num"}'
            f'{f" ms-verdict ms-verdict-{escape_text(cell)}" if i == table.status_column else ""}">'
            f"{escape_text(cell)}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in table.rows
    )
    return (
        f'<div class="ms-table-block" data-kind="{escape_text(table.kind)}">'
        f'<h3>{escape_text(table.title)}</h3><table class="ms-table"><thead><tr>{head}</tr>'
        f"</thead><tbody>{body}</tbody></table>{_notes('; '.join(table.notes))}</div>"
    )


_NO_PLOTS = f'<p class="ms-notes ms-no-plots">{escape(MATPLOTLIB_HINT, quote=True)}</p>'


def _figure(
    svg: str | NotDrawn | None, alt: str, caption: str, kind: str = "ms-plot", what: str = ""
) -> str:
    """An SVG plot as an inline image (alt text ``alt``) with its caption; the note saying
    why ``what`` could not be drawn; "" without a plot."""
    if isinstance(svg, NotDrawn):
        return not_drawn_html(what, svg)
    if not svg:
        return ""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return (
        f'<figure class="{kind}"><img alt="{escape_text(alt)}" src="data:image/svg+xml;base64,'
        f'{data}"><figcaption>{escape_text(caption)}</figcaption></figure>'
    )


def not_drawn_html(what: str, failure: NotDrawn) -> str:
    """The note in place of a plot or section that could not be drawn."""
    return (
        f'<p class="ms-notes ms-not-drawn">{escape_text(what)} could not be drawn '
        f"({escape_text(failure.why)}); the measurements are kept in the results file and "
        "the store</p>"
    )


def section_or_note(title: str, make: Callable[[], str]) -> str:
    """``make()``, a report section, or a note saying it could not be drawn: a section never
    fails a run whose tests passed."""
    made = drawn(make)
    if isinstance(made, NotDrawn):
        return (
            f'<section class="modelsweep"><h2>{escape_text(title)}</h2>'
            f"{not_drawn_html(f'the section {title}', made)}</section>"
        )
    return made


def _decision_part(column: Column, cell: Cell, wide: bool = False) -> str:
    """One part of a cell: a verdict word (styled), a figure, or why there is none; ``wide``:
    it spans two parts of its line."""
    kind = ("ms-part ms-wide" if wide else "ms-part") + (
        " ms-why"
        if cell.why
        else f" ms-verdict ms-verdict-{escape_text(cell.verdict)}"
        if column.verdict and cell.verdict
        else ""
    )
    tip = cell.why or " — ".join(part for part in (cell.detail, cell.tip) if part)
    title = f' title="{escape_text(tip)}"' if tip else ""
    return (
        f'<div class="{kind}" data-column="{escape_text(column.title)}"{title}>'
        f"{escape_text(cell.shown)}</div>"
    )


def _decision_cell(block: Block, row: DecisionRow) -> str:
    """A row's cell in a table column: a line per part, or (several groups) a grid of lines."""
    lines = cell_lines(block, row)
    inner = (
        '<div class="ms-lines">'
        + "".join(
            f'<span class="ms-label">{escape_text(line.label)}</span>'
            + "".join(_decision_part(c, cell, wide=len(line.parts) == 1) for c, cell in line.parts)
            for line in lines
        )
        + "</div>"
        if block.several
        else "".join(_decision_part(*line.parts[0]) for line in lines)
    )
    return f'<td class="ms-text" data-group="{escape_text(block.title)}">{inner}</td>'


def _decision_row(blocks: Sequence[Block], row: DecisionRow) -> str:
    role = '<span class="ms-role">reference</span>' if row.is_reference else ""
    cells = "".join(_decision_cell(block, row) for block in blocks)
    flags = "".join(f"<div>{escape_text(flag)}</div>" for flag in row.flags)
    return (
        f'<tr class="{"ms-reference" if row.is_reference else "ms-candidate"}" '
        f'data-model="{escape_text(row.model)}"><td class="ms-text ms-model" '
        f'data-column="model">{escape_text(row.model)}{role}</td>{cells}'
        f'<td class="ms-text ms-flags" data-column="flags">{flags}</td></tr>'
    )


def decision_html(
    measurements: Measurements, run: RunInfo, failures: Sequence[FailedTest] = ()
) -> str:
    """The decision page (answer, table, reasons, Pareto plot); "" when the run has no candidate."""
    page = decision_page(measurements, run, failures)
    if page is None:
        return ""
    blocks = table_columns(page)
    head = "".join(
        f'<th class="ms-text" data-group="{escape_text(b.title)}">{escape_text(b.title)}'
        f'<span class="ms-parts">{escape_text(b.parts)}</span></th>'
        for b in blocks
    )
    rows = "".join(_decision_row(blocks, row) for row in page.rows)
    reasons = "".join(
        f'<li data-note="{i}">[{i}] {escape_text(why)}</li>'
        for i, why in enumerate(page.reasons, 1)
    )
    figures = "".join(f"<li>{escape_text(line)}</li>" for line in figure_lines(page))
    parts = [
        f'<section class="modelsweep" id="modelsweep-decision"><h2>{escape_text(DECISION_TITLE)}</h2>',
        f'<p class="ms-answer">{escape_text(page.answer)}</p>',
        (
            f'<table class="ms-table ms-decision-table"><thead><tr><th class="ms-text">model</th>'
            f'{head}<th class="ms-text">flags</th></tr></thead><tbody>{rows}</tbody></table>'
        ),
        _notes(unplaced_line(page)),
        _notes(unmeasured_line(page)),
        f'<ul class="ms-reasons">{reasons}</ul>' if reasons else "",
        '<ul class="ms-reasons ms-column-notes">'
        + "".join(f"<li>{escape_text(note)}</li>" for note in page.notes)
        + "</ul>"
        if page.notes
        else "",
        (
            f'<details class="ms-figures"><summary>{escape_text(FIGURES_TITLE)}</summary>'
            f'<ul class="ms-reasons">{figures}</ul></details>'
            if figures
            else ""
        ),
        _notes(pareto_line(page)),
    ]
    if isinstance(page.pareto, Pareto):
        description = (
            f"Pareto plot: {page.pareto.y_label} against "
            f"{page.pareto.x_label}, one point per candidate"
        )
        parts.append(
            _figure(
                drawn(partial(pareto_plot, page.pareto)),
                description,
                description,
                "ms-plot ms-pareto",
                "the Pareto plot",
            )
            if matplotlib_available()
            else _NO_PLOTS
        )
    return "".join(parts) + "</section>"


def summary_html(measurements: Measurements, run: RunInfo) -> str:
    """The "modelsweep summary" section: heading, provenance, tables, plots (with its CSS)."""
    tables = summary_tables(measurements, reference=run.reference)
    plots = summary_plots(measurements, run.reference)
    return "".join(
        [
            f"<style>{CSS}</style>",
            f'<section class="modelsweep" id="modelsweep-summary"><h2>{escape_text(SUMMARY_TITLE)}</h2>',
            f'<p class="ms-title">{escape_text(run_title(run))}</p>',
            f'<p class="ms-provenance">{escape_text(provenance_line(measurements, run))}</p>',
            "" if tables else '<p class="ms-notes">No measurements were recorded.</p>',
            *(table_html(t) for t in tables),
            _NO_PLOTS
            if plots is None
            else ""
            if not plots
            else (
                '<h3>Plots</h3><div class="ms-plots">'
                + "".join(
                    _figure(
                        p.svg,
                        p.description,
                        f"{p.title}: {p.description}",
                        what=f"the plot {p.title}",
                    )
                    for p in plots
                )
                + "</div>"
            ),
            "</section>",
        ]
    )


# --------------------------------------------------------------------------- one measurement
def _figures(stats: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A record's figures as its details list them: a benchmark's own ``figures`` beside the
    record's, and none that is unset."""
    return [
        pair
        for k, v in stats.items()
        for pair in (v.items() if k == "figures" and isinstance(v, Mapping) else [(k, v)])
        if pair[1] is not None
    ]


def _compact(value: Any) -> str:
    if isinstance(value, float):
        return format_value(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return "" if value is None else str(value)


def _key_value_table(rows: Sequence[tuple[str, str]]) -> str:
    """Name-value pairs as a definition list, laid out three pairs to a line."""
    return (
        '<dl class="ms-kv">'
        + "".join(f"<div><dt>{escape_text(k)}</dt><dd>{escape_text(v)}</dd></div>" for k, v in rows)
        + "</dl>"
    )


def _grid(columns: Sequence[str], rows: Sequence[Sequence[str]], raw_last: bool = False) -> str:
    """A plain table; ``raw_last``: the last cell is markup built here from escaped text."""
    head = "".join(f'<th class="ms-text">{escape_text(c)}</th>' for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="ms-text">{cell if raw_last and i == len(row) - 1 else escape_text(cell)}</td>'
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f'<table class="ms-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _titled_grid(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A :func:`_grid` under its heading; "" without rows."""
    return f"<h4>{title}</h4>" + _grid(columns, rows) if rows else ""


def _notes(text: str) -> str:
    return f'<p class="ms-notes">{escape_text(text)}</p>' if text else ""


def _latency_table(row: ThroughputRow) -> str:
    """The latency table of a throughput setting."""
    caption = (
        f"over all {row.latency['e2e'].n:,} timed requests of the setting"
        if row.latency_source == "requests" and row.latency["e2e"].n
        else "median over repeats of each repeat's figure"
        if row.latency_source == "repeats" and len(row.stats.repeat_values) > 1
        else ""
    )
    rows = [
        [name.upper(), *map(format_ms, figures)]
        for name in LATENCY_NAMES
        for figures in [[latency_figure(row.latency[name], q) for q in LATENCY_QUANTITIES]]
        if any(v is not None for v in figures)
    ]
    return (
        f"<h4>Latency (ms)</h4>{_notes(caption)}" + _grid(["", *LATENCY_QUANTITIES], rows)
        if rows
        else ""
    )


def server_text(window: ServerMetricsWindow | None) -> str:
    """A window's server metrics in a few words: ``running ≤ 4 (mean 3.2), waiting ≤ 26``."""
    if window is None:
        return "not sampled"
    if window.unavailable:
        return window.unavailable
    summary = window.summary
    parts = [
        *(
            f"{name} ≤ {gauge.max:g} (mean {gauge.mean:.1f})"
            for name, gauge in (("running", summary.running), ("waiting", summary.waiting))
            if gauge is not None
        ),
        ""
        if summary.kv_cache_usage is None
        else f"KV cache ≤ {100 * summary.kv_cache_usage.max:.0f}%",
        "absent: " + ", ".join(sorted(summary.absent)) if summary.absent else "",
        "; ".join(summary.ignored[name] for name in sorted(summary.ignored))
        if summary.ignored
        else "",
    ]
    flag = summary.flag_line()
    return (
        "; ".join(part for part in parts if part)
        + (f"; {flag}" if flag else "")
        + f" ({summary.samples} samples)"
    )


def _repeats_table(row: ThroughputRow) -> str:
    """One line per timed window of a throughput setting."""
    goodput, cost, looped = row.has_goodput, row.stats.cost is not None, row.open_loop
    lines = [
        [
            str(i + 1),
            format_rate(w.output_tokens_per_s),
            f"{w.duration_s:,.2f}",
            str(w.completed),
            NA if fidelity is None else f"{fidelity:.4f}",
            *(
                [
                    f"{format_goodput(saturation and saturation.offered_rps)} / "
                    f"{format_goodput(saturation and saturation.achieved_rps)}"
                    + (" saturated" if saturation is not None and saturation.saturated else "")
                ]
                if looped
                else []
            ),
            *(
                [
                    format_goodput(w.goodput and w.goodput.goodput_rps),
                    format_percent(w.goodput and w.goodput.slo_attainment),
                ]
                if goodput
                else []
            ),
            *([format_usd(w.usd_per_million_output_tokens)] if cost else []),
            format_ms(w.ttft.p50_ms),
            format_ms(w.tpot.p50_ms),
            ("contended" if w.contended else "") + (f" ({contention})" if contention else ""),
            server_text(w.server_metrics),
        ]
        for i, w in enumerate(row.stats.repeats)
        for contention in [
            ", ".join(f"{k} {_compact(v)}" for k, v in w.contention.to_dict().items())
        ]
        for fidelity in [finite(w.fidelity)]
        for saturation in [w.open_loop.saturation if w.open_loop is not None else None]
    ]
    return _titled_grid(
        "Repeats",
        [
            "repeat",
            "tokens/s",
            "duration (s)",
            "completed",
            "fidelity",
            *(["offered / achieved (req/s)"] if looped else []),
            *(["goodput (req/s)", "SLO attainment"] if goodput else []),
            *(["$/1M output tokens"] if cost else []),
            "TTFT p50 (ms)",
            "TPOT p50 (ms)",
            "contention",
            "server",
        ],
        lines,
    )


def _steps_table(m: Measurement) -> str:
    """One line per step of a capacity search or rate sweep, one per launch of a cold start."""
    stats = m.stats
    if isinstance(stats, SearchStats) and stats.knob == RATE:
        return _titled_grid(
            "Steps",
            [
                "rate (req/s)",
                "outcome",
                "SLO attainment",
                "offered / achieved (req/s)",
                "tokens/s",
                "TTFT p99 (ms)",
                "server",
            ],
            [
                [
                    f"{step.rate:.3g}",
                    str(step.outcome),
                    NA if step.interval is None else step.interval.text(),
                    f"{format_goodput(step.offered_rps)} / {format_goodput(step.achieved_rps)}",
                    format_rate(step.output_tokens_per_s),
                    NA if step.recorded is None else format_ms(step.recorded.ttft.p99_ms),
                    server_text(step.recorded.server_metrics if step.recorded else None),
                ]
                for step in stats.steps
            ],
        )
    if isinstance(stats, SearchStats):
        return _titled_grid(
            "Steps",
            ["concurrency", "outcome", "SLO attainment", "tokens/s", "server"],
            [
                [
                    f"c{step.concurrency}",
                    "pass" if step.passed else "miss",
                    format_percent(step.slo_attainment),
                    format_rate(step.output_tokens_per_s),
                    server_text(step.recorded.server_metrics if step.recorded else None),
                ]
                for step in stats.steps
            ],
        )
    if isinstance(stats, StartupStats):
        return _titled_grid(
            "Launches",
            ["launch", "ready (s)", "first token (s)", "cache", "error"],
            [
                [
                    str(c.launch),
                    f"{c.ready_s:.2f}",
                    NA if c.first_token_s is None else f"{c.first_token_s:.2f}",
                    c.cache.detail,
                    c.error or "",
                ]
                for c in stats.launches
            ],
        )
    return ""


_LISTED = ("steps", "launches")  # statistics shown as a table of their own (_steps_table)
_SHOWN = {
    "repeat_values",
    "repeats",
    "cv",
    "unstable",
    "contended",
    "contended_windows",
    "slo",
    "goodput_rps",
    "slo_attainment",
    "pricing",
    "usd_per_million_output_tokens",
    "usd_per_million_output_tokens_interval",
}
"""What :func:`_throughput_scalars` shows of a throughput record before its other figures."""


def _throughput_scalars(row: ThroughputRow) -> list[tuple[str, str]]:
    """The setting's own figures from the reader, then its other scalar statistics."""
    fidelity, cost = row.fidelity, row.stats.cost
    return [
        ("tokens/s (mean)", format_rate(row.mean)),
        *((name, str(row.cells[name])) for name in ("range", "repeats")),
        ("CV", format_percent(row.stats.cv)),
        ("fidelity (lowest)", NA if fidelity is None else f"{fidelity:.4f}"),
        *([("flags", str(row.cells["flags"]))] if row.cells["flags"] else []),
        *(
            [
                ("SLO", str(row.stats.goodput and row.stats.goodput.slo)),
                *((name, str(row.cells[name])) for name in ("goodput (req/s)", "SLO attainment")),
            ]
            if row.has_goodput
            else []
        ),
        *(
            [
                ("$/1M output tokens", str(row.cells["$/1M output tokens"])),
                ("price", cost.pricing.describe()),
            ]
            if cost is not None
            else []
        ),
        *(
            (k, _compact(v))
            for k, v in _figures(row.stats.to_dict())
            if k not in _SHOWN and not (k in LATENCY_NAMES and isinstance(v, dict))
        ),
    ]


def request_summary(requests: Sequence[RequestRecord]) -> list[tuple[str, str]]:
    """Counts and latencies of a measurement's request records."""
    if not requests:
        return []
    errors, latencies = [r for r in requests if r.error], request_latencies(requests)
    completion = [r.completion_tokens for r in requests if r.completion_tokens is not None]
    return [
        ("requests", str(len(requests))),
        ("failed", str(len(errors))),
        *(
            (
                f"{label} mean / p50 / p99 (ms)",
                " / ".join(f"{v:,.1f}" for v in (s.mean_ms, s.p50_ms, s.p99_ms)),
            )
            for label, name in (("latency", "e2e"), ("TTFT", "ttft"))
            if (s := latency_ms(latencies[name])).n
        ),
        *([("completion tokens", f"{sum(completion):,}")] if completion else []),
        *([("first error", str(errors[0].error))] if errors else []),
    ]


def _items_table(m: Measurement) -> str:
    rows = [
        [
            item.item_id,
            "yes" if item.correct else "no",
            _compact(item.extracted),
            item.finish_reason or "",
            "" if item.completion_tokens is None else str(item.completion_tokens),
            item.error or "",
            '<pre class="ms-response">'
            + escape_text(
                item.response[:MAX_RESPONSE_CHARS]
                + (
                    f"\n… ({len(item.response) - MAX_RESPONSE_CHARS:,} more characters)"
                    if len(item.response) > MAX_RESPONSE_CHARS
                    else ""
                )
            )
            + "</pre>",
        ]
        for item in m.item_records()[:MAX_ITEMS]
    ]
    return f"<h4>First {len(rows)} of {len(m.items):,} items (raw responses)</h4>" + _grid(
        ["item", "correct", "extracted", "finish", "tokens", "error", "response"],
        rows,
        raw_last=True,
    )


def headline(m: Measurement) -> str:
    """One line for a measurement: ``gsm8k 41.2% (n=50)``, ``throughput 1,234.5 tokens/s (c=16)``."""
    setting, verdict = Setting.of(m), stats_of(m, AccuracyVerdictStats).verdict
    prompt = "" if setting.prompt_tokens is None else f", {setting.prompt_tokens} prompt"
    return {
        "accuracy": f"{m.benchmark} {format_percent(m.value)} (n={m.n})",
        "verdicts": f"{m.benchmark} {str(verdict or NA).upper()} {format_points(m.value)} (n={m.n})",
        "throughput": f"{m.benchmark} {format_rate(m.value)} tokens/s (c={setting.concurrency}{prompt})",
        "throughput_ratio": f"{m.benchmark} {format_ratio(m.value)} (c={setting.concurrency})",
    }.get(measurement_kind(m), f"{m.benchmark} {format_value(m.value)} {m.unit}".strip())


_ENDPOINT = (
    "server_name",
    "server_version",
    "served_name",
    "model_source",
    "model_sha256",
    "model_revision",
    "image_digest",
    "image_pinned",
    "how",
    "flag_sources",
    "server_process",
    "observed",
)


def measurement_html(m: Measurement) -> str:
    """The details of one measurement: parameters, statistics, requests, first items."""
    row = throughput_row(m) if isinstance(m.stats, ThroughputStats) else None
    scalars = (
        _throughput_scalars(row)
        if row
        else [
            (k, _compact(v))
            for k, v in _figures(m.stats.to_dict())
            if not (k in LATENCY_NAMES and isinstance(v, dict)) and k not in _LISTED
        ]
    )
    endpoint = [
        (k, _compact(m.provenance[k])) for k in _ENDPOINT if m.provenance.get(k) not in (None, "")
    ]
    return "".join(
        [
            f"<h4>{escape_text(m.model)} · {escape_text(headline(m))}</h4>",
            _key_value_table([(str(k), _compact(v)) for k, v in m.params.items()])
            if m.params
            else "",
            "<h4>Statistics</h4>" + _key_value_table(scalars) if scalars else "",
            _latency_table(row) + _repeats_table(row) if row else _steps_table(m),
            "<h4>Requests</h4>" + _key_value_table(request_summary(m.request_records()))
            if m.requests
            else "",
            _items_table(m) if m.items else "",
            "<h4>Endpoint</h4>" + _key_value_table(endpoint) if m.provenance else "",
        ]
    )


def measurements_extra_html(measurements: Measurements) -> str:
    """The HTML extra of one test: the details of each measurement it recorded."""
    return (
        '<div class="modelsweep ms-test-extra">'
        + "".join(measurement_html(m) for m in measurements)
        + "</div>"
    )


def measurement_json(m: Measurement) -> dict[str, Any]:
    """A measurement for a JSON extra: everything but items and requests (counted instead)."""
    return {
        **{k: v for k, v in m.to_dict().items() if k not in ("items", "requests")},
        "item_count": len(m.items),
        "request_count": len(m.requests),
    }


# --------------------------------------------------------------------------- standalone file
def html_document(
    measurements: Iterable[Measurement | Mapping[str, Any]],
    run: Mapping[str, Any],
    failures: Iterable[Mapping[str, Any]] = (),
) -> str:
    """A standalone HTML page of a results file: decision page, summary, each measurement."""
    found, info = records(measurements), RunInfo.of(run)
    details = "".join(
        f"<details><summary>{escape_text(m.model)} · {escape_text(headline(m))}</summary>"
        f"{measurement_html(m)}</details>"
        for m in found
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape_text(run_title(info))}</title></head>"
        '<body style="margin: 16px 24px; background: #fff;">'
        + section_or_note(
            DECISION_TITLE, lambda: decision_html(found, info, [FailedTest.of(f) for f in failures])
        )
        + section_or_note(SUMMARY_TITLE, lambda: summary_html(found, info))
        + f'<section class="modelsweep" id="modelsweep-details"><h2>Measurements</h2>{details}'
        '<p class="ms-notes">generated '
        + escape_text(datetime.now(UTC).isoformat(timespec="seconds"))
        + " by pytest-modelsweep</p></section>"
        "</body></html>\n"
    )
