"""Baseline comparison: each model × metric × setting against its own earlier result.

Accuracy: the paired bootstrap, *regressed* when the drop is beyond the threshold and the
interval excludes no change. Throughput: the ratio interval, *regressed* when it lies wholly
below 1 - threshold, at its Holm step-down level (docs/throughput.md). Startup: the ratio of
launch → first token against 1 + the startup threshold. Unpaired results are *not comparable*.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..core.measurements import Measurement, StartupStats, ThroughputStats
from ..core.metrics import Kind, metric_for
from ..core.options import DEFAULTS, Thresholds
from ..core.stats.bootstrap import paired_bootstrap, sign_test_p_value
from ..core.stats.holm import holm_step_down
from ..core.stats.intervals import RatioInterval, ratio_interval_between_runs, student_t_cdf
from ..core.stats.sequences import paired_sequence
from .pairing import (
    PairingError,
    RequestSettings,
    check_same_items,
    check_same_requests,
    check_same_serving,
    setting_identity,
)
from .sequential import (
    gate_look_text,
    pair_sequentially,
    sequential_gate_status,
    sequential_population,
)

#: Family-wise error rate, per direction, of one model's throughput rows.
THROUGHPUT_FAMILY_ERROR = 0.05


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
    status: str
    """ok, improved, regressed, not comparable, cannot conclude, new, no interval, unstable
    or contended."""
    note: str = ""
    confidence: float = math.nan
    """Of [low, high] (throughput: its Holm step-down level); NaN without one."""
    noisy_fails: bool = False
    """An unstable or contended row fails the session too (``--fail-on-noisy``)."""
    kind: str = Kind.ACCURACY.value
    """The gated kind: how its values are shown."""

    @property
    def failed(self) -> bool:
        if self.status in NOISY_STATUSES:
            return self.noisy_fails
        return self.status in ("regressed", "not comparable", "cannot conclude")


NOISY_STATUSES = ("unstable", "contended")
"""Rows measured on a noisy or busy machine: never called regressed or ok, only re-run."""


def noise_reason(measurement: Measurement, where: str) -> tuple[str, str] | None:
    """``("contended", why)`` or ``("unstable", why)`` for a noisy throughput measurement."""
    stats = measurement.stats
    if not isinstance(stats, ThroughputStats):
        return None
    name = f"{measurement.model} {measurement.benchmark} {where}"
    if stats.contended:
        return (
            "contended",
            f"contended — re-run on a quiet machine: other processes took CPU during "
            f"{stats.contended_windows} of {len(stats.repeats) or '?'} windows of {name}",
        )
    if stats.unstable:
        cv, limit = stats.cv, stats.unstable_cv_limit
        return (
            "unstable",
            f"unstable — re-run: the repeats of {name} vary by CV "
            f"{'?' if cv is None else f'{100 * cv:.1f}%'}, above "
            f"{'the limit' if limit is None else f'{100 * limit:.0f}%'}",
        )
    return None


def setting_of(measurement: Measurement) -> str:
    """The key a measurement's baseline is found by (:func:`~.pairing.setting_identity`)."""
    return json.dumps(setting_identity(measurement), sort_keys=True, default=str)


def shown_setting_of(measurement: Measurement) -> str:
    """A row's setting as the table shows it, e.g. ``concurrency=4`` or ``limit=200``."""
    shown = setting_identity(measurement)
    if _kind(measurement) is Kind.ACCURACY:  # beside its identity: how many items it holds
        shown = {
            **{k: v for k, v in measurement.params.items() if k in ("limit", "subset")},
            **shown,
        }
    return ", ".join(
        f"{k}={v}" for k, v in sorted(shown.items()) if v is not None and k not in ("metric",)
    )


def _kind(measurement: Measurement) -> Kind | None:
    """The gated kind of a measurement's benchmark, None when it is not gated."""
    metric = metric_for(measurement.benchmark, measurement.unit)
    return metric.kind if metric is not None and metric.gated else None


def gateable(measurements: Iterable[Measurement]) -> list[Measurement]:
    """The measurements the gate compares: those of a gated kind (accuracy, throughput)."""
    return [m for m in measurements if _kind(m) is not None]


def ungated_reason(rows: Sequence[GateRow], current: Sequence[Measurement]) -> str | None:
    """Why a gate compared nothing (every row new, or nothing gated now), else None."""
    if any(row.status != "new" for row in rows):
        return None
    if not rows:
        measured = sorted({m.benchmark for m in current})
        return (
            "compared nothing: this run holds no measurement the gate compares "
            f"(accuracy or throughput; it measured {', '.join(measured) or 'nothing'})"
        )
    first = rows[0]
    return (
        f"compared nothing: none of this run's {len(rows)} gated measurements has one of "
        f"the same model, benchmark and setting in the baseline (first: {first.model} "
        f"{first.benchmark} {first.setting or '(no setting)'})"
    )


def _key(m: Measurement) -> tuple[str, str, str]:
    return (m.model, m.benchmark, setting_of(m))


def compare_with_baseline(
    current: Iterable[Measurement],
    baseline: Iterable[Measurement],
    thresholds: Thresholds,
    *,
    resamples: int = DEFAULTS.resamples,
    noisy_fails: bool = False,
) -> list[GateRow]:
    """Rows for every current measurement of a gated metric: accuracy against the newest of
    ``baseline``'s runs of a setting (oldest first), throughput and startup against all."""
    history: dict[tuple[str, str, str], list[Measurement]] = {}
    for m in baseline:
        history.setdefault(_key(m), []).append(m)
    rows: list[GateRow] = []
    pending: dict[int, RatioInterval] = {}
    for m in current:
        kind = _kind(m)
        if kind is None:
            continue
        setting, runs, interval = shown_setting_of(m), history.get(_key(m)), None
        if not runs:
            row = _unjudged(m, setting, "new", "no baseline for this setting")
        elif kind is Kind.ACCURACY:
            row = _accuracy_row(m, runs[-1], setting, thresholds, resamples)
        else:
            row, interval = _ratio_row(m, runs, setting, kind, thresholds)
        if interval is not None:
            pending[len(rows)] = interval
        rows.append(replace(row, kind=kind.value, noisy_fails=noisy_fails))
    _judge_throughput(rows, pending, thresholds)
    return rows


def _unjudged(
    m: Measurement, setting: str, status: str, note: str, baseline: float = math.nan
) -> GateRow:
    """A row without an interval (new, not comparable, cannot conclude, noisy)."""
    return GateRow(
        m.model, m.benchmark, setting, baseline, m.value, math.nan, math.nan, math.nan, status, note
    )


def _unlike(m: Measurement, old: Measurement, requests: bool = True) -> tuple[str, str] | None:
    """("not comparable", why) ``old`` cannot be paired with ``m`` (server, serving flags,
    requests), or None."""
    now, before = f"{m.model} now", f"{m.model} in the baseline"
    try:
        check_same_serving(now, m.provenance, before, old.provenance)
        if requests:
            check_same_requests(
                now, RequestSettings.of_measurement(m), before, RequestSettings.of_measurement(old)
            )
    except PairingError as error:
        return "not comparable", str(error)
    return None


def _usable_runs(
    m: Measurement,
    runs: Sequence[Measurement],
    setting: str,
    unsound: Callable[[Measurement, str], str | None],
    refused: Callable[[Measurement], tuple[str, str] | None],
) -> tuple[list[Measurement], str] | GateRow:
    """The baseline runs ``m`` can be compared with, and the note on those left out
    (``unsound(measurement, where)``, ``refused(old)``: status, why); or the row saying why
    none can (the newest run's reason)."""
    reason = unsound(m, "now")
    if reason is not None:
        return _unjudged(m, setting, "cannot conclude", reason, runs[-1].value)

    def refusal(old: Measurement) -> tuple[str, str] | None:
        why = unsound(old, "in the baseline")
        return refused(old) if why is None else ("cannot conclude", why)

    checked = [(old, refusal(old)) for old in runs]
    usable = [old for old, why in checked if why is None]
    refusals = [why for _, why in checked if why is not None]
    if not usable:
        return _unjudged(m, setting, *refusals[-1], runs[-1].value)
    left_out = (
        f" ({len(refusals)} older baseline run(s) left out: {refusals[-1][1]})" if refusals else ""
    )
    return usable, left_out


def baseline_history(runs: Iterable[Iterable[Measurement]]) -> list[Measurement]:
    """A baseline's runs (oldest first) as one measurement per run and setting (its last)."""
    return [m for run in runs for m in {_key(m): m for m in run}.values()]


def baseline_of(measurement: Measurement, baseline: Iterable[Measurement]) -> Measurement | None:
    """The newest sound baseline measurement of ``measurement``'s setting, or None."""
    found = [old for old in baseline if _key(old) == _key(measurement)]
    if not found or unsound_reason(found[-1], "in the baseline") is not None:
        return None
    return found[-1]


def unsound_reason(measurement: Measurement, where: str) -> str | None:
    """Why a measurement can support no conclusion (its test failed, items failed); or None."""
    name = f"{measurement.model} {measurement.benchmark} {where}"
    if not measurement.passed:
        return (
            f"{name} comes from a test that {measurement.outcome} "
            f"({measurement.test_id or 'no test id'}); re-run it"
        )
    failed = [r for r in measurement.item_records() if r.failed]
    if failed:
        return (
            f"{len(failed)} of {len(measurement.items)} items of {name} got no "
            f"answer ({failed[0].error}); re-run to resend them"
        )
    return None


def _accuracy_row(
    m: Measurement, old: Measurement, setting: str, thresholds: Thresholds, resamples: int
) -> GateRow:
    """An accuracy row against the newest baseline run: sequential where a side chose its items
    so (``--until-decided``), else the paired bootstrap; unlike items are not comparable."""
    try:
        found = _usable_runs(m, [old], setting, unsound_reason, lambda old: _unlike(m, old))
        if isinstance(found, GateRow):
            return found
        if sequential_population(m) or sequential_population(old):
            return _sequential_accuracy_row(m, old, setting, thresholds)
        return _bootstrap_row(m, old, setting, thresholds, resamples)
    except (PairingError, ValueError) as error:
        return _unjudged(m, setting, "not comparable", str(error), old.value)


def _bootstrap_row(
    m: Measurement, old: Measurement, setting: str, thresholds: Thresholds, resamples: int
) -> GateRow:
    """Regressed when the interval lies below 0 and the drop is beyond the threshold; with too
    few items no interval (never "ok"), but the exact sign test may still find a change."""
    now_items, old_items = m.item_records(), old.item_records()
    check_same_items(f"{m.model} now", now_items, f"{m.model} in the baseline", old_items)
    interval = paired_bootstrap(
        {r.item_id: r.credit for r in now_items},
        {r.item_id: r.credit for r in old_items},
        resamples=resamples,
    )
    note = f"n={interval.n}, discordant={interval.discordant}"
    few = interval.too_few_items
    if few:
        p_value = sign_test_p_value(interval.candidate_ahead, interval.reference_ahead)
        note += (
            f"; {interval.too_few_reason()}; exact sign test: {interval.reference_ahead} items "
            f"worse, {interval.candidate_ahead} better, p={p_value:.3g}"
        )
        worse = p_value < 1 - interval.confidence
        better = worse and interval.difference > 0
    else:
        worse, better = interval.high < 0, interval.low > 0
    if worse and interval.difference <= -thresholds.accuracy_points:
        status = "regressed"
    else:
        status = "improved" if better else "no interval" if few else "ok"
    low, high, confidence = (
        (math.nan,) * 3 if few else (interval.low, interval.high, interval.confidence)
    )
    return GateRow(
        m.model,
        m.benchmark,
        setting,
        interval.reference_mean,
        interval.candidate_mean,
        interval.difference,
        low,
        high,
        status,
        note,
        confidence,
    )


def _sequential_accuracy_row(
    m: Measurement, old: Measurement, setting: str, thresholds: Thresholds
) -> GateRow:
    """An accuracy row where a side's items were chosen sequentially (``--until-decided``),
    judged by :func:`~.sequential.sequential_gate_status` (the rule the run stopped by)."""
    sides = pair_sequentially(
        (f"{m.model} now", m.item_records(), sequential_population(m)),
        (f"{m.model} in the baseline", old.item_records(), sequential_population(old)),
    )
    sequence = paired_sequence(sides.first, sides.second, sides.order, population=None)
    threshold = thresholds.accuracy_points
    status = sequential_gate_status(sequence, threshold, final=True)
    decided = sequential_gate_status(sequence, threshold, final=False) is not None
    interval = sequence.interval()
    used = sides.order[: sequence.n]
    now, before = (
        sum(side[i] for i in used) / len(used) if used else math.nan
        for side in (sides.first, sides.second)
    )
    note = (
        f"sequential, decided after {sequence.n} of {sides.population} items: "
        f"{gate_look_text(sequence, status, threshold)}"
        if decided
        else f"sequential, undecided when the items ran out after {sequence.n} of "
        f"{sides.population}: the fixed-n rule reads the last sequence "
        f"({gate_look_text(sequence, None, threshold).removeprefix('undecided (')}"
    )
    return GateRow(
        m.model,
        m.benchmark,
        setting,
        before,
        now,
        interval.difference,
        interval.low,
        interval.high,
        status or "ok",
        note,
        interval.confidence,
    )


STARTUP_CONFIDENCE = 1 - 2 * THROUGHPUT_FAMILY_ERROR
"""A startup row's two-sided level: 5% per direction (one startup row per model)."""


def _sample(m: Measurement, kind: Kind) -> list[float]:
    """A start's launch → first token times; a throughput setting's repeats (else its value)."""
    stats = m.stats
    if kind is Kind.STARTUP:
        return list(stats.first_token_values) if isinstance(stats, StartupStats) else []
    values = stats.repeat_values if isinstance(stats, ThroughputStats) else ()
    return list(values) if values else [m.value]


def _cache(m: Measurement) -> str:
    return m.stats.cache if isinstance(m.stats, StartupStats) else "unknown"


def _ratio_row(
    m: Measurement, runs: Sequence[Measurement], setting: str, kind: Kind, thresholds: Thresholds
) -> tuple[GateRow, RatioInterval | None]:
    """A throughput or startup row: now ÷ the usable baseline runs (geometric means).

    Throughput: the row before judging and its 95% interval, judged by
    :func:`_judge_throughput` (None when there is none to judge: not comparable, unsound,
    noisy, or a single repeat). Startup (launch → first token, compared only with starts from
    the same cache state): judged here at its 90% interval, regressed when it lies above 1 +
    the startup threshold, improved below 1 − it."""
    startup, cache = kind is Kind.STARTUP, _cache(m)

    def unsound(measured: Measurement, where: str) -> str | None:
        stats = measured.stats
        errors = stats.errors if startup and isinstance(stats, StartupStats) else []
        return unsound_reason(measured, where) or (
            f"{measured.model} startup {where}: {'; '.join(errors)}" if errors else None
        )

    def refused(old: Measurement) -> tuple[str, str] | None:
        if startup and _cache(old) != cache:
            return "not comparable", (
                f"{m.model} started {cache} now and {_cache(old)} in the baseline: a start is "
                "compared only with one from the same cache state"
            )
        return _unlike(m, old, requests=not startup)

    found = _usable_runs(m, runs, setting, unsound, refused)
    if isinstance(found, GateRow):
        return found, None
    usable, left_out = found
    noisy = noise_reason(m, "now") or next(
        (noise for old in usable if (noise := noise_reason(old, "in the baseline"))), None
    )
    if noisy is not None:  # never called a regression (nor ok): measured on a noisy machine
        return _unjudged(m, setting, *noisy, runs[-1].value), None
    try:
        interval = ratio_interval_between_runs(
            _sample(m, kind),
            [_sample(old, kind) for old in usable],
            confidence=STARTUP_CONFIDENCE if startup else 0.95,  # throughput: Holm's start
        )
    except ValueError as error:
        return _unjudged(m, setting, "not comparable", str(error), runs[-1].value), None
    over = f" over {len(usable)} baseline runs" if len(usable) > 1 else ""
    if startup:
        note = (
            f"launches {interval.candidate_n} vs {interval.reference_n}, {cache} starts; "
            f"{STARTUP_CONFIDENCE:.0%} interval of now ÷ baseline, lower is faster"
            f"{',' + over if over else ''}{left_out}"
        )
        low, high, confidence = interval.low - 1, interval.high - 1, STARTUP_CONFIDENCE
        no_interval = (
            "a side has one launch: no interval and no verdict (--startup-launches 2 or more)"
        )
    else:
        note = f"repeats {interval.candidate_n} vs {interval.reference_n}{over}{left_out}"
        low = high = confidence = math.nan
        no_interval = (
            f"one repeat {'now' if interval.candidate_n == 1 else 'in the baseline'}: its "
            "spread is unknown, so no interval and no verdict (run with --repeats 2 or more)"
        )
    row = GateRow(
        m.model,
        m.benchmark,
        setting,
        interval.reference_mean,
        interval.candidate_mean,
        interval.ratio - 1,
        low,
        high,
        "ok",
        note,
        confidence,
    )
    if interval.degenerate:
        return replace(row, status="no interval", note=f"{note}; {no_interval}"), None
    if not startup:
        return row, interval
    fraction = thresholds.startup_fraction
    if interval.low > 1 + fraction:
        return replace(
            row,
            status="regressed",
            note=f"{note}; starts {interval.ratio:.2f}× as long, beyond +{fraction:.0%}",
        ), None
    return replace(row, status="improved" if interval.high < 1 - fraction else "ok"), None


def _threshold_p_value(interval: RatioInterval, thresholds: Thresholds) -> float:
    """Two-sided p-value of "the true ratio lies within 1 ± threshold": twice the smaller
    one-sided t p-value against 1 - threshold (slower) and 1 + threshold (faster)."""
    fraction = thresholds.throughput_fraction
    log_ratio = math.log(interval.ratio)
    lower = math.log(1 - fraction) if fraction < 1 else -math.inf
    upper = math.log(1 + fraction)
    se = interval.log_standard_error
    if se == 0.0:
        return 0.0 if not lower <= log_ratio <= upper else 1.0
    slower = student_t_cdf((log_ratio - lower) / se, interval.df)
    faster = 1.0 - student_t_cdf((log_ratio - upper) / se, interval.df)
    return min(1.0, 2.0 * min(slower, faster))


def _judge_throughput(
    rows: list[GateRow], intervals: Mapping[int, RatioInterval], thresholds: Thresholds
) -> None:
    """Holm step-down over each model's throughput rows (in place): by ascending
    :func:`_threshold_p_value`, the r-th (0-based) of m at confidence 1 - 2a/(m - r); stepping
    stops at the first row neither regressed nor improved, later rows keep its interval."""
    by_model: dict[str, list[int]] = {}
    for index in intervals:
        by_model.setdefault(rows[index].model, []).append(index)
    fraction = thresholds.throughput_fraction
    for members in by_model.values():

        def test(index: int, level: float) -> tuple[bool, tuple[RatioInterval, str]]:
            interval = intervals[index].at_confidence(1.0 - level)
            status = (
                "regressed"
                if interval.high < 1 - fraction
                else "improved"
                if interval.low > 1 + fraction
                else "ok"
            )
            return status != "ok", (interval, status)

        steps = holm_step_down(
            {i: _threshold_p_value(intervals[i], thresholds) for i in members},
            2 * THROUGHPUT_FAMILY_ERROR,
            test,
        )
        for index, step in steps.items():
            interval, status = step.result
            rows[index] = replace(
                rows[index],
                low=interval.low - 1,
                high=interval.high - 1,
                status=status if step.rejected else "ok",
                confidence=1.0 - step.alpha,
                note=f"{rows[index].note}; {1.0 - step.alpha:.1%} interval, Holm step "
                f"{step.rank + 1} of {len(steps)}",
            )
