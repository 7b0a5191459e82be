"""Plots of a run's measurements as SVG text, to embed in an HTML report (no files).

matplotlib is optional (the ``html`` extra): without it every plot is None. Plain
:class:`matplotlib.figure.Figure` objects, no pyplot and no global state: safe inside pytest.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.measurements import (
    RATE,
    AccuracyStats,
    AccuracyVerdictStats,
    Measurement,
    SearchStats,
    ServerMetricsWindow,
    ThroughputStats,
)
from ..core.metrics import label_of, rank
from .decision.page import Pareto
from .tables import (
    Measurements,
    ThroughputRow,
    accuracy_interval,
    finite,
    latency_figure,
    throughput_rows,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MATPLOTLIB_HINT = "plots need matplotlib: pip install 'pytest-modelsweep[html]'"

T = TypeVar("T")

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
    """One plot: a title, a one-line description (alt text) and its SVG document, or why it
    could not be drawn."""

    title: str
    description: str
    svg: str | NotDrawn


@dataclass(frozen=True)
class NotDrawn:
    """Why a plot could not be drawn (one line)."""

    why: str


def drawn(draw: Callable[[], T]) -> T | NotDrawn:
    """``draw()``, or why it raised: a plot that cannot be drawn never fails a report."""
    try:
        return draw()
    except Exception as error:
        return NotDrawn(f"{type(error).__name__}: {error}"[:300])


def error_bars(
    values: Sequence[float], lows: Sequence[float | None], highs: Sequence[float | None]
) -> list[list[float]]:
    """matplotlib's ``yerr`` of values and their intervals: each distance down to the low and
    up to the high, never below 0 (a value at the edge of its interval, such as 30/30 against
    its Wilson bound 0.9999999999999999, or outside it, draws no bar on that side)."""
    return [
        [max(0.0, v - low) if low is not None else 0.0 for v, low in zip(values, lows)],
        [max(0.0, high - v) if high is not None else 0.0 for v, high in zip(values, highs)],
    ]


def matplotlib_available() -> bool:
    """Whether matplotlib is installed (a plot it then fails to draw says why in its place)."""
    return importlib.util.find_spec("matplotlib") is not None


def _label(text: object) -> str:
    """Plain text for matplotlib (a ``$`` would start mathtext)."""
    return str(text).replace("$", r"\$")


def _new_figure(width: float, height: float, *grid: int, **options: Any) -> tuple[Figure, Any]:
    """A figure and its axes: ``figure.subplots(*grid, **options)``."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.subplots(*grid, **options)


def _svg(figure: Figure) -> str:
    """The figure as an SVG document (no XML prolog), text kept as text, stable ids."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "modelsweep"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.find("<svg") :]


def _style(axes: Any, legend: int | None = None) -> None:
    """Light grid behind, no top or right spine; a legend in ``legend`` points."""
    axes.grid(True, color="#d0d7de", linewidth=0.6)
    axes.set_axisbelow(True)
    axes.spines[["top", "right"]].set_visible(False)
    if legend:
        axes.legend(fontsize=legend, loc="best")


def _rows_axis(axes: Any, labels: Sequence[str]) -> None:
    """A row a label, top to bottom."""
    axes.set_yticks(range(len(labels)), labels)
    axes.set_ylim(len(labels) - 0.3, -0.7)  # the first row at the top


# --------------------------------------------------------------------------- the plots
def _points(
    measurements: Measurements,
) -> dict[tuple[str, int | None], list[tuple[int, ThroughputRow]]]:
    """Throughput rows by (model, long prompt length), each line sorted by concurrency."""
    lines: dict[tuple[str, int | None], list[tuple[int, ThroughputRow]]] = {}
    for row in throughput_rows(measurements):
        concurrency, prompt = row.setting.concurrency, row.setting.prompt_tokens
        if isinstance(concurrency, int):
            lines.setdefault((row.m.model, prompt if isinstance(prompt, int) else None), []).append(
                (concurrency, row)
            )
    return {
        key: sorted(points, key=lambda p: p[0])
        for key, points in sorted(lines.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0))
    }


def _line_styles(
    lines: Mapping[tuple[str, int | None], Any],
) -> dict[tuple[str, int | None], dict[str, str]]:
    """Each line's style: a colour per model, a line style and marker per prompt length (0:
    short), and its label."""
    models, prompts = sorted({model for model, _ in lines}), sorted({p or 0 for _, p in lines})
    return {
        (model, prompt): {
            "color": f"C{models.index(model) % 10}",
            "linestyle": _STYLES[prompts.index(prompt or 0) % len(_STYLES)],
            "marker": _MARKERS[prompts.index(prompt or 0) % len(_MARKERS)],
            "label": _label(
                f"{model}, {'short prompts' if prompt is None else f'{prompt} prompt tokens'}"
            ),
        }
        for model, prompt in lines
    }


def _concurrency_axis(axes: Any, concurrencies: set[int]) -> None:
    axes.set_xscale("log", base=2)
    ticks = sorted(concurrencies)
    axes.set_xticks(ticks, [str(c) for c in ticks])
    axes.minorticks_off()
    axes.set_xlabel("concurrent requests")


def throughput_plot(measurements: Measurements) -> str | None:
    """Output tokens/s against concurrency, a line per model and prompt length (or None)."""
    lines = {
        key: found
        for key, points in _points(measurements).items()
        if (
            found := [
                (c, mean, row.low, row.high) for c, row in points if (mean := row.mean) is not None
            ]
        )
    }
    if not lines or not matplotlib_available():
        return None
    figure, axes = _new_figure(7.5, 4.2)
    styles = _line_styles(lines)
    for key, points in lines.items():
        ys = [p[1] for p in points]
        axes.errorbar(
            [p[0] for p in points],
            ys,
            yerr=error_bars(ys, [p[2] for p in points], [p[3] for p in points]),
            capsize=3,
            **styles[key],
        )
    _concurrency_axis(axes, {p[0] for points in lines.values() for p in points})
    axes.set(ylabel="output tokens/s", ylim=(0, None))
    axes.set_title("Throughput (mean over repeats; bars: lowest–highest repeat)", fontsize=10)
    _style(axes, legend=8)
    return _svg(figure)


def latency_plot(measurements: Measurements) -> str | None:
    """TTFT and TPOT p50 and p99 against concurrency, a panel each (or None)."""
    lines = {
        key: points
        for key, points in _points(measurements).items()
        if any(
            latency_figure(row.latency[name], "p50") is not None
            for _, row in points
            for name in ("ttft", "tpot")
        )
    }
    if not lines or not matplotlib_available():
        return None
    figure, panels = _new_figure(7.5, 6.4, 2, 1, sharex=True)
    styles = _line_styles(lines)
    concurrencies: set[int] = set()
    for axes, name, title in zip(
        panels, ("ttft", "tpot"), ("Time to first token", "Time per output token")
    ):
        for key, points in lines.items():
            for quantity, linestyle in (("p50", "-"), ("p99", "--")):
                shown = [
                    (c, v)
                    for c, row in points
                    if (v := latency_figure(row.latency[name], quantity)) is not None
                ]
                if shown:
                    concurrencies.update(c for c, _ in shown)
                    axes.plot(
                        [c for c, _ in shown],
                        [v for _, v in shown],
                        color=styles[key]["color"],
                        linestyle=linestyle,
                        marker=styles[key]["marker"],
                        label=f"{styles[key]['label']} {quantity}",
                    )
        axes.set(ylabel=f"{name.upper()} (ms)", ylim=(0, None))
        axes.set_title(f"{title}: p50 solid, p99 dashed", fontsize=10, loc="left")
        _style(axes)
    _concurrency_axis(panels[1], concurrencies)
    panels[0].legend(fontsize=7, loc="best")
    return _svg(figure)


def accuracy_plot(measurements: Measurements, reference: str | None = None) -> str | None:
    """Each model's accuracy per benchmark with its Wilson 95% interval (None without one)."""
    found = [m for m in measurements if isinstance(m.stats, AccuracyStats)]
    benchmarks = {b: [m for m in found if m.benchmark == b] for b in {m.benchmark for m in found}}
    if not benchmarks or not matplotlib_available():
        return None
    names = sorted(benchmarks, key=lambda b: (rank(b), b))
    figure, grid = _new_figure(
        7.5,
        max(2.2, 0.9 + sum(0.35 * len(benchmarks[b]) + 0.6 for b in names)),
        len(names),
        1,
        squeeze=False,
        height_ratios=[len(benchmarks[b]) + 1 for b in names],
    )
    for axes, name in zip(grid[:, 0], names):
        models = sorted(benchmarks[name], key=lambda m: (m.model != reference, m.model))
        for y, m in enumerate(models):
            value, interval = finite(m.value), accuracy_interval(m)
            colour = "#57606a" if m.model == reference else "#0969da"
            if value is not None and interval is not None:
                axes.hlines(y, 100 * interval[0], 100 * interval[1], color=colour, linewidth=2)
            if value is not None:
                axes.plot([100 * value], [y], "o", color=colour)
                axes.annotate(
                    f"{100 * value:.1f}%",
                    (100 * value, y),
                    xytext=(0, 6),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                )
        _rows_axis(axes, [_label(m.model) for m in models])
        axes.set_xlim(0, 100)
        axes.set_title(_label(label_of(name, f"{name} accuracy")), fontsize=10, loc="left")
        _style(axes)
    grid[-1, 0].set_xlabel("accuracy (%), bars: Wilson 95% interval")
    return _svg(figure)


def forest_plot(measurements: Measurements) -> str | None:
    """Paired differences as a forest plot, a row per candidate and metric (or None)."""
    rows = sorted(
        (
            (s.metric or m.benchmark.split(":", 1)[-1], s.candidate or m.model, m, s)
            for m in measurements
            if isinstance(s := m.stats, AccuracyVerdictStats)
        ),
        key=lambda row: row[:2],
    )
    if not rows or not matplotlib_available():
        return None
    figure, axes = _new_figure(7.5, 1.0 + 0.45 * len(rows))
    margins = {v for *_, s in rows if (v := finite(s.margin)) is not None}
    for margin in margins:
        axes.axvspan(-100 * margin, 100 * margin, color="#0969da", alpha=0.08, linewidth=0)
    axes.axvline(0, color="#24292f", linewidth=1)
    for y, (_, _, m, s) in enumerate(rows):
        iv = s.interval
        difference = finite(m.value if iv is None else iv.difference)
        low, high = (None, None) if iv is None else (finite(iv.low), finite(iv.high))
        verdict = "" if s.verdict is None else s.verdict.value
        colour = VERDICT_COLOURS.get(verdict, "#57606a")
        if low is not None and high is not None:
            axes.hlines(y, 100 * low, 100 * high, color=colour, linewidth=2.5)
        if difference is not None:
            axes.plot([100 * difference], [y], "D", color=colour, markersize=6)
        axes.annotate(
            _label(verdict),
            (1.0, y),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
            color=colour,
        )
    _rows_axis(axes, [_label(f"{candidate} · {metric}") for metric, candidate, *_ in rows])
    axes.set_xlabel(
        "candidate − reference accuracy (percentage points), 95% interval"
        + (", band: equivalence margin" if margins else "")
    )
    _style(axes)
    return _svg(figure)


MAX_SERVER_PANELS = 12  # measurements whose server metrics server_metrics_plot draws


def server_windows(m: Measurement) -> list[tuple[str, ServerMetricsWindow]]:
    """A measurement's windows with server metric series, labelled (``repeat 2``, ``c4``)."""
    stats = m.stats
    found: list[tuple[str, ServerMetricsWindow | None]] = (
        [(f"repeat {i + 1}", w.server_metrics) for i, w in enumerate(stats.repeats)]
        if isinstance(stats, ThroughputStats)
        else [
            (
                f"{step.rate:.3g} req/s" if stats.knob == RATE else f"c{step.concurrency}",
                step.recorded.server_metrics if step.recorded else None,
            )
            for step in stats.steps
        ]
        if isinstance(stats, SearchStats)
        else []
    )
    return [(label, w) for label, w in found if w is not None and w.samples]


def _measurement_label(m: Measurement) -> str:
    """``m · throughput c4, 512 prompt tokens``, ``m · throughput 2 req/s``, ``m · capacity
    search``."""
    rate, concurrency, prompt = (
        m.params.get(name) for name in ("request_rate", "concurrency", "prompt_tokens")
    )
    where = (
        f"{rate:g} req/s"
        if isinstance(rate, int | float)
        else f"c{concurrency}" + (f", {prompt} prompt tokens" if prompt else "")
        if isinstance(concurrency, int)
        else "sweep"
        if isinstance(m.stats, SearchStats) and m.stats.knob == RATE
        else "search"
    )
    return f"{m.model} · {m.benchmark} {where}"


def server_metrics_plot(measurements: Measurements) -> tuple[str, str] | None:
    """The server's ``/metrics`` over time, a panel per measurement, its windows end to end:
    the SVG and what its description adds when it leaves measurements out; or None."""
    found = [(m, windows) for m in measurements if (windows := server_windows(m))]
    if not found or not matplotlib_available():
        return None
    shown = found[:MAX_SERVER_PANELS]
    figure, grid = _new_figure(7.5, 0.6 + 1.75 * len(shown), len(shown), 1, squeeze=False)
    panels = grid[:, 0]
    for axes, (m, windows) in zip(panels, shown):
        offset, ticks, kv_axes = 0.0, [], None
        span = max((w.samples[-1].t - w.samples[0].t for _, w in windows), default=1.0)
        gap = 0.04 * span + 0.05
        for index, (label, window) in enumerate(windows):
            names, start, first = window.summary.sources, window.samples[0].t, index == 0
            drawn_lines: list[tuple[str, list[tuple[float, float]], str, str]] = [
                *(
                    (f"requests {quantity}", window.series(names[quantity]), style, colour)
                    for quantity, style, colour in (("running", "-", "C0"), ("waiting", "--", "C3"))
                    if quantity in names
                ),
                (
                    "client in flight",
                    [
                        (s.t - start, s.client_in_flight)
                        for s in window.samples
                        if s.client_in_flight is not None
                    ],
                    ":",
                    "#57606a",
                ),
            ]
            for name, points, style, colour in drawn_lines:
                if points:
                    axes.step(
                        [offset + t for t, _ in points],
                        [v for _, v in points],
                        where="post",
                        linestyle=style,
                        color=colour,
                        linewidth=1.2,
                        label=name if first else None,
                    )
            if "kv_cache_usage" in names:
                if kv_axes is None:
                    kv_axes = axes.twinx()
                    kv_axes.set_ylim(0, 100)
                    kv_axes.set_ylabel("KV cache (%)", fontsize=7)
                    kv_axes.tick_params(labelsize=7)
                kv = window.series(names["kv_cache_usage"])
                kv_axes.plot(
                    [offset + t for t, _ in kv],
                    [100 * v for _, v in kv],
                    color="C2",
                    linewidth=1.0,
                    alpha=0.8,
                    label="KV-cache usage" if first else None,
                )
            length = window.samples[-1].t - start
            ticks.append((offset + length / 2, label))
            offset += length + gap
            if index < len(windows) - 1:
                axes.axvline(offset - gap / 2, color="#d0d7de", linewidth=0.8)
        axes.set_ylim(bottom=0)
        axes.set_ylabel("requests", fontsize=8)
        axes.set_title(_label(_measurement_label(m)), fontsize=9, loc="left")
        if len(windows) > 1:
            axes.secondary_xaxis("top").set_xticks(
                [t for t, _ in ticks], [_label(text) for _, text in ticks], fontsize=6
            )
        axes.tick_params(labelsize=7)
        _style(axes)
        legends = [a.get_legend_handles_labels() for a in (axes, kv_axes) if a is not None]
        axes.legend(
            [h for hs, _ in legends for h in hs],
            [label for _, labels in legends for label in labels],
            fontsize=6,
            loc="upper right",
        )
    panels[-1].set_xlabel("seconds into the timed windows (laid end to end)")
    return _svg(figure), (
        ""
        if len(shown) >= len(found)
        else f" (the first {len(shown)} of {len(found)} measurements with them)"
    )


def pareto_plot(pareto: Pareto) -> str | None:
    """Accuracy difference against throughput ratio (or relative cost), the front dashed."""
    if not pareto.points or not matplotlib_available():
        return None
    figure, axes = _new_figure(7.5, 4.4)
    axes.axvline(1.0, color="#8c959f", linewidth=0.8)
    axes.axhline(0.0, color="#8c959f", linewidth=0.8)
    front = sorted((p for p in pareto.points if p.on_front), key=lambda p: p.x)
    if len(front) > 1:  # it falls as x grows where x is maximised, rises where minimised
        axes.plot(
            [p.x for p in front],
            [100 * p.y for p in front],
            color="#24292f",
            linestyle="--",
            linewidth=1.2,
            drawstyle="steps-pre" if pareto.x_higher_is_better else "steps-post",
            label="Pareto front",
        )
    holds, other = VERDICT_COLOURS["better"], VERDICT_COLOURS["worse"]
    for point in pareto.points:
        if point.is_reference:
            axes.plot(
                [point.x],
                [100 * point.y],
                marker="*",
                markersize=13,
                color="#24292f",
                linestyle="none",
                label=_label(f"{point.model} (reference)"),
            )
        else:
            colour = holds if point.holds else other
            axes.errorbar(
                [point.x],
                [100 * point.y],
                xerr=None
                if point.x_low is None or point.x_high is None
                else error_bars([point.x], [point.x_low], [point.x_high]),
                yerr=None
                if point.y_low is None or point.y_high is None
                else error_bars([100 * point.y], [100 * point.y_low], [100 * point.y_high]),
                capsize=3,
                color=colour,
                marker="D" if point.holds else "o",
                markersize=7,
                markerfacecolor=colour if point.holds else "white",
                linestyle="none",
            )
        axes.annotate(
            _label(point.model + (" (front)" if point.on_front else "")),
            (point.x, 100 * point.y),
            xytext=(6, 6),
            textcoords="offset points",
            fontsize=8,
        )
    axes.plot(
        [],
        [],
        marker="D",
        color=holds,
        linestyle="none",
        label="matches the reference on every accuracy verdict",
    )
    axes.plot(
        [],
        [],
        marker="o",
        color=other,
        markerfacecolor="white",
        linestyle="none",
        label="does not, or not shown to",
    )
    axes.set(xlabel=_label(pareto.x_label), ylabel=_label(pareto.y_label))
    axes.set_title(
        f"Accuracy against {'throughput' if pareto.x_higher_is_better else 'cost'}: "
        f"up and to the {'right' if pareto.x_higher_is_better else 'left'} is better",
        fontsize=10,
    )
    _style(axes, legend=7)
    return _svg(figure)


def summary_plots(measurements: Measurements, reference: str | None = None) -> list[Plot] | None:
    """Every plot the measurements allow, in report order; None without matplotlib."""
    if not matplotlib_available():
        return None
    plots: list[tuple[str, str, str | NotDrawn | None]] = [
        (
            "Paired differences",
            (
                "Forest plot of each candidate's paired accuracy difference "
                "from the reference with its 95% interval"
            ),
            drawn(lambda: forest_plot(measurements)),
        ),
        (
            "Accuracy",
            "Each model's accuracy with its Wilson 95% interval",
            drawn(lambda: accuracy_plot(measurements, reference)),
        ),
        (
            "Throughput",
            (
                "Output tokens per second against concurrent requests, one line per "
                "model and prompt length"
            ),
            drawn(lambda: throughput_plot(measurements)),
        ),
        (
            "Latency",
            ("TTFT and TPOT p50 and p99 against concurrent requests, one colour per model"),
            drawn(lambda: latency_plot(measurements)),
        ),
    ]
    server = drawn(lambda: server_metrics_plot(measurements))
    svg, left = (server, "") if server is None or isinstance(server, NotDrawn) else server
    plots.append(
        (
            "Server metrics",
            (
                "What the server's /metrics showed during each timed window: requests running and "
                "waiting, the client's requests in flight, KV-cache usage where exposed" + left
            ),
            svg,
        )
    )
    return [Plot(title, description, svg) for title, description, svg in plots if svg]
