"""The intervals that comparisons of a candidate with the reference are decided on.

The two sides are found by :mod:`~pytest_modelsweep.comparisons`; this module
refuses unlike results and computes the interval: on an accuracy benchmark the
paired difference item by item (optionally at its Holm step-down level), on a
throughput setting the ratio of means over the repeats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .comparisons import ModelItems, ModelMeasurement
from .errors import ModelsweepError
from .pairing import check_same_items, check_same_serving
from .stats import (
    PairedInterval,
    RatioInterval,
    holm_intervals,
    paired_bootstrap,
    ratio_interval,
)


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


def throughput_ratio_interval(
    candidate: ModelMeasurement, reference: ModelMeasurement, *, resamples: int
) -> RatioInterval:
    """Refuse unlike serving, then bootstrap candidate ÷ reference over the repeats' rates."""
    check_same_serving(candidate.model, candidate.provenance, reference.model, reference.provenance)
    return ratio_interval(
        candidate.stats["repeat_values"], reference.stats["repeat_values"], resamples=resamples
    )


def parse_fail_on(text: str, known: Sequence[str]) -> frozenset[str]:
    """``"worse,inconclusive"`` → the verdicts that fail a comparison test."""
    chosen = frozenset(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(chosen - set(known))
    if unknown or not chosen:
        raise ModelsweepError(
            f"--fail-on {text!r}: expected a comma-separated list of {', '.join(known)}"
        )
    return chosen

