"""Service-level objectives per request, and goodput: how much of the work met them.

A request is *good* when it succeeded and meets every target given (``ttft``, ``tpot``,
``e2e``; as ``vllm bench serve --goodput``). Per window: ``slo_attainment`` = good ÷ sent,
``goodput_rps`` = good ÷ the window's duration. Works on stored request records, so it can
be recomputed from the results file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ModelsweepError

TARGETS = ("ttft", "tpot", "e2e")
"""The latencies a ``--slo`` may bound, in the order they are shown."""

_UNITS_MS = {"ms": 1.0, "s": 1000.0}
_ITEM = re.compile(r"^\s*(ttft|tpot|e2e)\s*=\s*([0-9]*\.?[0-9]+)\s*(ms|s)\s*$", re.IGNORECASE)
SLO_EXAMPLE = "ttft=500ms,tpot=50ms (also e2e=; units ms or s)"


class SloError(ModelsweepError):
    """A ``--slo`` value that cannot be read."""


@dataclass(frozen=True)
class Slo:
    """Latency targets per request, in milliseconds; None: no target on that latency."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def targets(self) -> dict[str, float]:
        """The given targets, ``{"ttft": 500.0, ...}`` in milliseconds."""
        found = {"ttft": self.ttft_ms, "tpot": self.tpot_ms, "e2e": self.e2e_ms}
        return {name: value for name, value in found.items() if value is not None}

    def __str__(self) -> str:
        return ",".join(f"{name}={value:g}ms" for name, value in self.targets().items())

    def as_dict(self) -> dict[str, float]:
        """JSON-friendly: ``{"ttft_ms": 500.0, "tpot_ms": 50.0}``."""
        return {f"{name}_ms": value for name, value in self.targets().items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Slo:
        """The inverse of :meth:`as_dict`."""
        return cls(
            **{
                f"{name}_ms": float(data[f"{name}_ms"])
                for name in TARGETS
                if data.get(f"{name}_ms") is not None
            }
        )


def parse_slo(text: str) -> Slo:
    """``"ttft=500ms,tpot=50ms"`` → :class:`Slo`; a one-line :class:`SloError` otherwise."""
    found: dict[str, float] = {}
    parts = [part for part in str(text).split(",") if part.strip()]
    if not parts:
        raise SloError(f"--slo: expected targets such as {SLO_EXAMPLE}, got {text!r}")
    for part in parts:
        match = _ITEM.match(part)
        if match is None:
            raise SloError(f"--slo: cannot read {part.strip()!r}; expected e.g. {SLO_EXAMPLE}")
        name, number, unit = match.group(1).lower(), float(match.group(2)), match.group(3).lower()
        if name in found:
            raise SloError(f"--slo: {name} is given twice in {text!r}; give each target once")
        if not number > 0:
            raise SloError(f"--slo: {name} must be a positive time, got {part.strip()!r}")
        found[name] = number * _UNITS_MS[unit]
    return Slo(**{f"{name}_ms": value for name, value in found.items()})


def request_latencies_ms(record: Mapping[str, Any]) -> dict[str, float | None]:
    """TTFT, TPOT and E2E of one stored request record, in ms (None where undefined); TPOT
    as vLLM: (E2E − TTFT) / (output tokens − 1)."""
    start, end = float(record["start"]), float(record["end"])
    first = record.get("first_token")
    tokens = record.get("completion_tokens")
    ttft = None if first is None else (float(first) - start) * 1e3
    e2e = (end - start) * 1e3
    tpot = (
        (e2e - ttft) / (int(tokens) - 1)
        if ttft is not None and tokens is not None and int(tokens) >= 2
        else None
    )
    return {"ttft": ttft, "tpot": tpot, "e2e": e2e}


def is_good(record: Mapping[str, Any], slo: Slo) -> bool:
    """Whether one request succeeded and met every target of ``slo``; fewer than two output
    tokens count TPOT as 0 (as vLLM), a latency the record lacks does not meet its target."""
    if record.get("error"):
        return False
    latencies = request_latencies_ms(record)
    tokens = record.get("completion_tokens")
    if latencies["tpot"] is None and tokens is not None and int(tokens) < 2:
        latencies["tpot"] = 0.0
    targets = slo.targets()
    return not any(
        value is None or value > limit
        for value, limit in zip(map(latencies.get, targets), targets.values(), strict=True)
    )


@dataclass(frozen=True)
class Goodput:
    """One window's goodput under an SLO."""

    good: int
    requests: int
    duration_s: float

    @property
    def slo_attainment(self) -> float | None:
        """Share of the window's requests that met every target; None without requests."""
        return self.good / self.requests if self.requests else None

    @property
    def goodput_rps(self) -> float | None:
        """Good requests per second of the window; None for an empty window."""
        return self.good / self.duration_s if self.duration_s > 0 else None

    def figures(self) -> GoodputFigures:
        """The window's goodput as a measurement records it."""
        return GoodputFigures(self.goodput_rps, self.slo_attainment, self.good, self.requests)


def window_goodput(records: Iterable[Mapping[str, Any]], slo: Slo, duration_s: float) -> Goodput:
    """Goodput of one timed window's request records over its duration."""
    listed = list(records)
    return Goodput(
        good=sum(1 for r in listed if is_good(r, slo)),
        requests=len(listed),
        duration_s=float(duration_s),
    )


def _mean(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None


@dataclass(frozen=True)
class GoodputFigures:
    """Goodput as a measurement records it: of one window (``slo`` None: the setting's
    holds it), or of a setting over its repeats (``slo`` its targets)."""

    goodput_rps: float | None
    slo_attainment: float | None
    good: int
    requests: int
    slo: Slo | None = None


def goodput_stats(slo: Slo, windows: Sequence[Goodput]) -> GoodputFigures:
    """A measurement's goodput over its repeats: means of the rates, totals of the counts."""
    return GoodputFigures(
        _mean(w.goodput_rps for w in windows),
        _mean(w.slo_attainment for w in windows),
        sum(w.good for w in windows),
        sum(w.requests for w in windows),
        slo,
    )
