"""``--until-decided`` for one accuracy benchmark: its comparisons found, its items sent in
rounds until they are decided (:class:`~.sequential.UntilDecided`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..api.evaluation import EvalItem
from ..core.errors import ModelsweepError
from ..core.measurements import AccuracySequence, Measurement
from ..store.database import Store
from ..workloads.accuracy import AccuracyRun, Send
from .gate import baseline_of
from .sequential import UntilDecided, partners_for, sequence_order


def until_decided(
    benchmark: str,
    items: Sequence[EvalItem],
    send: Send,
    params: Mapping[str, Any],
    *,
    store: Store,
    run_id: str,
    model: str,
    round_size: int,
    wait_s: float,
    reference: str | None,
    candidates: Sequence[str],
    tests_of: Callable[[str, str, Mapping[str, Any] | None], list[str]],
    margin: float | None,
    baseline: Callable[[], Sequence[Measurement]] | None = None,
    threshold: float = 0.0,
    progress: Callable[[str], None] | None = None,
) -> tuple[AccuracyRun[EvalItem], AccuracySequence]:
    """``--until-decided`` (a :data:`~..workloads.accuracy.Rounds`): ``items`` in rounds of the
    seeded order until every comparison their model takes part in on ``benchmark`` is decided.
    ``tests_of(model, benchmark, None)``: this run's tests of a model's benchmark; ``baseline()``: the
    ``--baseline`` measurements, whose measurement of ``params`` is a gate row to decide."""
    found = None
    if baseline is not None:
        try:
            found = baseline_of(
                Measurement(model, benchmark, 0.0, "accuracy", 0, params=dict(params)), baseline()
            )
        except ModelsweepError as error:  # the gate says so at the session's end
            if progress is not None:
                progress(f"{benchmark} {model}: no baseline to stop by ({error})")
    partners = partners_for(
        store,
        run_id,
        model,
        benchmark,
        reference=reference,
        candidates=candidates,
        tests_of=lambda name: tests_of(name, benchmark, None),
        margin=margin,
        baseline=found,
        threshold=threshold,
    )
    by_id = {item.id: item for item in items}
    loop = UntilDecided(
        store,
        run_id,
        model,
        benchmark,
        sequence_order(by_id),
        round_size,
        partners,
        wait_s=wait_s,
        progress=progress,
    )
    done = loop.run(lambda ids: send([by_id[item] for item in ids]))
    return done.run, done.sequence
