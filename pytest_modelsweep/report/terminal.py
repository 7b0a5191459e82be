"""The terminal summary tables: a run's measurements, its baseline gate rows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.measurements import Measurement
from ..core.metrics import Kind
from ..judging.gate import GateRow
from .tables import records


def _format_value(value: float) -> str:
    if value == 0 or 0.01 <= abs(value) < 1e6:
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1 else f"{value:,.1f}"
    return f"{value:.3g}"


def measurement_table(measurements: Iterable[Measurement | Mapping[str, Any]]) -> list[str]:
    """Rows of model, benchmark, parameters, value with unit and n, in recording order."""
    return _aligned(
        ("model", "benchmark", "parameters", "value", "n", "outcome"),
        [
            (
                m.model,
                m.benchmark,
                " ".join(f"{k}={v}" for k, v in m.params.items()),
                f"{_format_value(m.value)} {m.unit}".strip(),
                str(m.n),
                m.outcome or "",
            )
            for m in records(measurements)
        ],
    )


def _aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Header, a dashed line and rows, each column as wide as its widest cell."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return [line(header), line(["-" * w for w in widths]), *map(line, rows)]


_IN_UNITS = {Kind.STARTUP.value: "{:.2f} s", Kind.THROUGHPUT.value: "{:.1f}"}
"""How the gate shows a figure of each kind that is not an accuracy (that: in percent)."""


def gate_table(rows: Sequence[GateRow]) -> list[str]:
    """The gate rows: accuracy in % (change in pp), throughput in tokens/s, startup in s."""

    def fmt(row: GateRow, value: float, signed: bool = False) -> str:
        if math.isnan(value):
            return "-"
        if signed:  # a change: in percent, of an accuracy in percentage points
            return f"{100 * value:+.1f}{'%' if row.kind in _IN_UNITS else 'pp'}"
        return _IN_UNITS.get(row.kind, "{:.1%}").format(value)

    return _aligned(
        (
            "model",
            "benchmark",
            "setting",
            "baseline",
            "now",
            "change",
            "interval",
            "status",
            "note",
        ),
        [
            (
                r.model,
                r.benchmark,
                r.setting,
                fmt(r, r.baseline),
                fmt(r, r.current),
                fmt(r, r.change, True),
                "-" if math.isnan(r.low) else f"[{fmt(r, r.low, True)}, {fmt(r, r.high, True)}]",
                r.status.upper() if r.failed else r.status,
                r.note,
            )
            for r in rows
        ],
    )
