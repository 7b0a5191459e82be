"""The decision page's answer and Pareto data: who holds the reference's accuracy, and among
them the picks by capacity, cost or throughput ratio, from concluded cells only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ...core.measurements import CONCURRENCY, AccuracyVerdictStats, ThroughputRatioStats
from ..tables import finite, format_ratio, format_usd, stats_of
from .page import (
    DECIDED_RATIO_SPREAD,
    HOLDS,
    Column,
    DecisionRow,
    Pareto,
    ParetoPoint,
    metric_label,
)
from .reading import Page


def standing(row: DecisionRow, columns: Sequence[Column], metrics: Sequence[str]) -> str:
    """A candidate's accuracy verdicts in short: "" when it holds the reference's accuracy on
    all, else ``worse on GSM8K, cannot conclude on BFCL [2]``."""
    return ", ".join(
        f"{cell.text} on {label} [{cell.note}]" if cell.why else f"{cell.verdict} on {label}"
        for label in map(metric_label, metrics)
        for cell in [
            row.cells[next(i for i, c in enumerate(columns) if c.title == f"{label} verdict")]
        ]
        if cell.why or cell.verdict not in HOLDS
    )


def _names(models: Sequence[str]) -> str:
    return ", ".join(models[:-1]) + " and " + models[-1] if len(models) > 1 else "".join(models)


def _nothing_to_choose(page: Page) -> str:
    return (
        f"no capacity, cost or {page.settings_text} throughput ratio to choose among them"
        if any(page.measured(model) for model in page.at)
        else "no throughput, capacity or cost was measured to choose among them"
    )


def _picks(page: Page, pool: Sequence[str]) -> list[str]:
    """Among ``pool``: the highest capacity and the cheapest (from concluded cells only);
    without either, the highest throughput ratio."""
    picks = []
    capacities = page.capacities[CONCURRENCY]
    measured = {c: capacities[c] for c in pool if capacities[c].value is not None}
    if measured:
        best = max(cap.value or 0 for cap in measured.values())
        top = [c for c, cap in measured.items() if cap.value == best]
        shown = f"≥{best}" if all(measured[c].at_maximum for c in top) else str(best)
        picks.append(
            f"none of {_names(top)} meets the SLO even at concurrency 1"
            if best == 0
            else f"highest capacity under the SLO: {_names(top)} ({shown} concurrent requests)"
        )
    priced = {c: page.costs[c] for c in pool if page.costs[c].usd is not None}
    # each at its own capacity, else each at one throughput setting (the highest): one
    # basis, one price
    bases = {cost.basis for cost in priced.values()}
    basis = (
        "capacity"
        if "capacity" in bases
        else max(bases, key=lambda b: int(b.removeprefix("c")), default="")
    )
    comparable = {c: cost for c, cost in priced.items() if cost.basis == basis}
    if comparable and len({cost.usd_per_hour for cost in comparable.values()}) == 1:
        cheapest = min(cost.usd or 0.0 for cost in comparable.values())
        top = [c for c, cost in comparable.items() if cost.usd == cheapest]
        relative = page.relative.get(top[0], (None, ""))[0]
        versus = f", {format_ratio(relative)} the reference's" if relative is not None else ""
        picks.append(
            f"cheapest: {_names(top)} ({format_usd(cheapest, '$')}/1M output tokens "
            f"{comparable[top[0]].at}{versus})"
        )
        if elsewhere := [c for c in pool if c in priced and c not in comparable]:
            picks.append(
                f"no comparable cost for {_names(elsewhere)} (priced "
                f"{priced[elsewhere[0]].at}, not "
                f"{'at its capacity' if basis == 'capacity' else f'at {basis}'})"
            )
        if unpriced := [c for c in pool if c not in priced]:
            picks.append(f"no cost for {_names(unpriced)}")
    if picks:
        return picks
    ratios = {
        c: (value, stats_of(m, ThroughputRatioStats).verdict)
        for c in pool
        if (m := page.ratio(c)) is not None and (value := _decided_ratio(page, c)) is not None
    }
    if not ratios and any(page.ratio(c) is not None for c in pool):
        return [
            f"no capacity or cost measured, and no {page.settings_text} throughput ratio "
            f"decided (each 95% interval wider than ×/÷{DECIDED_RATIO_SPREAD:g})"
        ]
    if not ratios:
        return [_nothing_to_choose(page)]
    best_ratio = max(v for v, _ in ratios.values())
    top = [c for c, (v, _) in ratios.items() if v == best_ratio]
    return [
        (
            f"no capacity or cost measured; highest {page.setting(top[0])} throughput ratio: "
            f"{_names(top)} ({format_ratio(best_ratio)} the reference, "
            f"{ratios[top[0]][1] or ''})"
        )
    ]


def _decided_ratio(page: Page, candidate: str) -> float | None:
    """The candidate's throughput ratio where its interval lies within ×/÷
    :data:`DECIDED_RATIO_SPREAD` of it, else None."""
    m = page.ratio(candidate)
    value = None if m is None else finite(m.value)
    low, high = page.ratio_interval(candidate)
    if value is None or low is None or high is None or low <= 0:
        return None
    return value if max(high / value, value / low) <= DECIDED_RATIO_SPREAD else None


def _output_rates(page: Page, holding: Sequence[str]) -> str:
    """`` at 0.66× its output rate at c4``: the throughput ratios of the candidates that hold
    the reference's accuracy (``0.66× (a) and 1.83× (b)``), each only where its interval is
    narrow enough to be a figure (:func:`_decided_ratio`; else what would decide it); "" when
    none has one."""
    ratios = [
        c for c in holding if (m := page.ratio(c)) is not None and finite(m.value) is not None
    ]
    rates = [(c, format_ratio(v)) for c in ratios if (v := _decided_ratio(page, c)) is not None]
    undecided = [c for c in ratios if _decided_ratio(page, c) is None]
    said = ""
    if rates:
        settings = {page.setting(c) for c, _ in rates}
        one = len(settings) == 1
        shown = [
            (ratio if len(rates) == 1 else f"{ratio} ({c})")
            if one
            else f"{ratio} ({c}, at {page.setting(c)})"
            for c, ratio in rates
        ]
        said = f" at {_names(shown)} its output rate" + (f" at {settings.pop()}" if one else "")
    if undecided:
        said += (
            f" ({_names(undecided)}: output rate vs {page.reference} not decided, its 95% "
            f"interval wider than ×/÷{DECIDED_RATIO_SPREAD:g}; more repeats, or "
            "--interleave --repeats auto, decide it)"
        )
    return said


def answer_line(page: Page, metrics: Sequence[str], standings: Mapping[str, str]) -> str:
    """Who holds the reference's accuracy on every verdict, and among them the picks."""
    reference, candidates = page.reference, page.candidates
    if not metrics:
        found = _picks(page, candidates)
        return (
            f"No answer: this run has no accuracy verdict against {reference}, so no "
            "candidate is shown to match it (run an accuracy benchmark: -m gsm8k, -m bfcl "
            "or your own)"
            + (
                ""
                if found == [_nothing_to_choose(page)]
                else ". Not judged on accuracy: " + "; ".join(found)
            )
            + "."
        )
    labels = ", ".join(map(metric_label, metrics))
    holding = [c for c in candidates if not standings[c]]
    if not holding:
        return (
            f"No answer: no candidate matches {reference} on every accuracy verdict "
            f"({labels}): " + "; ".join(f"{c} {standings[c]}" for c in candidates) + "."
        )
    better = {
        c: [
            metric_label(m)
            for m in metrics
            if (v := page.verdict(c, m)) is not None
            and str(stats_of(v, AccuracyVerdictStats).verdict) == "better"
        ]
        for c in holding
    }
    one = len(holding) == 1
    what = f"every accuracy verdict ({labels})"
    if all(len(on) == len(metrics) for on in better.values()):  # better on every verdict
        verb, what = "beats" if one else "beat", labels if len(metrics) == 1 else what
    elif any(better.values()):  # "matches" would undersell a candidate found better
        beats = "; ".join(f"{c} better on {', '.join(on)}" for c, on in better.items() if on)
        verb, what = "matches or beats" if one else "match or beat", f"{what[:-1]}: {beats})"
    else:
        verb = "matches" if one else "match"
    parts = [f"{_names(holding)} {verb} {reference} on {what}{_output_rates(page, holding)}"]
    if rest := [c for c in candidates if c not in holding]:
        parts.append("not " + "; not ".join(f"{c} ({standings[c]})" for c in rest))
    return "; ".join(parts + _picks(page, holding)) + "."


def pareto_data(page: Page, metrics: Sequence[str], standings: Mapping[str, str]) -> Pareto | str:
    """The Pareto plot's data against the throughput ratio, else relative cost; else why not."""
    candidates = page.candidates
    judged = [m for m in metrics if any(page.verdict(c, m) is not None for c in candidates)]
    if not judged:
        return "no accuracy verdict to plot against"
    label = metric_label(judged[0])
    settings = page.settings_text
    use_ratio = any(
        (m := page.ratio(c)) is not None and finite(m.value) is not None for c in candidates
    )
    if not use_ratio and not any(v is not None for v, _ in page.relative.values()):
        return f"neither a {settings} throughput ratio nor a relative cost to plot against"
    points = [
        ParetoPoint(page.reference, 1.0, 0.0, None, None, None, None, True, is_reference=True)
    ]
    left_out = []
    for c in candidates:
        verdict = page.verdict(c, judged[0])
        stats = None if verdict is None else stats_of(verdict, AccuracyVerdictStats)
        iv = None if stats is None else (stats.sequence or stats.interval)
        y = None if iv is None else finite(iv.difference)
        ratio = page.ratio(c)
        x, why = (
            (
                None if ratio is None else finite(ratio.value),
                f"no {page.setting(c)} throughput ratio",
            )
            if use_ratio
            else page.relative[c]
        )
        if y is None or iv is None or x is None:
            left_out.append(f"{c}: no {label} verdict" if y is None else f"{c}: {why}")
            continue
        x_low, x_high = page.ratio_interval(c) if use_ratio else (None, None)
        points.append(
            ParetoPoint(c, x, y, x_low, x_high, finite(iv.low), finite(iv.high), not standings[c])
        )
    each = " (each model at its own)" if page.mixed else ""
    at = (
        "each at its capacity under the SLO"
        if page.costs[page.reference].basis == "capacity"
        else f"at {settings}{each}"
    )
    return Pareto(
        f"throughput at {settings}{each} ÷ the reference's (95% interval)"
        if use_ratio
        else f"$/1M output tokens ÷ the reference's, {at} (lower is cheaper)",
        f"{label} accuracy − the reference's (pp, 95% interval)",
        f"{settings} throughput ratio" if use_ratio else "relative cost",
        f"{label} difference",
        use_ratio,
        tuple(
            replace(p, on_front=on)
            for p, on in zip(points, pareto_front([(p.x, p.y) for p in points], use_ratio))
        ),
        tuple(left_out),
    )


def pareto_front(
    points: Sequence[tuple[float, float]], x_higher_is_better: bool = True
) -> list[bool]:
    """Whether each point is on the Pareto front: no other point is at least as good on both
    axes and better on one (y: higher is better; x as ``x_higher_is_better`` says)."""
    sign = 1.0 if x_higher_is_better else -1.0
    scored = [(sign * x, y) for x, y in points]
    return [not any(o[0] >= p[0] and o[1] >= p[1] and o != p for o in scored) for p in scored]
