"""The terminal summary table of a run's measurements."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.measurements import Measurement
from .tables import records


def _format_value(value: float) -> str:
    if value == 0 or 0.01 <= abs(value) < 1e6:
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1 else f"{value:,.1f}"
    return f"{value:.3g}"


def measurement_table(measurements: Iterable[Measurement | Mapping[str, Any]]) -> list[str]:
    """Rows of model, benchmark, parameters, value with unit and n, in recording order."""
    header = ("model", "benchmark", "parameters", "value", "n", "outcome")
    rows = [(m.model, m.benchmark, " ".join(f"{k}={v}" for k, v in m.params.items()),
             f"{_format_value(m.value)} {m.unit}".strip(), str(m.n), m.outcome or "")
            for m in records(measurements)]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return [line(header), line(["-" * w for w in widths]), *map(line, rows)]
