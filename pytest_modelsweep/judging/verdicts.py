"""The intervals that comparisons of a candidate with the reference are decided on.

The two sides are found by :mod:`~pytest_modelsweep.comparisons`; this module
refuses unlike results and computes the interval: on an accuracy benchmark the
paired difference item by item (optionally at its Holm step-down level), on a
throughput setting the ratio of geometric means over the repeats (Welch t on log
tokens/s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..core.errors import ModelsweepError
from ..core.measurements import ThroughputStats
from ..core.stats import (
    PairedInterval,
    RatioInterval,
    holm_intervals,
    paired_bootstrap,
    ratio_interval,
)
from .comparisons import ModelItems, ModelMeasurement
from .pairing import check_same_items, check_same_serving


def paired_interval(
    candidate: ModelItems, reference: ModelItems, *, resamples: int, seed: int, confidence: float
) -> PairedInterval:
    """Refuse unlike results, then bootstrap candidate minus reference over shared items."""
    check_same_serving(candidate.model, candidate.provenance, reference.model, reference.provenance)
    check_same_items(candidate.model, candidate.items, reference.model, reference.items)
    return paired_bootstrap(
        candidate.scores(), reference.scores(),
        resamples=resamples, seed=seed, confidence=confidence,
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
        check_same_serving(items.model, items.provenance, reference.model, reference.provenance)
        check_same_items(items.model, items.items, reference.model, reference.items)
    comparisons = {name: (items.scores(), reference.scores()) for name, items in others.items()}
    adjusted = holm_intervals(comparisons, confidence=confidence, resamples=resamples, seed=seed)
    return adjusted[candidate].interval


def throughput_ratio_interval(candidate: ModelMeasurement, reference: ModelMeasurement) -> RatioInterval:
    """Refuse unlike serving and unusable rates, then candidate ÷ reference over the repeats.

    The interval is the closed-form Welch t interval on log throughput
    (:func:`~pytest_modelsweep.stats.ratio_interval`).
    """
    check_same_serving(candidate.model, candidate.provenance, reference.model, reference.provenance)
    sides = []
    for side in (candidate, reference):
        values = side.stats.repeat_values if isinstance(side.stats, ThroughputStats) else ()
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
