"""Baseline comparison: each model × metric against its own earlier result → pass or regress.

Accuracy is compared item by item (the same paired bootstrap as verdicts): a row
*regresses* when the drop is beyond the threshold **and** its interval excludes
no-change.

Throughput is compared on log tokens/s (a ratio of geometric means): against a
baseline of one run, a Welch t interval over the two runs' repeats; against a
baseline of several runs (``--save-baseline NAME`` repeated), the random-effects
interval of :func:`~pytest_modelsweep.core.stats.ratio_interval_between_runs`, which
adds the run-to-run variance that repeats inside one server process cannot see.
A throughput row *regresses* only when its **whole interval** lies below
1 - threshold (*improved*: wholly above 1 + threshold), each interval at its
Holm step-down level across the model's throughput rows in the comparison
(family-wise error 5% per direction), so an unchanged model fails a build at most
5% of the time however many settings it has. A row with a single repeat on
either side has no interval: status ``no interval``, not judged, not a failure.
docs/throughput.md gives the method and the simulation behind it.

Startup (launch → first token over fresh launches) is compared like throughput, as a
ratio of geometric means over the launches with its t interval (against several baseline
runs, the random-effects one), lower being better: it *regresses* when the whole 90%
interval (5% per direction, one row per model) lies above 1 + the startup threshold (25%
by default: ``--fail-on-regression startup:X%``), so a server that starts 2× slower fails
the gate. A start measured with another cache state than the baseline's (a warm page
cache against a cold one) is *not comparable*.

Results that cannot be paired (other server, image, settings or items) are *not
comparable*, which fails the gate too: re-save the baseline after a deliberate change.

Which benchmarks are compared, and how, comes from the metric table
(:mod:`..core.metrics`): every metric of a gated kind (accuracy, throughput).
Smoke is not gated: a single short generation has no repeats, so its
interval would be degenerate and one noisy timing could fail a build.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..core.measurements import Measurement, StartupStats, ThroughputStats
from ..core.metrics import Kind, metric_for
from ..core.options import DEFAULTS, Thresholds
from ..core.sequences import paired_sequence
from ..core.stats import (
    RatioInterval,
    paired_bootstrap,
    ratio_interval_between_runs,
    sign_test_p_value,
    student_t_cdf,
)
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

#: Family-wise error rate, per direction, of the throughput rows of one model: the chance
#: that an unchanged model has any row flagged regressed (or any flagged improved).
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
    # ok | improved | regressed | not comparable | cannot conclude | new | no interval
    # | unstable | contended
    status: str
    note: str = ""
    #: confidence of [low, high] (throughput: its Holm step-down level); NaN without one
    confidence: float = math.nan
    #: an unstable or contended row fails the session too (``--fail-on-noisy``)
    noisy_fails: bool = False
    #: the gated kind (``accuracy``, ``throughput``): how its values are shown
    kind: str = Kind.ACCURACY.value

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
        windows = stats.contended_windows
        total = len(stats.repeats) or "?"
        return ("contended", f"contended — re-run on a quiet machine: other processes took "
                f"CPU during {windows} of {total} windows of {name}")
    if stats.unstable:
        cv, limit = stats.cv, stats.unstable_cv_limit
        shown = "?" if cv is None else f"{100 * cv:.1f}%"
        bound = "the limit" if limit is None else f"{100 * limit:.0f}%"
        return ("unstable", f"unstable — re-run: the repeats of {name} vary by CV {shown}, "
                f"above {bound}")
    return None


def setting_of(measurement: Measurement) -> str:
    """Which setting a measurement is (:func:`~.pairing.setting_identity`): the key its
    baseline is found by. Request settings are not part of it: a measurement whose requests
    were sent otherwise than its baseline's is *not comparable*, never a new setting."""
    return json.dumps(setting_identity(measurement), sort_keys=True, default=str)


_SHOWN_ACCURACY_PARAMS = ("limit", "subset")
"""Shown in an accuracy row's setting beside its identity: how many items it holds."""


def shown_setting_of(measurement: Measurement) -> str:
    """A row's setting as the table shows it, e.g. ``concurrency=4`` or ``limit=200``."""
    shown = setting_identity(measurement)
    if _kind(measurement) is Kind.ACCURACY:
        shown = {**{k: v for k, v in measurement.params.items() if k in _SHOWN_ACCURACY_PARAMS},
                 **shown}
    return ", ".join(f"{k}={v}" for k, v in sorted(shown.items())
                     if v is not None and k not in ("metric",))


def _kind(measurement: Measurement) -> Kind | None:
    """The gated kind of a measurement's benchmark (accuracy or throughput), None when it is
    not gated; a user's benchmark is accuracy by its unit (:func:`~..core.metrics.metric_for`)."""
    metric = metric_for(measurement.benchmark, measurement.unit)
    return metric.kind if metric is not None and metric.gated else None


def gateable(measurements: Iterable[Measurement]) -> list[Measurement]:
    """The measurements the gate compares: those of a gated kind (accuracy, throughput)."""
    return [m for m in measurements if _kind(m) is not None]


def ungated_reason(rows: Sequence[GateRow], current: Sequence[Measurement]) -> str | None:
    """Why a gate compared nothing (every row new, or nothing of a gated kind now); None
    when at least one row was compared with the baseline."""
    if any(row.status != "new" for row in rows):
        return None
    if not rows:
        measured = sorted({m.benchmark for m in current})
        return ("compared nothing: this run holds no measurement the gate compares "
                f"(accuracy or throughput; it measured {', '.join(measured) or 'nothing'})")
    first = rows[0]
    return (f"compared nothing: none of this run's {len(rows)} gated measurements has one of "
            f"the same model, benchmark and setting in the baseline (first: {first.model} "
            f"{first.benchmark} {first.setting or '(no setting)'})")


def _key(m: Measurement) -> tuple[str, str, str]:
    return (m.model, m.benchmark, setting_of(m))


def _repeat_values(m: Measurement) -> list[float]:
    values = m.stats.repeat_values if isinstance(m.stats, ThroughputStats) else ()
    return list(values) if values else [m.value]


def compare_with_baseline(
    current: Iterable[Measurement],
    baseline: Iterable[Measurement],
    thresholds: Thresholds,
    *,
    resamples: int = DEFAULTS.resamples,
    noisy_fails: bool = False,
) -> list[GateRow]:
    """Rows for every current measurement of a gated metric (accuracy, throughput).

    ``baseline`` may hold several runs' measurements of one setting (a baseline's
    history, oldest first): accuracy is compared with the newest, throughput with
    all of them (:func:`ratio_interval_between_runs`).  ``resamples`` is the
    accuracy bootstrap's; throughput intervals are closed-form.
    """
    history: dict[tuple[str, str, str], list[Measurement]] = {}
    for m in baseline:
        history.setdefault(_key(m), []).append(m)
    rows: list[GateRow] = []
    pending: dict[int, RatioInterval] = {}
    kinds: dict[tuple[str, str], str] = {}
    for m in current:
        benchmark = m.benchmark
        kind = _kind(m)
        if kind is None:
            continue
        kinds[(m.model, benchmark)] = kind.value
        key = _key(m)
        shown_setting = shown_setting_of(m)
        runs = history.get(key)
        if not runs:
            rows.append(GateRow(key[0], benchmark, shown_setting, float("nan"), m.value,
                                float("nan"), float("nan"), float("nan"), "new",
                                "no baseline for this setting"))
            continue
        old = runs[-1]
        if kind is Kind.STARTUP:
            rows.append(_startup_row(m, runs, key, shown_setting, thresholds))
            continue
        if kind is Kind.THROUGHPUT:
            row, interval = _throughput_row(m, runs, key, shown_setting)
            if row.status in NOISY_STATUSES:
                row = replace(row, noisy_fails=noisy_fails)
            if interval is not None:
                pending[len(rows)] = interval
            rows.append(row)
            continue
        unsound = unsound_reason(m, "now") or unsound_reason(old, "in the baseline")
        if unsound is not None:
            rows.append(GateRow(key[0], benchmark, shown_setting, old.value, m.value,
                                float("nan"), float("nan"), float("nan"), "cannot conclude",
                                unsound))
            continue
        try:
            check_same_serving(f"{key[0]} now", m.provenance,
                               f"{key[0]} in the baseline", old.provenance)
            check_same_requests(f"{key[0]} now", RequestSettings.of_measurement(m),
                                f"{key[0]} in the baseline", RequestSettings.of_measurement(old))
            if sequential_population(m) or sequential_population(old):
                rows.append(_sequential_accuracy_row(m, old, key, shown_setting, thresholds))
            else:
                rows.append(_accuracy_row(m, old, key, shown_setting, thresholds, resamples))
        except (PairingError, ValueError) as error:
            rows.append(GateRow(key[0], benchmark, shown_setting, old.value, m.value,
                                float("nan"), float("nan"), float("nan"), "not comparable",
                                str(error)))
    _judge_throughput(rows, pending, thresholds)
    return [replace(row, kind=kinds[(row.model, row.benchmark)]) for row in rows]


def baseline_history(runs: Iterable[Iterable[Measurement]]) -> list[Measurement]:
    """The measurements of a baseline's runs (oldest first) as :func:`compare_with_baseline`
    takes them: one measurement per run and setting (a run's last one)."""
    out: list[Measurement] = []
    for run in runs:
        out += list({_key(m): m for m in run}.values())
    return out


def baseline_of(measurement: Measurement, baseline: Iterable[Measurement]) -> Measurement | None:
    """The baseline measurement ``measurement`` is gated against (the newest of its model,
    benchmark and setting), when it is sound; None otherwise."""
    found = [old for old in baseline if _key(old) == _key(measurement)]
    if not found or unsound_reason(found[-1], "in the baseline") is not None:
        return None
    return found[-1]


def unsound_reason(measurement: Measurement, where: str) -> str | None:
    """Why a measurement can support no conclusion (its test failed, items failed); or None."""
    name = f"{measurement.model} {measurement.benchmark} {where}"
    if not measurement.passed:
        return (f"{name} comes from a test that {measurement.outcome} "
                f"({measurement.test_id or 'no test id'}); re-run it")
    failed = [r for r in measurement.item_records() if r.failed]
    if failed:
        return (f"{len(failed)} of {len(measurement.items)} items of {name} got no "
                f"answer ({failed[0].error}); re-run to resend them")
    return None


def _accuracy_row(m: Measurement, old: Measurement, key: tuple[str, str, str],
                  setting: str, thresholds: Thresholds, resamples: int) -> GateRow:
    now_items, old_items = m.item_records(), old.item_records()
    check_same_items(f"{key[0]} now", now_items, f"{key[0]} in the baseline", old_items)
    interval = paired_bootstrap(
        {r.item_id: r.credit for r in now_items},
        {r.item_id: r.credit for r in old_items},
        resamples=resamples,
    )
    note = f"n={interval.n}, discordant={interval.discordant}"
    if interval.too_few_items:
        # no interval with its coverage: never "ok", but a change the exact sign test finds
        # (at the interval's level) is still a regression or an improvement
        p_value = sign_test_p_value(interval.candidate_ahead, interval.reference_ahead)
        exact = (f"exact sign test: {interval.reference_ahead} items worse, "
                 f"{interval.candidate_ahead} better, p={p_value:.3g}")
        status = "no interval"
        if p_value < 1 - interval.confidence:
            if interval.difference <= -thresholds.accuracy_points:
                status = "regressed"
            elif interval.difference > 0:
                status = "improved"
        return GateRow(key[0], key[1], setting, interval.reference_mean, interval.candidate_mean,
                       interval.difference, math.nan, math.nan, status,
                       f"{note}; {interval.too_few_reason()}; {exact}")
    status = "ok"
    if interval.high < 0 and interval.difference <= -thresholds.accuracy_points:
        status = "regressed"
    elif interval.low > 0:
        status = "improved"
    return GateRow(key[0], key[1], setting, interval.reference_mean, interval.candidate_mean,
                   interval.difference, interval.low, interval.high, status, note,
                   interval.confidence)


def _sequential_accuracy_row(m: Measurement, old: Measurement, key: tuple[str, str, str],
                             setting: str, thresholds: Thresholds) -> GateRow:
    """An accuracy row where a side's items were chosen sequentially (``--until-decided``):
    the confidence sequence of now − baseline over the common prefix of the seeded order,
    judged by :func:`~.sequential.sequential_gate_status` (the rule the run stopped by)."""
    sides = pair_sequentially(
        (f"{key[0]} now", m.item_records(), sequential_population(m)),
        (f"{key[0]} in the baseline", old.item_records(), sequential_population(old)))
    sequence = paired_sequence(sides.first, sides.second, sides.order, population=None)
    threshold = thresholds.accuracy_points
    status = sequential_gate_status(sequence, threshold, final=True)
    decided = sequential_gate_status(sequence, threshold, final=False) is not None
    interval = sequence.interval()
    used = sides.order[:sequence.n]
    now = sum(sides.first[i] for i in used) / len(used) if used else math.nan
    before = sum(sides.second[i] for i in used) / len(used) if used else math.nan
    if decided:
        note = (f"sequential, decided after {sequence.n} of {sides.population} items: "
                f"{gate_look_text(sequence, status, threshold)}")
    else:
        note = (f"sequential, undecided when the items ran out after {sequence.n} of "
                f"{sides.population}: the fixed-n rule reads the last sequence "
                f"({gate_look_text(sequence, None, threshold).removeprefix('undecided (')}")
    return GateRow(key[0], key[1], setting, before, now, interval.difference, interval.low,
                   interval.high, status or "ok", note, interval.confidence)


def _throughput_row(
    m: Measurement, runs: Sequence[Measurement], key: tuple[str, str, str], setting: str,
) -> tuple[GateRow, RatioInterval | None]:
    """The row of one throughput setting before judging, and its 95% interval (None when
    there is none to judge: not comparable, unsound, or a single repeat)."""
    def unjudged(status: str, note: str, baseline: float = math.nan) -> tuple[GateRow, None]:
        return GateRow(key[0], key[1], setting, baseline, m.value, math.nan,
                       math.nan, math.nan, status, note), None

    newest = runs[-1]
    unsound = unsound_reason(m, "now")
    if unsound is not None:
        return unjudged("cannot conclude", unsound, newest.value)
    usable: list[Measurement] = []
    refusals: list[tuple[str, str]] = []
    for old in runs:
        reason = unsound_reason(old, "in the baseline")
        if reason is not None:
            refusals.append(("cannot conclude", reason))
            continue
        try:
            check_same_serving(f"{key[0]} now", m.provenance,
                               f"{key[0]} in the baseline", old.provenance)
            check_same_requests(f"{key[0]} now", RequestSettings.of_measurement(m),
                                f"{key[0]} in the baseline", RequestSettings.of_measurement(old))
        except PairingError as error:
            refusals.append(("not comparable", str(error)))
            continue
        usable.append(old)
    if not usable:  # the newest baseline run's reason
        return unjudged(*refusals[-1], newest.value)
    noisy = noise_reason(m, "now") or next(
        (noise for old in usable if (noise := noise_reason(old, "in the baseline"))), None)
    if noisy is not None:  # never called a regression (nor ok): measured on a noisy machine
        return unjudged(*noisy, newest.value)
    try:
        interval = ratio_interval_between_runs(
            _repeat_values(m), [_repeat_values(old) for old in usable])
    except ValueError as error:
        return unjudged("not comparable", str(error), newest.value)
    note = f"repeats {interval.candidate_n} vs {interval.reference_n}"
    if len(usable) > 1:
        note += f" over {len(usable)} baseline runs"
    if refusals:
        note += f" ({len(refusals)} older baseline run(s) left out: {refusals[-1][1]})"
    row = GateRow(key[0], key[1], setting, interval.reference_mean, interval.candidate_mean,
                  interval.ratio - 1, math.nan, math.nan, "ok", note)
    if interval.degenerate:
        side = "now" if interval.candidate_n == 1 else "in the baseline"
        return replace(row, status="no interval",
                       note=note + f"; one repeat {side}: its spread is unknown, so no "
                       "interval and no verdict (run with --repeats 2 or more)"), None
    return row, interval


STARTUP_CONFIDENCE = 1 - 2 * THROUGHPUT_FAMILY_ERROR
"""A startup row's two-sided level: 5% per direction (one startup row per model)."""


def _startup_values(m: Measurement) -> list[float]:
    stats = m.stats
    return list(stats.first_token_values) if isinstance(stats, StartupStats) else []


def _startup_row(m: Measurement, runs: Sequence[Measurement], key: tuple[str, str, str],
                 setting: str, thresholds: Thresholds) -> GateRow:
    """A model's start now against its baseline's: the ratio of geometric means of launch →
    first token (now ÷ baseline: above 1 is slower) with its 90% interval; regressed when
    the whole interval lies above 1 + the startup threshold, improved when below 1 − it."""
    def unjudged(status: str, note: str, baseline: float = math.nan) -> GateRow:
        return GateRow(key[0], key[1], setting, baseline, m.value, math.nan, math.nan,
                       math.nan, status, note)

    newest = runs[-1]
    stats = m.stats
    unsound = unsound_reason(m, "now") or (
        f"{m.model} startup now: {'; '.join(stats.errors)}"
        if isinstance(stats, StartupStats) and stats.errors else None)
    if unsound is not None:
        return unjudged("cannot conclude", unsound, newest.value)
    usable: list[Measurement] = []
    refusals: list[tuple[str, str]] = []
    cache = stats.cache if isinstance(stats, StartupStats) else "unknown"
    for old in runs:
        old_stats = old.stats
        reason = unsound_reason(old, "in the baseline")
        if reason is None and isinstance(old_stats, StartupStats) and old_stats.errors:
            reason = f"{old.model} startup in the baseline: {'; '.join(old_stats.errors)}"
        if reason is not None:
            refusals.append(("cannot conclude", reason))
            continue
        old_cache = old_stats.cache if isinstance(old_stats, StartupStats) else "unknown"
        if old_cache != cache:
            refusals.append(("not comparable", (
                f"{m.model} started {cache} now and {old_cache} in the baseline: a start is "
                "compared only with one from the same cache state")))
            continue
        try:
            check_same_serving(f"{key[0]} now", m.provenance,
                               f"{key[0]} in the baseline", old.provenance)
        except PairingError as error:
            refusals.append(("not comparable", str(error)))
            continue
        usable.append(old)
    if not usable:
        return unjudged(*refusals[-1], newest.value)
    try:
        interval = ratio_interval_between_runs(
            _startup_values(m), [_startup_values(old) for old in usable],
            confidence=STARTUP_CONFIDENCE)
    except ValueError as error:
        return unjudged("not comparable", str(error), newest.value)
    note = (f"launches {interval.candidate_n} vs {interval.reference_n}, {cache} starts; "
            f"{STARTUP_CONFIDENCE:.0%} interval of now ÷ baseline, lower is faster")
    if len(usable) > 1:
        note += f", over {len(usable)} baseline runs"
    if refusals:
        note += f" ({len(refusals)} older baseline run(s) left out: {refusals[-1][1]})"
    row = GateRow(key[0], key[1], setting, interval.reference_mean, interval.candidate_mean,
                  interval.ratio - 1, interval.low - 1, interval.high - 1, "ok", note,
                  STARTUP_CONFIDENCE)
    fraction = thresholds.startup_fraction
    if interval.degenerate:
        return replace(row, status="no interval", note=note + "; a side has one launch: no "
                       "interval and no verdict (--startup-launches 2 or more)")
    if interval.low > 1 + fraction:
        return replace(row, status="regressed", note=(
            f"{note}; starts {interval.ratio:.2f}× as long, beyond +{fraction:.0%}"))
    if interval.high < 1 - fraction:
        return replace(row, status="improved")
    return row


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


def _judge_throughput(rows: list[GateRow], intervals: Mapping[int, RatioInterval],
                      thresholds: Thresholds) -> None:
    """Holm step-down over each model's throughput rows (in place).

    Rows are taken in ascending order of :func:`_threshold_p_value`; the r-th (0-based) of m
    gets its two-sided interval at confidence 1 - 2a/(m - r), a = THROUGHPUT_FAMILY_ERROR,
    and is judged while every earlier one was: regressed when the whole interval lies below
    1 - threshold, improved when wholly above 1 + threshold. At the first row that is
    neither, stepping stops; it and the later rows keep that step's interval and are ok.
    """
    by_model: dict[str, list[int]] = {}
    for index in intervals:
        by_model.setdefault(rows[index].model, []).append(index)
    fraction = thresholds.throughput_fraction
    for members in by_model.values():
        p_values = {i: _threshold_p_value(intervals[i], thresholds) for i in members}
        order = sorted(members, key=lambda i: p_values[i])
        m = len(order)
        stepping = True
        confidence = 1.0 - 2 * THROUGHPUT_FAMILY_ERROR
        for rank, index in enumerate(order):
            if stepping:
                confidence = 1.0 - 2 * THROUGHPUT_FAMILY_ERROR / (m - rank)
            interval = intervals[index].at_confidence(confidence)
            status = "ok"
            if stepping and interval.high < 1 - fraction:
                status = "regressed"
            elif stepping and interval.low > 1 + fraction:
                status = "improved"
            stepping = status != "ok"
            row = rows[index]
            rows[index] = replace(
                row, low=interval.low - 1, high=interval.high - 1, status=status,
                confidence=confidence,
                note=f"{row.note}; {confidence:.1%} interval, Holm step {rank + 1} of {m}")


def gate_table(rows: Sequence[GateRow]) -> list[str]:
    """An aligned text table of the gate rows, each value in its own unit: accuracy in % and
    its change in points, throughput in tokens/s and startup in s with their change in %
    (a user's throughput benchmark too: the row carries its kind)."""
    def fmt(row: GateRow, value: float, signed: bool = False) -> str:
        if math.isnan(value):
            return "-"
        if row.kind == Kind.STARTUP.value:
            return f"{100 * value:+.1f}%" if signed else f"{value:.2f} s"
        if row.kind != Kind.THROUGHPUT.value:
            return f"{100 * value:+.1f}pp" if signed else f"{100 * value:.1f}%"
        return f"{100 * value:+.1f}%" if signed else f"{value:.1f}"

    header = ("model", "benchmark", "setting", "baseline", "now", "change", "interval",
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
