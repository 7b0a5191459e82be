"""The cells of the decision page: pure functions of what :mod:`.reading` found; a cell
without a figure says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ...core.measurements import (
    CONCURRENCY,
    RATE,
    SEARCH_BENCHMARK,
    AccuracyVerdictStats,
    Measurement,
    ScreeningResult,
    SearchBracket,
    SearchRatioStats,
    SearchStats,
    StartupStats,
    ThroughputRatioStats,
)
from ..tables import (
    COMPARISONS,
    NA,
    Setting,
    accuracy_interval,
    finite,
    format_goodput,
    format_percent,
    format_percent_interval,
    format_points,
    format_points_interval,
    format_rate,
    format_ratio,
    format_rps,
    format_usd,
    measurement_kind,
    rate_bracket_text,
    stats_of,
    throughput_row,
)
from .page import (
    CANNOT_CONCLUDE,
    DASH,
    NOT_JUDGED,
    NOT_MEASURED,
    NOT_SCREENED,
    REFERENCE,
    SCREEN,
    SEARCHES,
    STARTUP,
    Cell,
    Column,
    DecisionRow,
    metric_label,
    one_line,
)
from .reading import Capacity, Cost, Failure, Page, throughput_why


def _verdict(verdict: object) -> Cell:
    word = str(verdict or NA)
    return Cell(word, verdict=word)


def _both(text: str, why: str) -> list[Cell]:
    """A comparison's two cells when it has no figure: the word, then a dash."""
    return [Cell(text, why=why), Cell(DASH, why=why)]


def _not_run(failed: Sequence[Failure], what: str, test: str, where: str) -> list[Cell]:
    """A comparison's cells without its measurement: its failed test, else that it did not run."""
    return (
        _both(CANNOT_CONCLUDE, failed[0].said)
        if failed
        else _both(NOT_JUDGED, f"no {what}: its {test} test did not run ({where})")
    )


def _reference_cells(
    side: tuple[str, str] | None, m: Measurement | None, figure: Callable[[Measurement], str]
) -> list[Cell]:
    """The reference's own cells in a comparison's group: ``reference``, then the ``figure``
    of its measurement ``m``, or the (text, why) of the ``side`` that stops it."""
    if side is None and m is not None:  # m is None only with a side's why
        side = (figure(m), "")
    text, why = side or (NA, "")
    return [Cell(REFERENCE), Cell(text, why=why)]


def _confidence(confidence: float) -> str:
    return "" if abs(confidence - 0.95) < 1e-9 else f" ({100 * confidence:.4g}%)"


def _accuracy_why(page: Page, model: str, metric: str) -> tuple[str, str] | None:
    """(cell text, why) when one side's own accuracy result stops the verdict; None if sound."""
    m, role = page.latest(model, metric), page.role(model)
    if m is None:
        return NOT_MEASURED, f"no {metric} result of the {role} {model} in this run"
    failed = [item for item in m.item_records() if item.failed]
    if failed:
        return CANNOT_CONCLUDE, (
            f"{len(failed)} of {len(m.items)} {metric} items of the {role} {model} failed "
            f"(first: {one_line(failed[0].error)}); no verdict is drawn from a partial item set"
        )
    return (
        None if m.passed else (CANNOT_CONCLUDE, f"the {role} {model}'s {metric} test {m.outcome}")
    )


def _verdict_cells(page: Page, candidate: str, metric: str) -> list[Cell]:
    """[verdict, difference with interval] of a candidate on one accuracy benchmark."""
    m = page.verdict(candidate, metric)
    if m is not None:
        stats = stats_of(m, AccuracyVerdictStats)
        verdict, seq, iv = _verdict(stats.verdict), stats.sequence, stats.sequence or stats.interval
        shown = NA if iv is None else format_points_interval(iv.low, iv.high)
        if iv is None or finite(iv.difference) is None or shown == NA:
            what = "interval" if seq is None else "sequence"
            return [
                verdict,
                Cell(
                    NA, why=f"the {metric} verdict of {candidate} records no difference or {what}"
                ),
            ]
        figure = f"{format_points(iv.difference)} {shown.removesuffix(' pp')}"  # the unit once
        on = f"{candidate} vs the reference on {metric_label(metric)}"
        if seq is not None:  # --until-decided: the confidence sequence's
            return [
                verdict,
                Cell(
                    f"{figure}\n{seq.n} of {seq.population} items",
                    detail=(
                        f"{on}: {seq.text()} (--until-decided); the interval is the "
                        f"{100 * seq.confidence:.4g}% confidence sequence, valid where the items stopped"
                    ),
                ),
            ]
        few = stats.interval.too_few_reason() if stats.interval else ""
        return [
            verdict,
            Cell(
                f"{figure}{_confidence(iv.confidence)}",
                detail=few and f"{on}: no verdict from its interval: {few}",
            ),
        ]
    sides = [_accuracy_why(page, model, metric) for model in (page.reference, candidate)]
    failed = page.failures_of(candidate, metric)
    side = next((side for side in sides if side and side[0] == CANNOT_CONCLUDE), None) or (
        None if failed else next((side for side in sides if side), None)
    )
    return (
        _both(*side)
        if side
        else _not_run(
            failed,
            f"verdict:{metric} measurement of {candidate}",
            "verdict",
            "a declared accuracy benchmark's test_verdict, docs/writing-benchmarks.md",
        )
    )


def _reference_accuracy_cells(page: Page, metric: str) -> list[Cell]:
    """[reference, accuracy with its Wilson interval] of the reference on one benchmark."""

    def figure(m: Measurement) -> str:
        interval = accuracy_interval(m)
        return format_percent(m.value) + (
            f" ({format_percent_interval(*interval)})" if interval else ""
        )

    return _reference_cells(
        _accuracy_why(page, page.reference, metric), page.latest(page.reference, metric), figure
    )


def _at(page: Page, model: str) -> str:
    """`` at c4`` after a figure when the models' settings differ, else ""."""
    return f" at {page.setting(model)}" if page.mixed else ""


def _ratio_cells(page: Page, candidate: str) -> list[Cell]:
    """[verdict, ratio with interval] of a candidate's throughput against the reference's."""
    m, setting = page.ratio(candidate), page.setting(candidate)
    if m is not None:
        stats = stats_of(m, ThroughputRatioStats)
        verdict, ratio = _verdict(stats.verdict), format_ratio(m.value)
        low, high = page.ratio_interval(candidate)
        if ratio == NA:
            return [verdict, Cell(NA, why=f"the {setting} ratio of {candidate} records no value")]
        if low is None or high is None or stats.interval is None:
            return [
                verdict,
                Cell(
                    f"{ratio} (no interval){_at(page, candidate)}",
                    why=(
                        f"{candidate}'s {setting} ratio has no interval: a side has a single repeat "
                        "(run --repeats 2 or more)"
                    ),
                ),
            ]
        return [
            verdict,
            Cell(
                f"{ratio} [{low:.2f}, {high:.2f}]"
                f"{_confidence(stats.interval.confidence)}{_at(page, candidate)}"
            ),
        ]
    side = throughput_why(page, page.reference, page.at[candidate]) or throughput_why(
        page, candidate
    )
    return (
        _both(*side)
        if side
        else _not_run(
            [
                f
                for f in page.failures_of(candidate, setting)
                if f.name.startswith("test_throughput_ratio")
            ],
            f"{setting} throughput ratio of {candidate}",
            "ratio",
            "test_throughput_ratio in benches/test_throughput.py",
        )
    )


def _reference_throughput_cells(page: Page) -> list[Cell]:
    reference = page.reference
    return _reference_cells(
        throughput_why(page, reference),
        page.throughput_at(reference, page.at[reference]),
        lambda m: f"{format_rate(m.value)} tokens/s{_at(page, reference)}",
    )


def _capacity_cell(capacity: Capacity, model: str) -> Cell:
    """The capacity (with the goodput at it in concurrent requests); 0 and the server's
    maximum say so."""
    if capacity.value is None:
        return Cell(capacity.text, why=capacity.why)
    stats, at = capacity.stats, capacity.stats.at_capacity
    reason = one_line(stats.reason)
    if capacity.knob == RATE:
        tip = f"bracket {rate_bracket_text(stats.bracket)} req/s; {reason}"
        if capacity.value == 0:
            return Cell(
                "0 req/s",
                detail=f"{model} meets the SLO at no rate of its sweep: {reason}",
                tip=tip,
            )
        return Cell(f"{format_rps(capacity.value)} req/s", tip=tip)
    if capacity.value == 0:
        return Cell(
            "0 (misses the SLO at c1)",
            detail=f"{model}'s capacity is 0: {reason or 'no step met the SLO'}",
        )
    goodput = None if at is None else finite(at.goodput_rps)
    said = f"goodput {format_goodput(goodput)} req/s" if goodput is not None else ""
    attainment = None if at is None else finite(at.slo_attainment)
    step = next((s for s in stats.steps if s.value == capacity.value and s.passed), None)
    figures = [
        figure
        for figure in (
            ""
            if attainment is None
            else f"{100 * attainment:.0f}% of requests met the SLO"
            + (f" ({step.good}/{step.requests})" if step else ""),
            said,
            ""
            if at is None or finite(at.output_tokens_per_s) is None
            else f"{format_rate(at.output_tokens_per_s)} output tokens/s",
        )
        if figure
    ]
    searched = (
        SearchBracket(capacity.value, *stats.bracket, stats.confidence) if stats.bracket else None
    )
    bracket = (
        NA
        if searched is None
        else (
            f"search bracket {searched.text()}"
            if searched.confidence is None
            else f"{100 * searched.confidence:.4g}% interval {searched.interval_text()} (bracket "
            f"{searched.text()})"
        )
    )
    tip = (f"at c{capacity.value}: {', '.join(figures)}; " if figures else "") + bracket
    below = f"\n{said}" if said else ""
    if capacity.at_maximum:
        return Cell(
            f"≥{capacity.value} (server's maximum){below}",
            detail=f"{model}: {reason}" if reason else "",
            tip=tip,
        )
    return Cell(f"{capacity.value} concurrent{below}", tip=tip)


def _search_ratio_cells(page: Page, candidate: str, knob: str) -> list[Cell]:
    """[verdict, ratio with the interval the two searches' brackets give] of a candidate's
    capacity over ``knob`` against the reference's; without it, dashes while a side's own
    figure says why, else its failed test, else that its test did not run."""
    search = SEARCHES[knob]
    m = page.latest(candidate, search.ratio)
    if m is None:
        failed = page.failures_of(candidate, function=f"test_{search.ratio}")
        mine, reference = (page.capacities[knob][side].why for side in (candidate, page.reference))
        if mine or (reference and not failed):
            return _both(
                DASH, mine or f"no {search.what} of the reference to compare with: {reference}"
            )
        return _not_run(
            failed,
            f"{search.ratio} measurement of {candidate}",
            "ratio",
            f"test_{search.ratio} in {search.bench}",
        )
    stats = stats_of(m, SearchRatioStats)
    verdict, value, ratio = _verdict(stats.verdict), format_ratio(m.value), stats.ratio
    if value == NA and knob == CONCURRENCY:
        return [
            verdict,
            Cell(CANNOT_CONCLUDE, why=f"{candidate}'s {search.ratio_name} records no value"),
        ]
    if value == NA or ratio is None:
        return [
            verdict,
            Cell(value, why=f"{candidate}'s {search.ratio_name} records no {search.lacks}"),
        ]
    if ratio.degenerate:
        return [
            verdict,
            Cell(
                f"{value} (no {search.bound})",
                detail=(
                    f"{candidate}'s {search.ratio_name} has no {search.bound}: both {search.passed}, so "
                    "neither capacity is bounded above"
                ),
            ),
        ]
    high = "∞)" if math.isinf(ratio.high) else f"{ratio.high:.2f}]"
    return [verdict, Cell(f"{value} [{ratio.low:.2f}, {high}")]


def _search_cells(page: Page, model: str, knob: str) -> list[Cell]:
    """[verdict, ratio, capacity] of a knob's search; the reference's own capacity only."""
    return [
        *(
            [Cell(REFERENCE), Cell(REFERENCE)]
            if model == page.reference
            else _search_ratio_cells(page, model, knob)
        ),
        _capacity_cell(page.capacities[knob][model], model),
    ]


def _cost_cell(cost: Cost) -> Cell:
    """$/1M output tokens at its basis, with its interval; without it, why."""
    if cost.usd is None:
        return Cell(cost.text, why=cost.why)
    return Cell(
        f"{format_usd(cost.usd, '$')} {cost.at}"
        + (
            f"\n[{format_usd(cost.interval[0], '$')}, {format_usd(cost.interval[1], '$')}]"
            if cost.interval
            else ""
        )
    )


def _relative_cost_cell(page: Page, candidate: str) -> Cell:
    """Candidate ÷ reference cost; at a throughput setting its interval is the throughput
    ratio's, inverted; at the capacities (one search window each) there is none."""
    (value, why), cost = page.relative[candidate], page.costs[candidate]
    if value is None:
        return Cell(DASH if cost.usd is None else CANNOT_CONCLUDE, why=why)
    low, high = page.ratio_interval(candidate)
    at_setting = cost.basis != "capacity"
    if at_setting and low is not None and high is not None and low > 0:
        return Cell(f"{format_ratio(value)} [{1 / high:.2f}, {1 / low:.2f}]")
    why = (
        f"its {cost.basis} throughput ratio has none (a side has a single repeat: run "
        "--repeats 2 or more)"
        if at_setting
        else "each cost at its capacity comes from one search window"
    )
    return Cell(
        f"{format_ratio(value)} (no interval)",
        why=f"{candidate}'s cost vs the reference has no interval: {why}",
    )


def _startup_cell(page: Page, model: str) -> Cell:
    """Launch → first token, the geometric mean over fresh launches, and the cache state."""
    m = page.latest(model, STARTUP)
    if m is None:
        return page.missing(
            model,
            STARTUP,
            page.failures_of(model, function="test_startup"),
            "cold start",
            "benches/test_startup.py -m startup; not for attached endpoints",
        )
    stats = stats_of(m, StartupStats)
    first = finite(stats.first_token_s)
    if first is None or not m.passed:
        said = "; ".join(stats.errors) or f"its test {m.outcome}"
        return Cell(CANNOT_CONCLUDE, why=page.stopped(model, "cold start", said))
    interval, ready = stats.first_token_s_interval, finite(stats.ready_s)
    return Cell(
        f"{first:.2f} s ({stats.cache})",
        tip=f"{len(stats.launches)} launches; 95% interval "
        + ("none" if interval is None else f"{interval[0]:.2f}–{interval[1]:.2f} s")
        + ("" if ready is None else f"; ready after {ready:.2f} s"),
    )


def _screen_cells(page: Page, model: str) -> list[Cell]:
    m = page.latest(model, SCREEN)
    if m is None:
        failed = page.failures_of(model, SCREEN)
        return _both(
            NOT_SCREENED,
            f"{model}'s {failed[0].said}"
            if failed
            else f"no screening of {model} (pytest benches -m screen; Hugging Face sources only)",
        )
    stats = stats_of(m, ScreeningResult)
    return [
        Cell(stats.license or "unknown"),
        Cell(NA, why=f"the screening of {model} found no weight size")
        if finite(stats.kv_headroom_gib) is None
        else Cell(f"{stats.kv_headroom_gib:.1f} GiB KV{'' if stats.accepted else ' (rejected)'}"),
    ]


def decision_row(page: Page, model: str, metrics: Sequence[str], screened: bool) -> DecisionRow:
    """The reference's own figures, or a candidate's compared with them."""
    own = model == page.reference
    return DecisionRow(
        model,
        own,
        [
            *(
                cell
                for metric in metrics
                for cell in (
                    _reference_accuracy_cells(page, metric)
                    if own
                    else _verdict_cells(page, model, metric)
                )
            ),
            *(_reference_throughput_cells(page) if own else _ratio_cells(page, model)),
            *(cell for knob in SEARCHES for cell in _search_cells(page, model, knob)),
            _cost_cell(page.costs[model]),
            Cell(REFERENCE) if own else _relative_cost_cell(page, model),
            _startup_cell(page, model),
            *(_screen_cells(page, model) if screened else []),
        ],
    )


def row_flags(
    page: Page, model: str, cells: Sequence[Cell], columns: Sequence[Column]
) -> list[str]:
    """Unstable, contended or flagged settings, failed items and tests, stopped groups."""

    def setting(m: Measurement) -> str:
        prompt, concurrency = Setting.of(m).prompt_tokens, Setting.of(m).concurrency
        rate = finite(m.params.get("request_rate"))
        if rate is not None:
            return f"{m.benchmark} {rate:g} req/s"
        return f"c{concurrency}" if prompt is None else f"p{prompt}-c{concurrency}"

    rows = [
        (m, throughput_row(m))
        for m in page.measurements
        if m.model == model and measurement_kind(m) == "throughput"
    ]
    contended = [setting(m) for m, row in rows if row.contended] + [
        search.search
        for knob, search in SEARCHES.items()
        if (m := page.latest(model, SEARCH_BENCHMARK[knob])) and stats_of(m, SearchStats).contended
    ]
    failed_items = [
        f"{m.benchmark} {failed} of {len(m.items)}"
        for m in page.measurements
        if m.model == model and measurement_kind(m) == "accuracy"
        if (failed := sum(item.failed for item in m.item_records()))
    ]
    carried: dict[str, list[str]] = {}
    for m, where in (
        (page.ratio(model), page.setting(model)),
        *((page.latest(model, search.ratio), search.short) for search in SEARCHES.values()),
    ):
        if m is not None and isinstance(m.stats, ThroughputRatioStats | SearchRatioStats):
            for flag in m.stats.reference_flags or ():
                carried.setdefault(f"reference {flag}", []).append(where)
    # a comparison's test that failed on its own verdict (--fail-on) shows as that verdict
    judged = {
        m.test_id
        for m in page.measurements
        if m.model == model and isinstance(m.stats, COMPARISONS)
    }
    return [
        f"{word} ({', '.join(found)})"
        for word, found in (
            ("unstable", [setting(m) for m, row in rows if row.stats.unstable]),
            ("contended", contended),
            ("server queued", [setting(m) for m, row in rows if row.stats.server_flagged_windows]),
            ("saturated", [setting(m) for m, row in rows if row.stats.saturated_windows]),
            *carried.items(),
            ("failed items", failed_items),
            (
                "failed tests",
                sorted({f.name for f in page.failures_of(model) if f.test_id not in judged}),
            ),
            (
                "cannot conclude",
                sorted(
                    {
                        c.group
                        for c, cell in zip(columns, cells)
                        if cell.why and cell.text == CANNOT_CONCLUDE
                    }
                ),
            ),
        )
        if found
    ]
