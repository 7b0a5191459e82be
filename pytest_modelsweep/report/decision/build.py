"""The decision page built from a run: its columns, a row per model with notes numbered in
order, the answer, the Pareto data and the notes under the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ...core.measurements import CONCURRENCY, RATE, SEARCH_BENCHMARK, SearchStats, ThroughputStats
from ...core.metrics import CAPACITY_RATIO_BENCHMARK
from ...core.slo import Slo
from ...store.results import FailedTest, RunInfo
from ..tables import Measurements, Setting, compared_reference, finite, stats_of
from .answer import answer_line, pareto_data, standing
from .cells import decision_row, row_flags
from .page import (
    ACCURACY_BLOCK,
    CANNOT_CONCLUDE,
    REFERENCE,
    SCREEN,
    SEARCHES,
    Column,
    DecisionPage,
    DecisionRow,
    metric_label,
    one_line,
)
from .reading import Page, accuracy_metrics


def _notes(page: Page, metrics: Sequence[str], groups: set[str]) -> list[str]:
    """What the shown ``groups`` of columns mean, the SLO, the price and where it came from."""
    searched = [
        (m, Setting.of(m))
        for m in page.measurements
        if m.benchmark in (*SEARCH_BENCHMARK.values(), CAPACITY_RATIO_BENCHMARK)
    ]
    targets = {
        knob: " or ".join(
            f"{100 * t:g}%"
            for t in sorted(
                {
                    s.attainment_target
                    for m, s in searched
                    if m.benchmark == benchmark and s.attainment_target is not None
                }
            )
        )
        or "enough"
        for knob, benchmark in SEARCH_BENCHMARK.items()
    }
    prices = {
        p.describe()
        for m in page.measurements
        if (
            p := stats_of(m, ThroughputStats).pricing
            or (
                stats_of(m, SearchStats).pricing
                if m.benchmark == SEARCH_BENCHMARK[CONCURRENCY]
                else None
            )
        )
        and finite(p.usd_per_hour) is not None
    }
    capacity, rate = (SEARCHES[knob].group in groups for knob in (CONCURRENCY, RATE))
    return [
        note
        for shown, note in (
            (
                metrics,
                (
                    "difference: candidate − reference accuracy in percentage points, paired "
                    "item by item (bootstrap interval); the reference row shows its own "
                    "accuracy (Wilson 95% interval)"
                ),
            ),
            (
                f"throughput at {page.settings_text}" in groups,
                (
                    "ratio: candidate ÷ reference output tokens/s at "
                    + (
                        f"{page.at[page.reference]} concurrent requests"
                        if not page.mixed
                        else "the highest concurrency at which both were measured alike (said in each cell)"
                    )
                    + ", short prompts (Welch t interval over the repeats)"
                ),
            ),
            (
                capacity or rate,
                "SLO: "
                + (
                    "; ".join(
                        sorted(
                            {_slo_text(s.slo) for _, s in searched if isinstance(s.slo, Mapping)}
                        )
                    )
                    or "not recorded"
                ),
            ),
            (
                capacity,
                (
                    "capacity: the most "
                    "concurrent requests (up to the server's maximum) at which "
                    f"{targets[CONCURRENCY]} of "
                    "requests meet it, with the goodput there (requests per second that met "
                    "it)"
                ),
            ),
            (
                capacity
                and any(m.benchmark == CAPACITY_RATIO_BENCHMARK for m in page.measurements),
                (
                    "capacity vs reference: candidate ÷ reference capacity with its 90% interval "
                    "(last pass ÷ first miss, and first miss ÷ last pass, of both searches' 95% "
                    "capacity intervals); older one-window searches give a bracket with no level"
                ),
            ),
            (
                rate,
                (
                    "capacity in req/s: the highest request rate (open-loop arrivals) at which "
                    f"{targets[RATE]} of requests "
                    "meet the SLO, each step decided from its 90% Clopper-Pearson interval; a "
                    "candidate's ratio to the reference's and the verdict from the interval the two "
                    "sweeps' brackets give"
                ),
            ),
            (
                "cold start" in groups,
                (
                    "cold start: seconds from launching the server to its first token, geometric "
                    "mean over fresh launches; cold: its files read from disk, warm: from a cache"
                ),
            ),
            (
                "cost" in groups,
                "cost: the machine's price ÷ output tokens/s, at the model's "
                "capacity under the SLO, else at "
                + (page.settings_text if not page.mixed else "its throughput setting")
                + "; price "
                + ("; ".join(sorted(prices)) if prices else "not given"),
            ),
        )
        if shown
    ]


def _slo_text(slo: Mapping[str, object]) -> str:
    try:
        return str(Slo.from_dict(slo))
    except (TypeError, ValueError, KeyError):
        return str(dict(slo))


def _accuracy_columns(label: str) -> tuple[Column, Column]:
    """An accuracy metric's group: its verdict, then its difference and interval."""
    group = f"{label} vs reference"
    return (
        Column(group, "verdict", f"{label} verdict", verdict=True, block=ACCURACY_BLOCK),
        Column(
            group,
            "difference [95% interval]",
            f"{label} difference [95% interval]",
            block=ACCURACY_BLOCK,
        ),
    )


def _columns(page: Page, metrics: Sequence[str], screened: bool) -> list[Column]:
    """The columns, grouped: each group's verdict first, then its figure and interval."""
    throughput = f"throughput at {page.settings_text}"
    setting = "throughput" if page.mixed else page.settings_text
    return [
        *(column for label in map(metric_label, metrics) for column in _accuracy_columns(label)),
        Column(throughput, "verdict", f"{setting} verdict", verdict=True),
        Column(throughput, "ratio [95% interval]", f"{setting} ratio [95% interval]"),
        *(
            column
            for s in SEARCHES.values()
            for column in (
                Column(s.group, "verdict", f"{s.short} verdict", verdict=True),
                Column(s.group, "vs reference [interval]", f"{s.short} vs reference [interval]"),
                Column(s.group, s.figure, s.what),
            )
        ),
        Column("cost", "$/1M output tokens", "$/1M output tokens"),
        Column("cost", "vs reference", "cost vs reference"),
        Column("cold start", "first token", "cold start"),
        *(
            [
                Column("screening", "licence", "licence"),
                Column("screening", "memory headroom", "memory headroom"),
            ]
            if screened
            else []
        ),
    ]


def decision_page(
    measurements: Measurements, run: RunInfo, failures: Sequence[FailedTest] = ()
) -> DecisionPage | None:
    """The decision page of a run and its failed tests; None without a reference or candidate."""
    reference = run.reference or compared_reference(measurements)
    candidates = sorted({m.model for m in measurements} - {reference or "", ""})
    if reference is None or not candidates:
        return None
    page = Page(measurements, reference, candidates, failures, run.run_id)
    metrics = accuracy_metrics(page)
    screened = any(m.benchmark == SCREEN for m in measurements)
    columns = _columns(page, metrics, screened)
    rows = [decision_row(page, model, metrics, screened) for model in (reference, *candidates)]
    reasons = list(dict.fromkeys(c.line for row in rows for c in row.cells if c.line))
    for row in rows:
        row.cells = [
            replace(cell, note=reasons.index(cell.line) + 1) if cell.line else cell
            for cell in row.cells
        ]
        row.flags = row_flags(page, row.model, row.cells, columns)
    standings = {row.model: standing(row, columns, metrics) for row in rows[1:]}
    columns, unmeasured = _without_unmeasured_groups(columns, rows)
    return DecisionPage(
        answer_line(page, metrics, standings),
        columns,
        rows,
        reasons,
        _notes(page, metrics, {c.group for c in columns}),
        pareto_data(page, metrics, standings),
        unmeasured,
        [f"{f.test_id}: {one_line(f.message, 100)}" for f in page.failures if f.model is None],
    )


def _without_unmeasured_groups(
    columns: list[Column],
    rows: list[DecisionRow],
) -> tuple[list[Column], list[tuple[str, list[int]]]]:
    """The columns of groups some model has a figure in (or a cell that cannot conclude);
    the rest leave the table (their cells taken out of ``rows``), each with its notes."""
    dropped: list[tuple[str, list[int]]] = []
    keep: list[int] = []
    for group in dict.fromkeys(c.group for c in columns):
        indices = [i for i, c in enumerate(columns) if c.group == group]
        cells = [row.cells[i] for row in rows for i in indices]
        if all(c.why or c.text == REFERENCE for c in cells) and not any(
            c.text == CANNOT_CONCLUDE for c in cells
        ):
            dropped.append((group, sorted({c.note for c in cells if c.note is not None})))
        else:
            keep += indices
    for row in rows:
        row.cells = [row.cells[i] for i in keep]
    return [columns[i] for i in keep], dropped
