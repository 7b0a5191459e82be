"""The run's summary in HTML: a pytest-html section, per-test extras, a standalone file.

Every piece of text that came from a model, a sweep file or a results file
(model names, responses, parameters, error messages) goes through
:func:`html.escape`; the only markup here is this module's own. Plots are
SVG documents embedded as ``data:`` images, so the page needs no other file
and nothing inside a plot can run script in the page.

Pure: pytest-html's hooks that place these pieces in its report live in the
pytest layer (``pytest/html_hooks.py``); :func:`write_html_report` (the
``modelsweep report`` CLI) needs neither pytest-html nor a pytest session.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from statistics import fmean, median
from typing import Any

from ..core.records import Completion, shown_answer
from .decision import (
    DecisionPage,
    decision_page,
    pareto_line,
    unmeasured_line,
    unplaced_line,
)
from .plots import MATPLOTLIB_HINT, matplotlib_available, pareto_plot, summary_plots
from .tables import (
    NA,
    LatencyFigures,
    Table,
    format_flags,
    format_goodput,
    format_ms,
    format_percent,
    format_points,
    format_pricing,
    format_rate,
    format_ratio,
    format_slo,
    format_usd,
    format_usd_interval,
    format_value,
    measurement_kind,
    percentile,
    provenance_line,
    run_title,
    summary_tables,
    throughput_row,
)

Measurements = Sequence[Mapping[str, Any]]
Source = Callable[[], tuple[Measurements, Mapping[str, Any]]]
Failures = Sequence[Mapping[str, Any]]

SUMMARY_TITLE = "modelsweep summary"
DECISION_TITLE = "Decision: which model to serve"
MAX_ITEMS = 5
MAX_RESPONSE_CHARS = 1500
_LATENCIES = ("ttft", "tpot", "itl", "e2e")
_QUANTITIES = ("mean", "p50", "p90", "p99")

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
.modelsweep table.ms-decision-table th.ms-group { text-align: center; }
.modelsweep table.ms-decision-table { font-size: 12px; }
.modelsweep table.ms-decision-table th, .modelsweep table.ms-decision-table td { padding: 2px 6px; }
.modelsweep table.ms-decision-table td { white-space: nowrap; }
.modelsweep table.ms-decision-table td[data-column="flags"] { white-space: normal; min-width: 120px; }
.modelsweep table.ms-decision-table tr.ms-reference td { background: #f6f8fa; }
.modelsweep table.ms-decision-table td.ms-why { color: #57606a; font-style: italic; }
.modelsweep ul.ms-reasons { list-style: none; padding: 0; margin: 4px 0; color: #57606a;
  font-size: 12px; }
"""

_TEXT_COLUMNS = {
    "model", "candidate", "reference", "metric", "verdict", "subset", "error types",
    "benchmark", "parameters", "outcome", "item", "response", "extracted", "finish",
    "error", "name", "value", "setting", "flags",
}


def escape_text(value: object) -> str:
    """Escaped text for an element's content or a quoted attribute."""
    return escape(str(value), quote=True)


# --------------------------------------------------------------------------- tables and plots


def table_html(table: Table) -> str:
    """A :class:`Table` as an HTML table with its title and notes."""
    text = [c in _TEXT_COLUMNS for c in table.columns]
    head = "".join(
        f'<th class="{"ms-text" if t else "ms-num"}">{escape_text(c)}</th>' for c, t in zip(table.columns, text)
    )
    body = []
    for row in table.rows:
        cells = []
        for i, cell in enumerate(row):
            classes = "ms-text" if i < len(text) and text[i] else "ms-num"
            if i == table.status_column:
                classes += f" ms-verdict ms-verdict-{escape_text(cell)}"
            cells.append(f'<td class="{classes}">{escape_text(cell)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    notes = f'<p class="ms-notes">{escape_text("; ".join(table.notes))}</p>' if table.notes else ""
    return (
        f'<div class="ms-table-block" data-kind="{escape_text(table.kind)}"><h3>{escape_text(table.title)}</h3>'
        f'<table class="ms-table"><thead><tr>{head}</tr></thead>'
        f'<tbody>{"".join(body)}</tbody></table>{notes}</div>'
    )


def _svg_image(svg: str, alt: str) -> str:
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img alt="{escape_text(alt)}" src="data:image/svg+xml;base64,{data}">'


def plots_html(measurements: Measurements, reference: str | None = None) -> str:
    """The plots as inline images, or the matplotlib hint when it is missing."""
    plots = summary_plots(measurements, reference)
    if plots is None:
        return f'<p class="ms-notes ms-no-plots">{escape_text(MATPLOTLIB_HINT)}</p>'
    if not plots:
        return ""
    figures = "".join(
        f'<figure class="ms-plot">{_svg_image(p.svg, p.description)}'
        f"<figcaption>{escape_text(p.title)}: {escape_text(p.description)}</figcaption></figure>"
        for p in plots
    )
    return f'<h3>Plots</h3><div class="ms-plots">{figures}</div>'


def _decision_cell(page: DecisionPage, row_index: int, column_index: int) -> str:
    column = page.columns[column_index]
    cell = page.rows[row_index].cells[column_index]
    named = f'data-column="{escape_text(column.title)}"'
    if cell.why:
        return f'<td class="ms-text ms-why" {named} title="{escape_text(cell.why)}">{escape_text(cell.shown)}</td>'
    if column.verdict and cell.verdict:
        return (f'<td class="ms-text ms-verdict ms-verdict-{escape_text(cell.verdict)}" {named}>'
                f"{escape_text(cell.text)}</td>")
    aligned = "ms-text" if column.text or column.verdict else "ms-num"
    tip = " — ".join(part for part in (cell.detail, cell.tip) if part)
    title = f' title="{escape_text(tip)}"' if tip else ""
    return f'<td class="{aligned}" {named}{title}>{escape_text(cell.shown)}</td>'


def decision_table_html(page: DecisionPage) -> str:
    """The decision table: a column group per comparison, the reference row first."""
    groups: list[tuple[str, int]] = []
    for column in page.columns:
        if groups and groups[-1][0] == column.group:
            groups[-1] = (column.group, groups[-1][1] + 1)
        else:
            groups.append((column.group, 1))
    top = ('<th class="ms-text" rowspan="2">model</th>'
           + "".join(f'<th class="ms-group" colspan="{n}">{escape_text(g)}</th>' for g, n in groups)
           + '<th class="ms-text" rowspan="2">flags</th>')
    names = "".join(f'<th class="{"ms-text" if c.text or c.verdict else "ms-num"}">'
                    f"{escape_text(c.name)}</th>" for c in page.columns)
    body = []
    for i, row in enumerate(page.rows):
        name = f"{row.model} (reference)" if row.is_reference else row.model
        cells = "".join(_decision_cell(page, i, j) for j in range(len(page.columns)))
        body.append(f'<tr class="{"ms-reference" if row.is_reference else "ms-candidate"}" '
                    f'data-model="{escape_text(row.model)}"><td class="ms-text" data-column="model">'
                    f'{escape_text(name)}</td>{cells}<td class="ms-text" data-column="flags">'
                    f'{escape_text("; ".join(row.flags))}</td></tr>')
    return (f'<table class="ms-table ms-decision-table"><thead><tr>{top}</tr><tr>{names}</tr>'
            f'</thead><tbody>{"".join(body)}</tbody></table>')


def decision_html(measurements: Measurements, run: Mapping[str, Any], failures: Failures = ()) -> str:
    """The decision page (answer, table, reasons, Pareto plot); "" when the run has no candidate."""
    page = decision_page(measurements, run, failures)
    if page is None:
        return ""
    reasons = "".join(f'<li data-note="{i}">[{i}] {escape_text(why)}</li>'
                      for i, why in enumerate(page.reasons, 1))
    parts = [
        f'<section class="modelsweep" id="modelsweep-decision"><h2>{escape_text(DECISION_TITLE)}</h2>',
        f'<p class="ms-answer">{escape_text(page.answer)}</p>',
        decision_table_html(page),
        _notes(unplaced_line(page)),
        _notes(unmeasured_line(page)),
        f'<ul class="ms-reasons">{reasons}</ul>' if reasons else "",
        _notes("; ".join(page.notes)),
        _notes(pareto_line(page)),
    ]
    if page.pareto is not None:
        if not matplotlib_available():
            parts.append(f'<p class="ms-notes ms-no-plots">{escape_text(MATPLOTLIB_HINT)}</p>')
        else:
            svg = pareto_plot(page.pareto)
            if svg:
                description = (f"Pareto plot: {page.pareto.y_label} against "
                               f"{page.pareto.x_label}, one point per candidate")
                parts.append(f'<figure class="ms-plot ms-pareto">{_svg_image(svg, description)}'
                             f"<figcaption>{escape_text(description)}</figcaption></figure>")
    parts.append("</section>")
    return "".join(parts)


def summary_html(measurements: Measurements, run: Mapping[str, Any]) -> str:
    """The "modelsweep summary" section: heading, provenance, tables, plots (with its CSS)."""
    reference = run.get("reference")
    ref = str(reference) if reference else None
    tables = summary_tables(measurements, reference=ref)
    parts = [
        f"<style>{CSS}</style>",
        f'<section class="modelsweep" id="modelsweep-summary"><h2>{escape_text(SUMMARY_TITLE)}</h2>',
        f'<p class="ms-title">{escape_text(run_title(run))}</p>',
        f'<p class="ms-provenance">{escape_text(provenance_line(measurements, run))}</p>',
    ]
    if not tables:
        parts.append('<p class="ms-notes">No measurements were recorded.</p>')
    parts += [table_html(t) for t in tables]
    parts.append(plots_html(measurements, ref))
    parts.append("</section>")
    return "".join(parts)


# --------------------------------------------------------------------------- one measurement


def _compact(value: Any) -> str:
    if isinstance(value, float):
        return format_value(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return "" if value is None else str(value)


def _key_value_table(rows: Sequence[tuple[str, str]]) -> str:
    """Name-value pairs as a definition list, laid out three pairs to a line."""
    body = "".join(f"<div><dt>{escape_text(k)}</dt><dd>{escape_text(v)}</dd></div>" for k, v in rows)
    return f'<dl class="ms-kv">{body}</dl>'


def _grid(columns: Sequence[str], rows: Sequence[Sequence[str]], raw_last: bool = False) -> str:
    head = "".join(f'<th class="ms-text">{escape_text(c)}</th>' for c in columns)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            # raw_last: the last cell is markup built here from escaped text
            content = cell if raw_last and i == len(row) - 1 else escape_text(cell)
            cells.append(f'<td class="ms-text">{content}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table class="ms-table"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _latency_grid(latency: Mapping[str, LatencyFigures], caption: str) -> str:
    rows = []
    for name in _LATENCIES:
        figures = latency.get(name)
        if figures is None or not figures.measured:
            continue
        rows.append([name.upper()] + [format_ms(figures.get(q)) for q in _QUANTITIES])
    if not rows:
        return ""
    return f"<h4>Latency (ms)</h4>{_notes(caption)}" + _grid(["", *_QUANTITIES], rows)


def _notes(text: str) -> str:
    return f'<p class="ms-notes">{escape_text(text)}</p>' if text else ""


def _latency_table(measurement: Mapping[str, Any]) -> str:
    """The latency table of a measurement, read by :func:`throughput_row`."""
    row = throughput_row(measurement)
    if row.latency_source == "requests":
        count = row.latency["e2e"].n
        caption = f"over all {count:,} timed requests of the setting" if count else ""
    elif row.latency_source == "repeats" and row.repeat_count > 1:
        caption = "median over repeats of each repeat's figure"
    else:
        caption = ""
    return _latency_grid(row.latency, caption)


def _stats_of(measurement: Mapping[str, Any]) -> Mapping[str, Any]:
    stats = measurement.get("stats")
    return stats if isinstance(stats, Mapping) else {}


def _repeats_table(measurement: Mapping[str, Any]) -> str:
    """One line per timed window of a throughput setting."""
    row = throughput_row(measurement)
    if not isinstance(_stats_of(measurement).get("repeats"), list) or not row.repeats:
        return ""
    values = row.repeat_values
    goodput, cost = row.slo is not None, row.pricing is not None
    lines = []
    for r in row.repeats:
        rate = r.tokens_per_s if r.tokens_per_s is not None else (
            values[r.index] if r.index < len(values) else None)
        contention = ", ".join(f"{k} {_compact(v)}" for k, v in r.contention.items())
        extra = ([format_goodput(r.goodput_rps), format_percent(r.slo_attainment)] if goodput
                 else []) + ([format_usd(r.usd_per_million_output_tokens)] if cost else [])
        lines.append([
            str(r.index + 1),
            format_rate(rate),
            NA if r.duration_s is None else f"{r.duration_s:,.2f}",
            NA if r.completed is None else str(r.completed),
            NA if r.fidelity is None else f"{r.fidelity:.4f}",
            *extra,
            format_ms(r.latency["ttft"].get("p50")),
            format_ms(r.latency["tpot"].get("p50")),
            ("contended" if r.contended else "") + (f" ({contention})" if contention else ""),
        ])
    return "<h4>Repeats</h4>" + _grid(
        ["repeat", "tokens/s", "duration (s)", "completed", "fidelity",
         *(["goodput (req/s)", "SLO attainment"] if goodput else []),
         *(["$/1M output tokens"] if cost else []),
         "TTFT p50 (ms)", "TPOT p50 (ms)", "contention"], lines)


def _throughput_scalars(measurement: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The setting's own figures from the reader, then its other scalar statistics."""
    row = throughput_row(measurement)
    pairs = [
        ("tokens/s (mean)", format_rate(row.mean)),
        ("range", f"{format_rate(row.low)}–{format_rate(row.high)}" if row.repeat_count > 1 else NA),
        ("repeats", str(row.repeat_count)),
        ("CV", format_percent(row.cv)),
        ("fidelity (lowest)", NA if row.fidelity is None else f"{row.fidelity:.4f}"),
    ]
    if row.flags:
        pairs.append(("flags", format_flags(row)))
    if row.slo is not None:
        pairs += [("SLO", format_slo(row.slo)), ("goodput (req/s)", format_goodput(row.goodput_rps)),
                  ("SLO attainment", format_percent(row.slo_attainment))]
    if row.pricing is not None:
        pairs += [("$/1M output tokens", format_usd_interval(row.usd_per_million_output_tokens,
                                                              row.usd_interval)),
                  ("price", format_pricing(row.pricing))]
    shown = {"repeat_values", "repeats", "cv", "unstable", "contended", "contended_windows",
             "slo", "goodput_rps", "slo_attainment", "pricing", "usd_per_million_output_tokens",
             "usd_per_million_output_tokens_interval"}
    pairs += [(str(k), _compact(v)) for k, v in _stats_of(measurement).items()
              if str(k) not in shown and not (str(k) in _LATENCIES and isinstance(v, Mapping))]
    return pairs


def request_summary(requests: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Counts and latencies of a measurement's request records (RequestRecord dicts)."""
    if not requests:
        return []
    errors = [r for r in requests if r.get("error")]
    ok = [r for r in requests if not r.get("error")]
    rows = [("requests", str(len(requests))), ("failed", str(len(errors)))]
    latencies = [float(r["end"]) - float(r["start"]) for r in ok
                 if isinstance(r.get("end"), (int, float)) and isinstance(r.get("start"), (int, float))]
    ttfts = [float(r["first_token"]) - float(r["start"]) for r in ok
             if isinstance(r.get("first_token"), (int, float)) and isinstance(r.get("start"), (int, float))]
    for label, values in (("latency", latencies), ("TTFT", ttfts)):
        if values:
            rows.append((f"{label} mean / p50 / p99 (ms)", " / ".join(
                f"{1e3 * v:,.1f}" for v in (fmean(values), median(values), percentile(values, 0.99)))))
    completion = [r["completion_tokens"] for r in requests if isinstance(r.get("completion_tokens"), int)]
    if completion:
        rows.append(("completion tokens", f"{sum(completion):,}"))
    if errors:
        rows.append(("first error", str(errors[0]["error"])))
    return rows


def _response_of(item: Mapping[str, Any]) -> str:
    """An item's answer as shown: its ``response``, or (a record keeps its answer once) what
    its completion shows."""
    if "response" in item or not isinstance(item.get("completion"), Mapping):
        return str(item.get("response") or "")
    return shown_answer(Completion.from_dict(dict(item["completion"])))


def _items_table(items: Sequence[Mapping[str, Any]], limit: int) -> str:
    rows = []
    for item in items[:limit]:
        response = _response_of(item)
        shown = response[:MAX_RESPONSE_CHARS]
        if len(response) > len(shown):
            shown += f"\n… ({len(response) - len(shown):,} more characters)"
        tokens = item.get("completion_tokens")
        rows.append([
            str(item.get("item_id", "")),
            "yes" if item.get("correct") else "no",
            _compact(item.get("extracted")),
            str(item.get("finish_reason") or ""),
            "" if tokens is None else str(tokens),
            str(item.get("error") or ""),
            f'<pre class="ms-response">{escape_text(shown)}</pre>',
        ])
    caption = f"<h4>First {len(rows)} of {len(items):,} items (raw responses)</h4>"
    return caption + _grid(
        ["item", "correct", "extracted", "finish", "tokens", "error", "response"], rows, raw_last=True)


def headline(measurement: Mapping[str, Any]) -> str:
    """One line for a measurement: ``gsm8k 41.2% (n=50)``, ``throughput 1,234.5 tokens/s (c=16)``."""
    benchmark = str(measurement.get("benchmark", ""))
    kind = measurement_kind(measurement)
    params = measurement.get("params") or {}
    stats = measurement.get("stats") or {}
    n = measurement.get("n")
    if kind == "accuracy":
        return f"{benchmark} {format_percent(measurement.get('value'))} (n={n})"
    if kind == "verdicts":
        verdict = str(stats.get("verdict") or params.get("verdict") or NA).upper()
        return f"{benchmark} {verdict} {format_points(measurement.get('value'))} (n={n})"
    if kind == "throughput":
        prompt = params.get("prompt_tokens")
        setting = f"c={params.get('concurrency')}" + (f", {prompt} prompt" if prompt is not None else "")
        return f"{benchmark} {format_rate(measurement.get('value'))} tokens/s ({setting})"
    if kind == "throughput_ratio":
        return f"{benchmark} {format_ratio(measurement.get('value'))} (c={params.get('concurrency')})"
    return f"{benchmark} {format_value(measurement.get('value'))} {measurement.get('unit', '')}".strip()


def measurement_html(measurement: Mapping[str, Any], *, max_items: int = MAX_ITEMS) -> str:
    """The details of one measurement: parameters, statistics, requests, first items."""
    model = str(measurement.get("model", ""))
    params = measurement.get("params") or {}
    stats = measurement.get("stats") or {}
    parts = [f"<h4>{escape_text(model)} · {escape_text(headline(measurement))}</h4>"]
    if params:
        parts.append(_key_value_table([(str(k), _compact(v)) for k, v in params.items()]))
    throughput = measurement_kind(measurement) == "throughput"
    if throughput:
        scalars = _throughput_scalars(measurement)
    else:
        scalars = [(str(k), _compact(v)) for k, v in stats.items()
                   if not (str(k) in _LATENCIES and isinstance(v, Mapping))]
    if scalars:
        parts.append("<h4>Statistics</h4>" + _key_value_table(scalars))
    if throughput or any(isinstance(stats.get(name), Mapping) for name in _LATENCIES):
        parts.append(_latency_table(measurement))
    if throughput:
        parts.append(_repeats_table(measurement))
    requests = measurement.get("requests") or []
    if requests:
        parts.append("<h4>Requests</h4>" + _key_value_table(request_summary(requests)))
    items = measurement.get("items") or []
    if items and max_items > 0:
        parts.append(_items_table(items, max_items))
    provenance = measurement.get("provenance") or {}
    if provenance:
        keys = ("server_name", "server_version", "served_name", "model_source", "model_sha256",
                "model_revision", "image_digest", "how")
        parts.append("<h4>Endpoint</h4>" + _key_value_table(
            [(k, _compact(provenance[k])) for k in keys if provenance.get(k) not in (None, "")]))
    return "".join(parts)


def measurements_extra_html(measurements: Measurements) -> str:
    """The HTML extra of one test: the details of each measurement it recorded."""
    body = "".join(measurement_html(m) for m in measurements)
    return f'<div class="modelsweep ms-test-extra">{body}</div>'


def measurement_json(measurement: Mapping[str, Any]) -> dict[str, Any]:
    """A measurement for a JSON extra: everything but items and requests (counted instead)."""
    data = {k: v for k, v in measurement.items() if k not in ("items", "requests")}
    data["item_count"] = len(measurement.get("items") or [])
    data["request_count"] = len(measurement.get("requests") or [])
    return data


# --------------------------------------------------------------------------- standalone file


def html_document(measurements: Measurements, run: Mapping[str, Any], failures: Failures = ()) -> str:
    """A standalone HTML page: the decision page, the summary section, each measurement's details."""
    details = "".join(
        f"<details><summary>{escape_text(str(m.get('model', '')))} · {escape_text(headline(m))}</summary>"
        f"{measurement_html(m)}</details>"
        for m in measurements
    )
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape_text(run_title(run))}</title></head>"
        '<body style="margin: 16px 24px; background: #fff;">'
        f"{decision_html(measurements, run, failures)}"
        f"{summary_html(measurements, run)}"
        f'<section class="modelsweep" id="modelsweep-details"><h2>Measurements</h2>{details}'
        f'<p class="ms-notes">generated {escape_text(generated)} by pytest-modelsweep</p></section>'
        "</body></html>\n"
    )


def write_html_report(path: str | Path, measurements: Measurements, run: Mapping[str, Any],
                      failures: Failures = ()) -> Path:
    """Write :func:`html_document` to ``path`` (parents created) and return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html_document(measurements, run, failures), encoding="utf-8")
    return target


__all__ = [
    "CSS",
    "DECISION_TITLE",
    "SUMMARY_TITLE",
    "decision_html",
    "decision_table_html",
    "headline",
    "html_document",
    "measurement_html",
    "measurement_json",
    "measurements_extra_html",
    "plots_html",
    "request_summary",
    "summary_html",
    "table_html",
    "write_html_report",
]
