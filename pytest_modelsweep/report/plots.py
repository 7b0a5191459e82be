"""Plots of a run's measurements as SVG text, to embed in an HTML report (no files).

matplotlib is optional (the ``html`` extra) and imported only inside these
functions; without it every function returns None and a report shows
:data:`MATPLOTLIB_HINT` instead. Figures are drawn on a plain
:class:`matplotlib.figure.Figure` (no pyplot, no GUI backend, no global
figure state), so plotting is safe inside a pytest process.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.metrics import VERDICT_PREFIX, label_of, rank
from .decision import Pareto
from .tables import (
    ThroughputRow,
    accuracy_interval,
    is_throughput,
    measurement_kind,
    throughput_rows,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MATPLOTLIB_HINT = "plots need matplotlib: pip install 'pytest-modelsweep[html]'"

_STYLES = ["-", "--", ":", "-."]
_MARKERS = ["o", "s", "^", "D"]

VERDICT_COLOURS = {
    "better": "#1a7f37",
    "worse": "#cf222e",
    "matches": "#57606a",
    "equivalent": "#0969da",
    "inconclusive": "#bf8700",
}


@dataclass(frozen=True)
class Plot:
    """One plot: a title, a one-line description (alt text) and its SVG document."""

    title: str
    description: str
    svg: str


def matplotlib_available() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _label(text: object) -> str:
    # a "$" would start matplotlib's mathtext; labels are plain text
    return str(text).replace("$", r"\$")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _svg(figure: Figure) -> str:
    """The figure as an SVG document (no XML prolog), text kept as text, stable ids."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "modelsweep"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.find("<svg"):]


def _style(axes: Any) -> None:
    axes.grid(True, color="#d0d7de", linewidth=0.6)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


# --------------------------------------------------------------------------- throughput


def _points(
    measurements: Sequence[Mapping[str, Any]],
) -> dict[tuple[str, int | None], list[tuple[int, ThroughputRow]]]:
    """Throughput rows with a concurrency, by (model, long prompt length), sorted by concurrency."""
    lines: dict[tuple[str, int | None], list[tuple[int, ThroughputRow]]] = {}
    for row in throughput_rows(measurements):
        if row.concurrency is None:
            continue
        lines.setdefault((row.model, row.prompt_tokens), []).append((row.concurrency, row))
    for points in lines.values():
        points.sort(key=lambda p: p[0])
    return lines


def _line_label(model: str, prompt: int | None) -> str:
    return _label(f"{model}, {'short prompts' if prompt is None else f'{prompt} prompt tokens'}")


def _concurrency_axis(axes: Any, concurrencies: set[int]) -> None:
    axes.set_xscale("log", base=2)
    ticks = sorted(concurrencies)
    axes.set_xticks(ticks, [str(c) for c in ticks])
    axes.minorticks_off()
    axes.set_xlabel("concurrent requests")


def throughput_plot(measurements: Sequence[Mapping[str, Any]]) -> str | None:
    """Output tokens/s against concurrency: a line per model and prompt length.

    Points are the mean over repeats, bars the lowest and highest repeat (read
    by :func:`..tables.throughput_row`). None without matplotlib or without
    throughput measurements.
    """
    if not any(is_throughput(m) for m in measurements) or not matplotlib_available():
        return None
    lines = {
        key: [(c, row.mean, row.low, row.high) for c, row in points if row.mean is not None]
        for key, points in _points(measurements).items()
    }
    lines = {key: points for key, points in lines.items() if points}
    if not lines:
        return None
    figure = _new_figure(7.5, 4.2)
    axes = figure.subplots()
    concurrencies: set[int] = set()
    models = sorted({model for model, _ in lines})
    prompts = sorted({prompt or 0 for _, prompt in lines})
    palette = [f"C{i % 10}" for i in range(len(models))]
    for (model, prompt), points in sorted(lines.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        style = prompts.index(prompt or 0)
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        lower = [p[1] - (p[2] if p[2] is not None else p[1]) for p in points]
        upper = [(p[3] if p[3] is not None else p[1]) - p[1] for p in points]
        concurrencies.update(xs)
        axes.errorbar(xs, ys, yerr=[lower, upper], capsize=3, color=palette[models.index(model)],
                      linestyle=_STYLES[style % len(_STYLES)],
                      marker=_MARKERS[style % len(_MARKERS)], label=_line_label(model, prompt))
    _concurrency_axis(axes, concurrencies)
    axes.set_ylabel("output tokens/s")
    axes.set_ylim(bottom=0)
    axes.set_title("Throughput (mean over repeats; bars: lowest–highest repeat)", fontsize=10)
    _style(axes)
    axes.legend(fontsize=8, loc="best")
    return _svg(figure)


def latency_plot(measurements: Sequence[Mapping[str, Any]]) -> str | None:
    """TTFT and TPOT p50 (solid) and p99 (dashed) against concurrency, a colour per model.

    One panel per latency; a line per model and prompt length. None without
    matplotlib or without a throughput measurement that recorded latencies.
    """
    if not any(is_throughput(m) for m in measurements) or not matplotlib_available():
        return None
    lines = {key: points for key, points in _points(measurements).items()
             if any(row.figure(name, "p50") is not None for _, row in points
                    for name in ("ttft", "tpot"))}
    if not lines:
        return None
    figure = _new_figure(7.5, 6.4)
    panels = figure.subplots(2, 1, sharex=True)
    models = sorted({model for model, _ in lines})
    prompts = sorted({prompt or 0 for _, prompt in lines})
    palette = [f"C{i % 10}" for i in range(len(models))]
    concurrencies: set[int] = set()
    for axes, name, title in zip(panels, ("ttft", "tpot"),
                                 ("Time to first token", "Time per output token")):
        for (model, prompt), points in sorted(lines.items(),
                                              key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            marker = _MARKERS[prompts.index(prompt or 0) % len(_MARKERS)]
            colour = palette[models.index(model)]
            for quantity, linestyle in (("p50", "-"), ("p99", "--")):
                xy = [(c, row.figure(name, quantity)) for c, row in points]
                shown = [(c, v) for c, v in xy if v is not None]
                if not shown:
                    continue
                concurrencies.update(c for c, _ in shown)
                axes.plot([c for c, _ in shown], [v for _, v in shown], color=colour,
                          linestyle=linestyle, marker=marker,
                          label=_line_label(model, prompt) + f" {quantity}")
        axes.set_ylabel(f"{name.upper()} (ms)")
        axes.set_ylim(bottom=0)
        axes.set_title(f"{title}: p50 solid, p99 dashed", fontsize=10, loc="left")
        _style(axes)
    _concurrency_axis(panels[1], concurrencies)
    panels[0].legend(fontsize=7, loc="best")
    return _svg(figure)


# --------------------------------------------------------------------------- accuracy


def accuracy_plot(measurements: Sequence[Mapping[str, Any]], reference: str | None = None) -> str | None:
    """Each model's accuracy per benchmark with its Wilson 95% interval.

    None without matplotlib or without accuracy measurements.
    """
    rows = [m for m in measurements if measurement_kind(m) == "accuracy"]
    if not rows or not matplotlib_available():
        return None
    benchmarks: dict[str, list[Mapping[str, Any]]] = {}
    for m in rows:
        benchmarks.setdefault(str(m.get("benchmark", "")), []).append(m)
    names = sorted(benchmarks, key=lambda b: (rank(b), b))
    height = 0.9 + sum(0.35 * len(benchmarks[b]) + 0.6 for b in names)
    figure = _new_figure(7.5, max(2.2, height))
    grid = figure.subplots(len(names), 1, squeeze=False,
                           height_ratios=[len(benchmarks[b]) + 1 for b in names])
    for axes, name in zip(grid[:, 0], names):
        models = sorted(benchmarks[name], key=lambda m: (m.get("model") != reference, str(m.get("model"))))
        for y, m in enumerate(models):
            value = _number(m.get("value"))
            if value is None:
                continue
            interval = accuracy_interval(m)
            colour = "#57606a" if m.get("model") == reference else "#0969da"
            if interval is not None:
                axes.hlines(y, 100 * interval[0], 100 * interval[1], color=colour, linewidth=2)
            axes.plot([100 * value], [y], "o", color=colour)
            axes.annotate(f"{100 * value:.1f}%", (100 * value, y), xytext=(0, 6),
                          textcoords="offset points", ha="center", fontsize=8)
        axes.set_yticks(range(len(models)), [_label(m.get("model", "")) for m in models])
        axes.set_ylim(-0.7, len(models) - 0.3)
        axes.invert_yaxis()
        axes.set_xlim(0, 100)
        axes.set_title(_label(label_of(name, f"{name} accuracy")), fontsize=10, loc="left")
        _style(axes)
    grid[-1, 0].set_xlabel("accuracy (%), bars: Wilson 95% interval")
    return _svg(figure)


# --------------------------------------------------------------------------- forest


def forest_plot(measurements: Sequence[Mapping[str, Any]]) -> str | None:
    """Paired differences (candidate − reference) as a forest plot.

    A row per candidate and metric: the interval as a line, the difference as a
    point, a vertical line at 0 and the equivalence margin as a band. None
    without matplotlib or without verdicts.
    """
    rows = [m for m in measurements if measurement_kind(m) == "verdicts"]
    if not rows or not matplotlib_available():
        return None

    def stats(m: Mapping[str, Any]) -> Mapping[str, Any]:
        value = m.get("stats")
        return value if isinstance(value, Mapping) else {}

    def metric(m: Mapping[str, Any]) -> str:
        return str(stats(m).get("metric") or str(m.get("benchmark", ""))[len(VERDICT_PREFIX):])

    def candidate(m: Mapping[str, Any]) -> str:
        return str(stats(m).get("candidate") or m.get("model", ""))

    rows.sort(key=lambda m: (metric(m), candidate(m)))
    figure = _new_figure(7.5, 1.0 + 0.45 * len(rows))
    axes = figure.subplots()
    margins = {v for v in (_number(stats(m).get("margin")) for m in rows) if v is not None}
    for margin in margins:
        axes.axvspan(-100 * margin, 100 * margin, color="#0969da", alpha=0.08, linewidth=0)
    axes.axvline(0, color="#24292f", linewidth=1)
    labels = []
    for y, m in enumerate(rows):
        s = stats(m)
        difference = _number(s.get("difference", m.get("value")))
        low, high = _number(s.get("low")), _number(s.get("high"))
        verdict = str(s.get("verdict", ""))
        colour = VERDICT_COLOURS.get(verdict, "#57606a")
        if low is not None and high is not None:
            axes.hlines(y, 100 * low, 100 * high, color=colour, linewidth=2.5)
        if difference is not None:
            axes.plot([100 * difference], [y], "D", color=colour, markersize=6)
        labels.append(_label(f"{candidate(m)} · {metric(m)}"))
        axes.annotate(_label(verdict), (1.0, y), xycoords=("axes fraction", "data"),
                      xytext=(4, 0), textcoords="offset points", va="center",
                      fontsize=8, color=colour)
    axes.set_yticks(range(len(rows)), labels)
    axes.set_ylim(-0.7, len(rows) - 0.3)
    axes.invert_yaxis()
    axes.set_xlabel("candidate − reference accuracy (percentage points), 95% interval"
                    + (", band: equivalence margin" if margins else ""))
    _style(axes)
    return _svg(figure)


# --------------------------------------------------------------------------- Pareto


def pareto_plot(pareto: Pareto | None) -> str | None:
    """Accuracy difference against throughput ratio (or relative cost), the Pareto front drawn.

    One point per candidate with its 95% intervals as bars: filled diamonds match the
    reference on every accuracy verdict, hollow circles do not (or are not shown to); the
    reference is the star at (1, 0); the front (the points no other beats on both axes)
    is a dashed step line. None without matplotlib or without points.
    """
    if pareto is None or not pareto.points or not matplotlib_available():
        return None
    figure = _new_figure(7.5, 4.4)
    axes = figure.subplots()
    axes.axvline(1.0, color="#8c959f", linewidth=0.8)
    axes.axhline(0.0, color="#8c959f", linewidth=0.8)
    front = sorted((p for p in pareto.points if p.on_front), key=lambda p: p.x)
    if len(front) > 1:
        # maximizing x the front falls as x grows (a step down at each point); minimizing
        # x (cost) it rises (a step up after each point)
        axes.plot([p.x for p in front], [100 * p.y for p in front], color="#24292f",
                  linestyle="--", linewidth=1.2,
                  drawstyle="steps-pre" if pareto.x_higher_is_better else "steps-post",
                  label="Pareto front")
    holds, other = VERDICT_COLOURS["better"], VERDICT_COLOURS["worse"]
    for point in pareto.points:
        if point.is_reference:
            axes.plot([point.x], [100 * point.y], marker="*", markersize=13, color="#24292f",
                      linestyle="none", label=_label(f"{point.model} (reference)"))
        else:
            colour = holds if point.holds else other
            xerr = ([[point.x - point.x_low], [point.x_high - point.x]]
                    if point.x_low is not None and point.x_high is not None else None)
            yerr = ([[100 * (point.y - point.y_low)], [100 * (point.y_high - point.y)]]
                    if point.y_low is not None and point.y_high is not None else None)
            axes.errorbar([point.x], [100 * point.y], xerr=xerr, yerr=yerr, capsize=3,
                          color=colour, marker="D" if point.holds else "o", markersize=7,
                          markerfacecolor=colour if point.holds else "white", linestyle="none")
        axes.annotate(_label(point.model + (" (front)" if point.on_front else "")),
                      (point.x, 100 * point.y), xytext=(6, 6), textcoords="offset points",
                      fontsize=8)
    axes.plot([], [], marker="D", color=holds, linestyle="none",
              label="matches the reference on every accuracy verdict")
    axes.plot([], [], marker="o", color=other, markerfacecolor="white", linestyle="none",
              label="does not, or not shown to")
    axes.set_xlabel(_label(pareto.x_label))
    axes.set_ylabel(_label(pareto.y_label))
    better = "right" if pareto.x_higher_is_better else "left"
    axes.set_title(f"Accuracy against {'throughput' if pareto.x_higher_is_better else 'cost'}: "
                   f"up and to the {better} is better", fontsize=10)
    _style(axes)
    axes.legend(fontsize=7, loc="best")
    return _svg(figure)


def summary_plots(measurements: Sequence[Mapping[str, Any]], reference: str | None = None) -> list[Plot] | None:
    """Every plot the measurements allow, in report order; None without matplotlib."""
    if not matplotlib_available():
        return None
    plots: list[Plot] = []
    forest = forest_plot(measurements)
    if forest:
        plots.append(Plot("Paired differences", "Forest plot of each candidate's paired accuracy "
                          "difference from the reference with its 95% interval", forest))
    accuracy = accuracy_plot(measurements, reference)
    if accuracy:
        plots.append(Plot("Accuracy", "Each model's accuracy with its Wilson 95% interval", accuracy))
    throughput = throughput_plot(measurements)
    if throughput:
        plots.append(Plot("Throughput", "Output tokens per second against concurrent requests, "
                          "one line per model and prompt length", throughput))
    latency = latency_plot(measurements)
    if latency:
        plots.append(Plot("Latency", "TTFT and TPOT p50 and p99 against concurrent requests, "
                          "one colour per model", latency))
    return plots


__all__ = [
    "MATPLOTLIB_HINT",
    "Plot",
    "accuracy_plot",
    "forest_plot",
    "latency_plot",
    "matplotlib_available",
    "pareto_plot",
    "summary_plots",
    "throughput_plot",
]
