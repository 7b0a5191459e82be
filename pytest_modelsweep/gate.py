"""Baseline comparison: each model × metric against its own earlier result → pass or regress.

Accuracy is compared item by item (the same paired bootstrap as verdicts);
throughput as a ratio of means over repeats with a bootstrap interval. A row
*regresses* when the change is beyond the threshold **and** its interval
excludes no-change, so noise alone never fails a build. Results that cannot
be paired (other server, image, settings or items) are *not comparable*,
which fails the gate too: re-save the baseline after a deliberate change.

Which benchmarks are compared, and how, comes from the metric table
(:mod:`.metrics`): every metric of a gated kind (accuracy, throughput).
Smoke is not gated: a single short generation has no repeats, so its
interval would be degenerate and one noisy timing could fail a build.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .comparisons import passed
from .errors import ModelsweepError
from .metrics import Kind, metric_for
from .pairing import PairingError, check_same_items, check_same_serving
from .records import ItemRecord
from .stats import paired_bootstrap, ratio_interval

DEFAULT_THRESHOLDS = "accuracy:1pp,throughput:10%"


@dataclass(frozen=True)
class Thresholds:
    """How much worse a metric may get before the gate fails."""

    accuracy_points: float = 0.01
    throughput_fraction: float = 0.10


def parse_thresholds(text: str) -> Thresholds:
    """``"accuracy:1pp,throughput:10%"`` → :class:`Thresholds` (one-line error otherwise)."""
    accuracy, throughput = Thresholds().accuracy_points, Thresholds().throughput_fraction
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, amount = part.partition(":")
        match = re.fullmatch(r"(\d+(?:\.\d+)?)(pp|%)", amount.strip())
        if kind == "accuracy" and match and match.group(2) == "pp":
            accuracy = float(match.group(1)) / 100
        elif kind == "throughput" and match and match.group(2) == "%":
            throughput = float(match.group(1)) / 100
        else:
            raise ModelsweepError(
                f"--fail-on-regression {text!r}: expected e.g. accuracy:1pp,throughput:10% "
                f"(accuracy in percentage points, throughput in percent); {part!r} is not that"
            )
    return Thresholds(accuracy, throughput)


@dataclass(frozen=True)
class GateRow:
    """One model × benchmark × setting against its baseline."""

    model: str
    benchmark: str
    setting: str
    baseline: float
    current: float
    change: float
    low: float
    high: float
    status: str  # ok | improved | regressed | not comparable | cannot conclude | new
    note: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("regressed", "not comparable", "cannot conclude")


_VOLATILE_PARAMS = ("worker", "port", "repeat", "repeats", "timed_requests")
# An accuracy result is compared with the baseline's on the same items; how it was obtained
# (answer length, prompting, mode) is exactly what a regression test should judge.
_ACCURACY_KEY_PARAMS = ("limit", "subset", "category")


def setting_of(measurement: dict[str, Any]) -> str:
    """The part of a measurement's parameters that must match its baseline's."""
    params = measurement.get("params") or {}
    if _kind(str(measurement.get("benchmark"))) is Kind.ACCURACY:
        kept = {k: v for k, v in params.items() if k in _ACCURACY_KEY_PARAMS}
    else:
        kept = {k: v for k, v in params.items() if k not in _VOLATILE_PARAMS}
    return json.dumps(kept, sort_keys=True, default=str)


def _kind(benchmark: str) -> Kind | None:
    """The gated kind of a benchmark (accuracy or throughput), None when it is not gated."""
    metric = metric_for(benchmark)
    return metric.kind if metric is not None and metric.gated else None


def _key(m: dict[str, Any]) -> tuple[str, str, str]:
    return (str(m.get("model")), str(m.get("benchmark")), setting_of(m))


def _items(m: dict[str, Any]) -> list[ItemRecord]:
    return [ItemRecord.from_dict(d) for d in m.get("items") or []]


def _repeat_values(m: dict[str, Any]) -> list[float]:
    values = (m.get("stats") or {}).get("repeat_values")
    return [float(v) for v in values] if values else [float(m["value"])]


def compare_with_baseline(
    current: Iterable[dict[str, Any]],
    baseline: Iterable[dict[str, Any]],
    thresholds: Thresholds,
    *,
    resamples: int = 10_000,
) -> list[GateRow]:
    """Rows for every current measurement of a gated metric (accuracy, throughput)."""
    earlier = {_key(m): m for m in baseline}
    rows: list[GateRow] = []
    for m in current:
        benchmark = str(m.get("benchmark"))
        kind = _kind(benchmark)
        if kind is None:
            continue
        key = _key(m)
        shown_setting = ", ".join(f"{k}={v}" for k, v in json.loads(key[2]).items()
                                  if v is not None and k not in ("metric",))
        old = earlier.get(key)
        if old is None:
            rows.append(GateRow(key[0], benchmark, shown_setting, float("nan"), float(m["value"]),
                                float("nan"), float("nan"), float("nan"), "new",
                                "no baseline for this setting"))
            continue
        unsound = unsound_reason(m, "now") or unsound_reason(old, "in the baseline")
        if unsound is not None:
            rows.append(GateRow(key[0], benchmark, shown_setting, float(old["value"]),
                                float(m["value"]), float("nan"), float("nan"), float("nan"),
                                "cannot conclude", unsound))
            continue
        try:
            check_same_serving(f"{key[0]} now", m.get("provenance") or {},
                               f"{key[0]} in the baseline", old.get("provenance") or {})
            if kind is Kind.ACCURACY:
                rows.append(_accuracy_row(m, old, key, shown_setting, thresholds, resamples))
            else:
                rows.append(_throughput_row(m, old, key, shown_setting, thresholds, resamples))
        except (PairingError, ValueError) as error:
            rows.append(GateRow(key[0], benchmark, shown_setting, float(old["value"]),
                                float(m["value"]), float("nan"), float("nan"), float("nan"),
                                "not comparable", str(error)))
    return rows


def unsound_reason(measurement: Mapping[str, Any], where: str) -> str | None:
    """Why a measurement can support no conclusion (its test failed, items failed); or None."""
    name = f"{measurement.get('model')} {measurement.get('benchmark')} {where}"
    if not passed(measurement):
        return (f"{name} comes from a test that {measurement.get('outcome')} "
                f"({measurement.get('test_id') or 'no test id'}); re-run it")
    failed = [r for r in _items(dict(measurement)) if r.failed]
    if failed:
        return (f"{len(failed)} of {len(measurement.get('items') or [])} items of {name} got no "
                f"answer ({failed[0].error}); re-run to resend them")
    return None


def _accuracy_row(m: dict[str, Any], old: dict[str, Any], key: tuple[str, str, str],
                  setting: str, thresholds: Thresholds, resamples: int) -> GateRow:
    now_items, old_items = _items(m), _items(old)
    check_same_items(f"{key[0]} now", now_items, f"{key[0]} in the baseline", old_items)
    interval = paired_bootstrap(
        {r.item_id: float(r.correct) for r in now_items},
        {r.item_id: float(r.correct) for r in old_items},
        resamples=resamples,
    )
    status = "ok"
    if interval.high < 0 and interval.difference <= -thresholds.accuracy_points:
        status = "regressed"
    elif interval.low > 0:
        status = "improved"
    return GateRow(key[0], key[1], setting, interval.reference_mean, interval.candidate_mean,
                   interval.difference, interval.low, interval.high, status,
                   f"n={interval.n}, discordant={interval.discordant}")


def _throughput_row(m: dict[str, Any], old: dict[str, Any], key: tuple[str, str, str],
                    setting: str, thresholds: Thresholds, resamples: int) -> GateRow:
    ratio = ratio_interval(_repeat_values(m), _repeat_values(old), resamples=resamples)
    status = "ok"
    if ratio.ratio <= 1 - thresholds.throughput_fraction and ratio.high < 1:
        status = "regressed"
    elif ratio.low > 1 + thresholds.throughput_fraction:
        status = "improved"
    note = f"repeats {ratio.candidate_n} vs {ratio.reference_n}"
    if ratio.degenerate:
        note += " (one repeat: no interval)"
    return GateRow(key[0], key[1], setting, ratio.reference_mean, ratio.candidate_mean,
                   ratio.ratio - 1, ratio.low - 1, ratio.high - 1, status, note)


def gate_table(rows: Sequence[GateRow]) -> list[str]:
    """An aligned text table of the gate rows (change in points for accuracy, % for throughput)."""
    def fmt(row: GateRow, value: float, signed: bool = False) -> str:
        if math.isnan(value):
            return "-"
        if _kind(row.benchmark) is Kind.ACCURACY:
            return f"{100 * value:+.1f}pp" if signed else f"{100 * value:.1f}%"
        return f"{100 * value:+.1f}%" if signed else f"{value:.1f}"

    header = ("model", "benchmark", "setting", "baseline", "now", "change", "95% interval",
              "status", "note")
    body = [
        (r.model, r.benchmark, r.setting, fmt(r, r.baseline), fmt(r, r.current),
         fmt(r, r.change, True),
         "-" if math.isnan(r.low) else f"[{fmt(r, r.low, True)}, {fmt(r, r.high, True)}]",
         r.status.upper() if r.failed else r.status, r.note)
        for r in rows
    ]
    widths = [max(len(str(x[i])) for x in [header, *body]) for i in range(len(header))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip()
            for line in [header, tuple("-" * w for w in widths), *body]]
