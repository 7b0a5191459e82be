"""A candidate against the reference on one accuracy benchmark, item by item.

Items come from the store: this run's, or — for a model not measured in this
run — the latest stored run that measured it. Under ``pytest -n N`` the
reference runs on another worker; its items are waited for while its test is
still to come.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ModelsweepError
from .pairing import check_same_items, check_same_serving
from .records import ItemRecord
from .stats import PairedInterval, holm_intervals, paired_bootstrap
from .store import Store


class MissingResultsError(ModelsweepError):
    """A model's items for a benchmark are neither in this run nor in the store."""


@dataclass(frozen=True)
class ModelItems:
    """One model's scored items on one benchmark, and where they were measured."""

    model: str
    run_id: str
    items: list[ItemRecord]
    provenance: dict[str, Any]

    def scores(self) -> dict[str, float]:
        return {r.item_id: float(r.correct) for r in self.items}


def find_items(
    store: Store,
    run_id: str,
    model: str,
    benchmark: str,
    *,
    expected_tests: Sequence[str],
    wait_s: float,
    poll_s: float = 2.0,
    match_ids: Sequence[str] | None = None,
) -> ModelItems:
    """This run's items of ``model``, else stored ones.

    ``expected_tests`` are this run's tests that record them: while one of them
    has not finished, its result is waited for (it may run on another xdist
    worker); once they have all finished without a result, waiting stops. From
    the store, the latest earlier run whose item ids are ``match_ids`` is
    preferred (the other model's items), then simply the latest one.
    """
    deadline = time.monotonic() + (wait_s if expected_tests else 0.0)
    while True:
        if store.measurement_of(run_id, model, benchmark) is not None:
            items = store.run_items(run_id, model, benchmark)
            return ModelItems(model, run_id, items, store.endpoint(run_id, model) or {})
        outcomes = {test: store.outcome_of(run_id, test) for test in expected_tests}
        if expected_tests and all(outcomes.values()):
            shown = ", ".join(f"{test} {outcome}" for test, outcome in outcomes.items())
            raise MissingResultsError(
                f"{model} recorded no {benchmark} result in this run ({shown}); "
                "its own test's failure says why"
            )
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    if expected_tests:
        raise MissingResultsError(
            f"{model} has no {benchmark} result in this run after waiting {wait_s:.0f}s "
            f"(is it still queued behind this comparison on the same xdist worker?); "
            "raise --verdict-wait if it is just slow"
        )
    earlier = store.latest_run_with(model, benchmark, exclude=run_id, item_ids=match_ids)
    if earlier is None:
        raise MissingResultsError(
            f"no {benchmark} items of {model} in this run or in the store {store.path}; "
            f"run its {benchmark} test too (add --model {model})"
        )
    items = store.run_items(earlier, model, benchmark)
    return ModelItems(model, earlier, items, store.endpoint(earlier, model) or {})


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


def parse_fail_on(text: str, known: Sequence[str]) -> frozenset[str]:
    """``"worse,inconclusive"`` → the verdicts that fail a comparison test."""
    chosen = frozenset(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(chosen - set(known))
    if unknown or not chosen:
        raise ModelsweepError(
            f"--fail-on {text!r}: expected a comma-separated list of {', '.join(known)}"
        )
    return chosen

