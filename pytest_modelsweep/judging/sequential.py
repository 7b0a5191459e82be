"""Sequential accuracy benchmarks (``--until-decided``): items in rounds, stopped once decided.

Every model sends its items in one seeded order, ``round_size`` at a time; after each round
it looks at every comparison it takes part in (:class:`Partner`), each the anytime-valid 95%
confidence sequence over the longest prefix both sides scored, and stops once every one is
decided or cannot use more of its items. Models on other xdist workers coordinate through the
store: after a round a model waits (at most ``--verdict-wait``) for each other side to have
scored as far, or stopped.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.measurements import (
    STOP_DECIDED,
    STOP_FAILED,
    STOP_FINAL,
    STOP_NO_USE,
    AccuracySequence,
    AccuracyStats,
    Measurement,
    SequentialVerdict,
)
from ..core.outputs import OutputError
from ..core.records import ApiRequest, ItemRecord
from ..core.stats import Verdict
from ..core.stats.sequences import (
    PairedConfidenceSequence,
    SequentialDecision,
    StopReason,
    paired_sequence,
    seeded_order,
)
from ..store.database import Store
from ..workloads.accuracy import AccuracyRun
from .pairing import PairingError, check_same_items

ORDER_SEED = 0
"""The seed of the order items go out in: one order for every model, run and baseline."""
CONFIDENCE = 0.95
IID: None = None
"""The ``population`` of every sequence here: the i.i.d. form (docs/verdicts.md)."""
MARK_PREFIX = "modelsweep-sequence::"
RUNNING, STOPPED = "running", "stopped"
POLL_S = 1.0
"""How often a waiting model reads the store."""


def sequence_mark(benchmark: str, model: str) -> str:
    """The store key (a test id of ``test_outcomes``) of a model's sequence in a run."""
    return f"{MARK_PREFIX}{benchmark}::{model}"


def items_digest(item_ids: Iterable[str]) -> str:
    """A short digest of a set of item ids: two runs drew from the same items when equal."""
    text = "\n".join(sorted(set(item_ids)))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def scores_of(items: Iterable[ItemRecord]) -> dict[str, float]:
    """Item id → score of the answered items (a failed item holds up the prefix)."""
    return {r.item_id: r.credit for r in items if not r.failed}


def prefix_length(order: Sequence[str], done: Mapping[str, object] | set[str]) -> int:
    """How many items of ``order`` are in ``done`` before the first that is not."""
    return next((position for position, item in enumerate(order) if item not in done), len(order))


# --------------------------------------------------------------------------- sides
@dataclass(frozen=True)
class SideView:
    """The other side of a comparison as it stands: answered items, stopped, started."""

    scores: Mapping[str, float]
    ended: bool
    started: bool


@dataclass
class LiveSide:
    """A model of this run, scoring as we go: read from the store."""

    store: Store
    run_id: str
    model: str
    benchmark: str
    tests: Sequence[str]
    """This run's tests that record the model's benchmark (one that ended has stopped)."""

    def _state(self) -> tuple[bool, bool]:
        mark = self.store.outcome_of(self.run_id, sequence_mark(self.benchmark, self.model))
        ended = mark == STOPPED or any(
            self.store.outcome_of(self.run_id, test) is not None for test in self.tests
        )
        return ended, ended or mark is not None

    def done(self) -> tuple[set[str], bool, bool]:
        """(ids scored so far, ended, started): cheap, for waiting."""
        ended, started = self._state()
        ids = set(self.store.run_item_ids(self.run_id, self.model, self.benchmark))
        return ids, ended, started or bool(ids)

    def view(self) -> SideView:
        ended, started = self._state()
        items = self.store.run_items(self.run_id, self.model, self.benchmark)
        return SideView(scores_of(items), ended, started or bool(items))


@dataclass
class FixedSide:
    """Items that will not change: an earlier run's, or a baseline's."""

    items: Sequence[ItemRecord]

    def done(self) -> tuple[set[str], bool, bool]:
        return {r.item_id for r in self.items}, True, True

    def view(self) -> SideView:
        return SideView(scores_of(self.items), True, True)


Wait = Literal["always", "if-started", "never"]


@dataclass(frozen=True)
class Look:
    """One comparison at one look; ``line`` says where it stands."""

    decided: bool
    needs_more: bool
    line: str


@dataclass
class Partner:
    """One comparison a model takes part in: a ``"verdict"`` against ``other`` (decided with
    ``margin``), or a ``"gate"`` row against its baseline (decided with ``threshold``)."""

    kind: Literal["verdict", "gate"]
    me: str
    other: str
    side: LiveSide | FixedSide
    wait: Wait
    me_is_candidate: bool = True
    margin: float | None = None
    threshold: float = 0.0

    def look(self, mine: Mapping[str, float], order: Sequence[str], view: SideView) -> Look:
        """The comparison over the common prefix of ``order``; undecided, it needs more items
        while short of the end and the other side has scored, or will score, further."""
        if not view.started:
            return Look(False, True, f"{self.other} has not started (its test may come later)")
        if self.kind == "gate":
            sequence = paired_sequence(
                mine, view.scores, order, population=IID, confidence=CONFIDENCE
            )
            status = sequential_gate_status(sequence, self.threshold, final=False)
            decided = status is not None
            line = (
                f"{self.me} now vs its baseline after {sequence.n} items: "
                f"{gate_look_text(sequence, status, self.threshold)}"
            )
        else:
            sides = (mine, view.scores) if self.me_is_candidate else (view.scores, mine)
            sequence, decision = verdict_decision(
                *sides, order, margin=self.margin, population=len(order)
            )
            decided = decision.reason is StopReason.DECIDED
            names = (self.me, self.other) if self.me_is_candidate else (self.other, self.me)
            line = f"{names[0]} vs {names[1]}: {decision.message}"
        further = prefix_length(order, view.scores) > prefix_length(order, mine) or not view.ended
        return Look(decided, not decided and sequence.n < len(order) and further, line)


def verdict_decision(
    candidate: Mapping[str, float],
    reference: Mapping[str, float],
    order: Sequence[str],
    *,
    margin: float | None,
    population: int,
    final: bool = False,
) -> tuple[PairedConfidenceSequence, SequentialDecision]:
    """The verdict over the longest common prefix of ``order`` (of the data set's
    ``population`` items): decided, or (``final``, or the prefix is all of them) the end's."""
    sequence = paired_sequence(candidate, reference, order, population=IID, confidence=CONFIDENCE)
    return sequence, sequence.decide(margin, final=final or sequence.n == population)


def sequential_gate_status(
    sequence: PairedConfidenceSequence, threshold: float, *, final: bool
) -> str | None:
    """A gate row from the sequence of now − baseline: *regressed* once a drop beyond
    ``threshold`` is certain, *ok* (or *improved*) once its absence is; undecided: None, unless
    ``final``, when the fixed-n rule reads the last sequence."""
    below, above = sequence.rules_out(-threshold)
    if above:
        return "regressed"
    better, worse = sequence.rules_out(0.0)
    if below:
        return "improved" if better else "ok"
    if not final:
        return None
    if worse and sequence.difference <= -threshold:
        return "regressed"
    return "improved" if better else "ok"


def gate_look_text(sequence: PairedConfidenceSequence, status: str | None, threshold: float) -> str:
    """``regressed: a drop beyond 1pp is certain (95% sequence -9.1 to -2.3 pp, mean -5.6
    pp)``; ``undecided (...)`` while ``status`` is None."""
    interval = sequence.interval()
    bounds = (
        f"{interval.confidence:.0%} sequence {100 * interval.low:+.1f} to "
        f"{100 * interval.high:+.1f} pp, mean {100 * interval.difference:+.1f} pp"
    )
    if status is None:
        return f"undecided ({bounds})"
    certain = "a drop beyond" if status == "regressed" else "no drop beyond"
    return f"{status}: {certain} {100 * threshold:g}pp is certain ({bounds})"


# --------------------------------------------------------------------------- the loop
@dataclass
class SequentialRun:
    """What a sequential benchmark scored (:class:`AccuracyRun`) and how it stopped."""

    run: AccuracyRun[Any]
    sequence: AccuracySequence


@dataclass
class UntilDecided:
    """One model's sequential benchmark: rounds of ``order`` until every partner is decided."""

    store: Store
    run_id: str
    model: str
    benchmark: str
    order: list[str]
    round_size: int
    partners: list[Partner]
    wait_s: float
    progress: Callable[[str], None] | None = None
    poll_s: float = POLL_S
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    gave_up: set[str] = field(default_factory=set)

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.benchmark} {self.model}: {line}")

    def _waited(self, partner: Partner, position: int) -> SideView:
        """The other side once it has scored ``position`` items of the order, or stopped, or
        need not or cannot be waited for."""
        deadline = self.clock() + self.wait_s
        while (
            partner.wait != "never"
            and partner.other not in self.gave_up
            and self.store.failure is None
        ):
            ids, ended, started = partner.side.done()
            if ended or prefix_length(self.order, ids) >= position:
                break
            if partner.wait == "if-started" and not started:
                break
            if self.clock() >= deadline:
                self.gave_up.add(partner.other)
                self._say(
                    f"{partner.other} has not scored {position} items after waiting "
                    f"{self.wait_s:.0f}s; going on without waiting for it (raise "
                    "--verdict-wait if it is just slow)"
                )
                break
            self.sleep(self.poll_s)
        return partner.side.view()

    def _looks(self, mine: Mapping[str, float], position: int, wait: bool) -> list[Look]:
        """Each comparison as it stands; one whose side a failed store cannot give needs more
        items (the benchmark goes on to the order's end, as a fixed-n one does)."""
        looks = []
        for partner in self.partners:
            try:
                view = self._waited(partner, position) if wait else partner.side.view()
            except OutputError:
                if self.store.failure is None:
                    raise  # it passes (a lock held too long): the test fails in its line
                looks.append(
                    Look(False, True, f"{partner.other} cannot be looked at: {self.store.failure}")
                )
                continue
            looks.append(partner.look(mine, self.order, view))
        return looks

    def _mark(self, state: str) -> None:
        """Tell the other workers where this model's sequence stands, unless the store
        failed (then they do not wait on it)."""
        try:
            self.store.add_outcome(self.run_id, sequence_mark(self.benchmark, self.model), state)
        except OutputError:
            if self.store.failure is None:
                raise

    def run(self, send: Callable[[Sequence[str]], AccuracyRun[Any]]) -> SequentialRun:
        """Send rounds until decided, the order's end, a round with failed items, or no
        comparison can use a further item (their other sides failed, ended or hold others)."""
        self._mark(RUNNING)
        records: dict[str, ItemRecord] = {}
        requests: list[ApiRequest] = []
        sent = reused = 0
        wall_s = 0.0
        position, stop = 0, STOP_FINAL
        looks: list[Look] = []
        try:
            while position < len(self.order):
                if position:
                    looks = self._looks(scores_of(records.values()), position, wait=True)
                    if looks and not any(look.needs_more for look in looks):
                        # decided, or no comparison can use a further item: none is sent
                        stop = STOP_DECIDED if any(look.decided for look in looks) else STOP_NO_USE
                        break
                    self._say(
                        f"after {position} of {len(self.order)} items, going on: "
                        + "; ".join(look.line for look in looks)
                    )
                batch = self.order[position : position + self.round_size]
                done = send(batch)
                records.update((r.item_id, r) for r in done.records)
                requests += done.requests
                sent, reused, wall_s = sent + done.sent, reused + done.reused, wall_s + done.wall_s
                position += len(batch)
                if done.errors:
                    stop = STOP_FAILED
                    break
            if stop != STOP_DECIDED:
                looks = self._looks(scores_of(records.values()), position, wait=False)
        finally:
            self._mark(STOPPED)
        lines = tuple(look.line for look in looks)
        self._say(
            f"stopped after {position} of {len(self.order)} items: {stop}"
            + (f" ({'; '.join(lines)})" if lines else "")
        )
        ordered = [records[item] for item in self.order[:position]]
        return SequentialRun(
            AccuracyRun(
                records=ordered,
                sent=sent,
                reused=reused,
                errors=sum(1 for r in ordered if r.failed),
                wall_s=wall_s,
                requests=requests,
            ),
            AccuracySequence(
                population=len(self.order),
                used=position,
                round_size=self.round_size,
                order_seed=ORDER_SEED,
                stop=stop,
                comparisons=lines,
                items_digest=items_digest(self.order),
            ),
        )


def partners_for(
    store: Store,
    run_id: str,
    model: str,
    benchmark: str,
    *,
    reference: str | None,
    candidates: Sequence[str],
    tests_of: Callable[[str], list[str]],
    margin: float | None,
    baseline: Measurement | None,
    threshold: float,
) -> list[Partner]:
    """The comparisons ``model`` takes part in on ``benchmark``: as the reference, one per
    candidate tested here; as a candidate, the reference's; with a baseline, its gate row."""
    partners: list[Partner] = []
    if model == reference:
        partners += [
            Partner(
                "verdict",
                model,
                candidate,
                LiveSide(store, run_id, candidate, benchmark, tests),
                "if-started",
                me_is_candidate=False,
                margin=margin,
            )
            for candidate in candidates
            if (tests := tests_of(candidate))
        ]
    elif reference is not None and model in candidates:
        side: LiveSide | FixedSide | None = None
        if tests := tests_of(reference):
            side = LiveSide(store, run_id, reference, benchmark, tests)
        elif earlier := store.latest_run_with(reference, benchmark, exclude=run_id):
            side = FixedSide(store.run_items(earlier, reference, benchmark))
        if side is not None:
            partners.append(
                Partner(
                    "verdict", model, reference, side, "always" if tests else "never", margin=margin
                )
            )
    if baseline is not None:
        partners.append(
            Partner(
                "gate",
                model,
                "the baseline",
                FixedSide(baseline.item_records()),
                "never",
                threshold=threshold,
            )
        )
    return partners


def sequence_order(item_ids: Iterable[str]) -> list[str]:
    """The order a sequential benchmark sends its items in (the same for every model)."""
    return seeded_order(item_ids, ORDER_SEED)


# --------------------------------------------------------------------------- judging sides
@dataclass(frozen=True)
class SequentialSides:
    """Two sides of a sequential comparison, paired over the common prefix of their order."""

    first: Mapping[str, float]
    second: Mapping[str, float]
    order: list[str]
    population: int


@dataclass(frozen=True)
class SequentialJudgement:
    """A sequential verdict: the sequence's decision (no other rule is asked) and its sides."""

    decision: SequentialDecision
    sides: SequentialSides

    @property
    def verdict(self) -> Verdict:
        assert self.decision.verdict is not None  # a final decision always has one
        return self.decision.verdict


def sequential_population(measurement: Measurement | None) -> AccuracySequence | None:
    """The sequence a measurement's items were chosen by (None: every item was scored)."""
    stats = None if measurement is None else measurement.stats
    return stats.sequence if isinstance(stats, AccuracyStats) else None


def pair_sequentially(
    first: tuple[str, Sequence[ItemRecord], AccuracySequence | None],
    second: tuple[str, Sequence[ItemRecord], AccuracySequence | None],
) -> SequentialSides:
    """Pair two sides' (name, items, sequence or None) in the seeded order; PairingError unless
    both drew from the same items and the items both scored have the same source data."""
    (name_a, digest_a, size_a), (name_b, digest_b, size_b) = (
        (
            name,
            sequence.items_digest if sequence else items_digest(r.item_id for r in items),
            sequence.population if sequence else len(items),
        )
        for name, items, sequence in (first, second)
    )
    if digest_a != digest_b:
        raise PairingError(
            f"refusing to pair {name_a} with {name_b}: they drew their items from different "
            f"sets ({size_a} and {size_b} items); run both on the same data and --limit"
        )
    ids_a = {r.item_id for r in first[1]}
    ids_b = {r.item_id for r in second[1]}
    order = sequence_order(ids_a | ids_b)
    common = set(order[: prefix_length(order, ids_a & ids_b)])
    check_same_items(
        name_a,
        [r for r in first[1] if r.item_id in common],
        name_b,
        [r for r in second[1] if r.item_id in common],
    )
    return SequentialSides(scores_of(first[1]), scores_of(second[1]), order, size_a)


def sequential_verdict(sides: SequentialSides, decision: SequentialDecision) -> SequentialVerdict:
    """The record of a sequential verdict (``decision`` over ``sides``, the candidate's
    first): its figures over the prefix it used, which both sides scored."""
    interval = decision.interval
    used = sides.order[: interval.n]
    a, b = sides.first, sides.second
    n = len(used)
    return SequentialVerdict(
        difference=interval.difference,
        low=interval.low,
        high=interval.high,
        confidence=interval.confidence,
        n=interval.n,
        population=sides.population,
        discordant=sum(1 for item in used if a[item] != b[item]),
        candidate_mean=sum(a[item] for item in used) / n if n else float("nan"),
        reference_mean=sum(b[item] for item in used) / n if n else float("nan"),
        method=interval.method,
        stop=STOP_DECIDED if decision.reason is StopReason.DECIDED else STOP_FINAL,
        order_seed=ORDER_SEED,
    )
