"""The terminal summary table of a run's measurements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _format_value(value: float) -> str:
    if value == 0 or 0.01 <= abs(value) < 1e6:
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1 else f"{value:,.1f}"
    return f"{value:.3g}"


def _format_params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def measurement_table(measurements: Sequence[dict[str, Any]]) -> list[str]:
    """Rows of model, benchmark, parameters, value with unit and n, in recording order."""
    header = ("model", "benchmark", "parameters", "value", "n", "outcome")
    rows = [
        (
            str(m.get("model", "")),
            str(m.get("benchmark", "")),
            _format_params(m.get("params", {})),
            f"{_format_value(float(m.get('value', 0.0)))} {m.get('unit', '')}".strip(),
            str(m.get("n", "")),
            str(m.get("outcome", "")),
        )
        for m in measurements
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return [line(header), line(["-" * w for w in widths]), *map(line, rows)]
