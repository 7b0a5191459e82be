"""The intervals a candidate's comparisons with the reference are decided on, unlike sides
refused first: accuracy's paired difference (optionally Holm-adjusted), throughput's ratio of
geometric means over the repeats (Welch t on log tokens/s)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..core.errors import ModelsweepError
from ..core.measurements import ThroughputStats
from ..core.stats.bootstrap import PairedInterval, holm_intervals, paired_bootstrap
from ..core.stats.intervals import RatioInterval, ratio_interval
from .comparisons import ModelItems, ModelMeasurement
from .pairing import check_same_items, check_same_serving


def _check_alike(candidate: ModelItems, reference: ModelItems) -> None:
    check_same_serving(candidate.model, candidate.provenance, reference.model, reference.provenance)
    check_same_items(candidate.model, candidate.items, reference.model, reference.items)


def paired_interval(
    candidate: ModelItems, reference: ModelItems, *, resamples: int, seed: int, confidence: float
) -> PairedInterval:
    """Refuse unlike results, then bootstrap candidate minus reference over shared items."""
    _check_alike(candidate, reference)
    return paired_bootstrap(
        candidate.scores(),
        reference.scores(),
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )


def holm_adjusted_interval(
    candidate: str,
    others: Mapping[str, ModelItems],
    reference: ModelItems,
    *,
    resamples: int,
    seed: int,
    confidence: float,
) -> PairedInterval:
    """``candidate``'s interval at its Holm step-down level across all candidates."""
    for items in others.values():
        _check_alike(items, reference)
    comparisons = {name: (items.scores(), reference.scores()) for name, items in others.items()}
    adjusted = holm_intervals(comparisons, confidence=confidence, resamples=resamples, seed=seed)
    return adjusted[candidate].interval


def throughput_ratio_interval(
    candidate: ModelMeasurement,
    reference: ModelMeasurement,
) -> RatioInterval:
    """Refuse unlike serving and unusable rates, then candidate ÷ reference over the repeats."""
    check_same_serving(
        candidate.model,
        candidate.measurement.provenance,
        reference.model,
        reference.measurement.provenance,
    )
    sides = []
    for side in (candidate, reference):
        stats = side.measurement.stats
        values = stats.repeat_values if isinstance(stats, ThroughputStats) else ()
        if not values:
            raise ModelsweepError(
                f"cannot compare {candidate.model} with {reference.model}: {side.model}'s "
                f"measurement (run {side.run_id}) has no repeat values; re-run it"
            )
        bad = [v for v in values if not (math.isfinite(v) and v > 0)]
        if bad:
            raise ModelsweepError(
                f"cannot compare {candidate.model} with {reference.model}: {len(bad)} of "
                f"{len(values)} of {side.model}'s repeats measured no throughput ({bad[0]!r} "
                f"tokens/s, run {side.run_id}); re-run it"
            )
        sides.append(list(values))
    return ratio_interval(sides[0], sides[1])
