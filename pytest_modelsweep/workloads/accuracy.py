"""Run an accuracy workload: reuse stored items, send the rest, store each as it is scored;
:func:`evaluate` is the ``evaluate`` fixture's work (your own benchmark's items and scorer)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..api.evaluation import (
    EvalItem,
    EvaluationResult,
    Prompting,
    Scorer,
    Summarise,
    check_positive,
    request_for,
    sampling_params,
    scored_record,
    summarise_items,
)
from ..client import Guard, run_post_requests
from ..core.errors import DataError, MeasurementError
from ..core.measurements import AccuracySequence, AccuracyStats
from ..core.options import DEFAULTS
from ..core.outputs import OutputError
from ..core.records import ApiRequest, Completion, ItemRecord
from ..core.settings import BenchSettings
from ..serving.endpoint import Endpoint
from ..serving.pitfalls import seeded_sampling
from ..store.database import Store

ItemT = TypeVar("ItemT")
Score = Callable[[ItemT, ApiRequest, Completion], ItemRecord]
"""A scorer: one item, the request sent for it and the completion it got, to a scored record."""


@dataclass
class AccuracyRun(Generic[ItemT]):
    """The records of one model on one benchmark, in item order, and how they were obtained."""

    records: list[ItemRecord]
    sent: int
    reused: int
    errors: int
    wall_s: float
    requests: list[ApiRequest] = field(default_factory=list)
    store_error: str | None = None
    """Why the store stopped taking items (a full disk...); every item was still scored."""


class ProgressLine:
    """Items done / total, rate and ETA, at most every ``every_s`` seconds."""

    def __init__(
        self, label: str, total: int, write: Callable[[str], None] | None, every_s: float = 30.0
    ) -> None:
        self.label, self.total, self.write, self.every_s = label, total, write, every_s
        self.done = 0
        self.started = time.monotonic()
        self.last = self.started

    def overdue(self, waiting: int, seconds: float) -> None:
        """Say that ``waiting`` requests have had no answer, the oldest for ``seconds``."""
        if self.write is not None:
            self.last = time.monotonic()
            noun = "request" if waiting == 1 else "requests"
            self.write(
                f"{self.label}: {self.done}/{self.total} items, {waiting} {noun} "
                f"waiting {seconds:.0f} s"
            )

    def step(self) -> None:
        self.done += 1
        now = time.monotonic()
        if self.write is None or (now - self.last < self.every_s and self.done < self.total):
            return
        self.last = now
        rate = self.done / max(now - self.started, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        self.write(
            f"{self.label}: {self.done}/{self.total} items, {rate:.2f} items/s, ETA {eta:.0f}s"
        )


def _verdict(record: ItemRecord) -> tuple[Any, ...]:
    """What a scorer decides about an answer (a record's other fields describe the answer)."""
    return record.correct, record.score, record.scores, record.extracted, record.error


def run_accuracy(
    endpoint: Endpoint,
    benchmark: str,
    items: Sequence[ItemT],
    build: Callable[[ItemT], ApiRequest],
    score: Score[ItemT],
    *,
    store: Store | None,
    run_id: str,
    reuse: bool = True,
    concurrency: int = 16,
    timeout_s: float = DEFAULTS.request_timeout,
    idle_timeout_s: float = DEFAULTS.idle_timeout,
    progress: Callable[[str], None] | None = None,
) -> AccuracyRun[ItemT]:
    """Score every item: stored answers under the same serving key are reused (scored again),
    the rest sent. A store that refuses a write or the read is left alone for the rest of the
    run (``store_error`` says why); the items are still measured."""
    started = time.monotonic()
    requests = [build(item) for item in items]
    refusal = seeded_sampling(endpoint.accelerator, ((r.item_id, r.payload) for r in requests))
    if refusal is not None:  # before any request: a TPU server rejects them
        raise DataError(f"{benchmark} {endpoint.model.name}: {refusal}")
    serving_key = endpoint.provenance.cache_key()
    model = endpoint.model.name
    store_error: list[str] = []

    def keep(write: Callable[[Store], None]) -> None:
        """Write to the store until it first refuses (its one line is kept)."""
        if store is not None and not store_error:
            try:
                write(store)
            except OutputError as error:
                store_error.append(str(error))

    keep(lambda s: s.add_endpoint(run_id, model, endpoint.provenance.as_dict()))
    found: dict[str, ItemRecord] = {}
    if store is not None and reuse:
        try:
            found = store.stored_items(
                serving_key, benchmark, ((r.item_id, r.prompt_hash) for r in requests)
            )
        except OutputError as error:  # unreadable: every item is sent (and kept in the results)
            store_error.append(str(error))
    stored: dict[str, tuple[ItemRecord, Completion]] = {
        item_id: (record, record.completion)
        for item_id, record in found.items()
        if record.error is None and record.completion is not None
    }
    records: dict[str, ItemRecord] = {}
    by_id = dict(zip((r.item_id for r in requests), items))
    rescored = 0
    for request in requests:
        if request.item_id in stored:
            # the stored answer is reused; its verdict is always the current scorer's
            previous, completion = stored[request.item_id]
            record = score(by_id[request.item_id], request, completion)
            records[request.item_id] = record
            if record != previous:
                rescored += _verdict(record) != _verdict(previous)
                keep(lambda s: s.update_item(serving_key, benchmark, record))  # noqa: B023
            keep(lambda s: s.add_item(run_id, model, benchmark, serving_key, record, reused=True))  # noqa: B023
    to_send = [r for r in requests if r.item_id not in stored]
    line = ProgressLine(f"{benchmark} {model}", len(to_send), progress)
    if progress is not None and stored:
        changed = f" ({rescored} scored differently now)" if rescored else ""
        progress(
            f"{benchmark} {model}: reused {len(stored)} stored items{changed}, "
            f"sending {len(to_send)}"
        )

    def on_result(request: ApiRequest, completion: Completion) -> None:
        record = score(by_id[request.item_id], request, completion)
        records[request.item_id] = record
        keep(lambda s: s.add_item(run_id, model, benchmark, serving_key, record, reused=False))
        line.step()

    guard = Guard(
        idle_timeout_s=idle_timeout_s,
        credentials=endpoint.credentials,
        breaker=endpoint.breaker,
        on_wait=line.overdue,
    )
    if to_send:
        run_post_requests(
            endpoint.v1,
            endpoint.served_name,
            to_send,
            concurrency,
            timeout_s=timeout_s,
            on_result=on_result,
            guard=guard,
        )
    ordered = [records[r.item_id] for r in requests]
    return AccuracyRun(
        records=ordered,
        sent=len(to_send),
        reused=len(stored),
        errors=sum(1 for r in ordered if r.error is not None),
        wall_s=time.monotonic() - started,
        requests=requests,
        store_error=store_error[0] if store_error else None,
    )


Send = Callable[[Sequence[EvalItem]], AccuracyRun[EvalItem]]
"""Score some items (:func:`run_accuracy` with the benchmark's settings)."""

Rounds = Callable[
    [str, Sequence[EvalItem], Send, Mapping[str, Any]],
    tuple[AccuracyRun[EvalItem], AccuracySequence],
]
"""``--until-decided``: (benchmark, items, send, recorded params) to what the rounds scored
and how they stopped (:func:`~pytest_modelsweep.judging.rounds.until_decided`)."""


def checked_items(benchmark: str, items: Iterable[EvalItem]) -> list[EvalItem]:
    """``items`` as a list of uniquely named :class:`EvalItem`, or a one-line DataError."""
    chosen = list(items)
    if wrong := [item for item in chosen if not isinstance(item, EvalItem)]:
        raise DataError(f"{benchmark}: items must be EvalItem, got {type(wrong[0]).__name__}")
    if not chosen:
        raise DataError(f"{benchmark}: no items to evaluate")
    seen: set[str] = set()
    for item in chosen:
        if item.id in seen:
            raise DataError(f"{benchmark}: two items have the id {item.id!r}; ids must be unique")
        seen.add(item.id)
    return chosen


def evaluate(
    endpoint_of: Callable[[], Endpoint],
    benchmark: str,
    items: Iterable[EvalItem],
    scorer: Scorer,
    *,
    prompting: Prompting,
    settings: BenchSettings,
    record: Callable[..., Any],
    store: Store | None,
    store_failure: str | None = None,
    concurrency: int = 16,
    params: Mapping[str, Any] | None = None,
    summarise: Summarise | None = None,
    rounds: Rounds | None = None,
    progress: Callable[[str], None] | None = None,
) -> EvaluationResult:
    """Score the first ``settings.limit`` of ``items`` on the model of ``endpoint_of()`` (asked
    for once the items are checked), in ``rounds`` when given, and ``record`` the measurement;
    then an OutputError when the store failed (``store_failure``: before), a MeasurementError
    when items got no answer."""
    chosen = checked_items(benchmark, items)
    check_positive(benchmark, concurrency=concurrency)
    limit = settings.limit
    chosen = chosen[:limit] if limit is not None else chosen
    endpoint = endpoint_of()
    recorded_params = {
        **(params or {}),
        "prompting": prompting,
        "limit": limit and len(chosen),  # the real count, when limited
        "subset": limit is not None,
        **sampling_params(chosen, prompting),
    }

    def send(some: Sequence[EvalItem]) -> AccuracyRun[EvalItem]:
        return run_accuracy(
            endpoint,
            benchmark,
            some,
            lambda item: request_for(item, prompting),
            lambda item, sent, completion: scored_record(benchmark, scorer, item, sent, completion),
            store=None if store_failure else store,
            run_id=settings.run_id,
            reuse=settings.reuse,
            concurrency=concurrency,
            timeout_s=settings.request_timeout_s,
            idle_timeout_s=settings.idle_timeout_s,
            progress=progress,
        )

    accuracy_run, sequence = (
        (send(chosen), None) if rounds is None else rounds(benchmark, chosen, send, recorded_params)
    )
    records = accuracy_run.records
    stats = AccuracyStats.of(
        summarise_items(records),
        summarise(records) if summarise is not None else {},
        sent=accuracy_run.sent,
        reused=accuracy_run.reused,
        wall_s=accuracy_run.wall_s,
        sequence=sequence,
    )
    record(
        benchmark,
        stats.accuracy,
        "accuracy",
        stats.n,
        params=recorded_params,
        stats=stats,
        items=[r.to_dict() for r in records],
        endpoint=endpoint,
    )
    store_failure = accuracy_run.store_error or store_failure
    if store_failure is not None:  # measured and recorded, but not stored
        raise OutputError(f"{store_failure} (the measurement is in the results)")
    if failed := [r for r in records if r.failed]:
        # Failed items are not scored: the accuracy above is over the answered ones only,
        # and nothing (verdict, gate, baseline) is concluded from this measurement.
        raise MeasurementError(
            f"{len(failed)} of {len(records)} {benchmark} requests got no answer (first: "
            f"{failed[0].error}); re-run to resend them (completed items are reused)"
        )
    return EvaluationResult(
        benchmark=benchmark,
        model=endpoint.model.name,
        accuracy=stats.accuracy,
        n=stats.n,
        correct=stats.correct,
        failed=stats.failed,
        sent=stats.sent,
        reused=stats.reused,
        records=records,
        stats=stats,
    )
