"""The kinds of comparison, each a :class:`~.judge.Comparison`: :class:`AccuracyComparison`
(``verdict:<benchmark>``), :class:`ThroughputComparison` (``throughput_ratio``) and
:class:`CapacityComparison` (``capacity_ratio``, ``rate_capacity_ratio``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import MeasurementError
from ..core.measurements import (
    CONCURRENCY,
    DESIGN_BACK_TO_BACK,
    DESIGN_INTERLEAVED,
    RATE,
    SEARCH_BENCHMARK,
    AccuracySequence,
    AccuracyVerdictStats,
    Interleaved,
    Measurement,
    SearchBracket,
    SearchRatio,
    SearchRatioStats,
    SearchStats,
    SequentialVerdict,
    ThroughputRatioStats,
    ThroughputStats,
    flags_text,
    knob_text,
)
from ..core.metrics import (
    CAPACITY_RATIO_BENCHMARK,
    RATE_CAPACITY_RATIO_BENCHMARK,
    RATIO_BENCHMARK,
    VERDICT_PREFIX,
)
from ..core.slo import Slo
from ..core.stats.bootstrap import PairedInterval
from ..core.stats.intervals import RatioInterval
from ..core.stats.repeats import RepeatPolicy
from ..core.stats.verdicts import (
    RULE_COVERS_ZERO,
    RULE_EQUIVALENCE_MARGIN,
    RULE_RATIO_COVERS_ONE,
    Verdict,
)
from ..workloads.slo_search import NEEDS_SLO, RULE_INTERVAL, capacity_ratio, interval_text
from .comparisons import (
    ComparisonFinder,
    ComparisonKind,
    Failed,
    Found,
    Missing,
    ModelItems,
    ModelMeasurement,
    Skipped,
    failed_items_reason,
)
from .judge import Judged
from .pairing import RequestSettings, check_same_serving, unlike_requests
from .sequential import (
    SequentialJudgement,
    pair_sequentially,
    sequential_population,
    sequential_verdict,
    verdict_decision,
)
from .verdicts import holm_adjusted_interval, paired_interval, throughput_ratio_interval

ExpectedTests = Callable[[str, str, "Mapping[str, Any] | None"], list[str]]
"""``expected(model, benchmark, params)``: this run's tests that record that side (params
None: any of the benchmark's tests)."""

CONFIDENCE = 0.95
BothMeasured = tuple[ModelMeasurement, ModelMeasurement]
"""(candidate, reference) measurements."""


@dataclass
class _Pair:
    """A candidate and the reference, whose sides ``finder`` finds (``expected_tests``: this
    run's tests that record a side)."""

    finder: ComparisonFinder
    expected_tests: ExpectedTests
    candidate: str
    reference: str

    def _measurements(
        self,
        metric: str,
        setting: Mapping[str, Any],
        expected: Mapping[str, Any] | None,
        *,
        any_setting: bool = False,
    ) -> Found[BothMeasured] | Missing | Skipped | Failed:
        """Both measurements at ``setting``, the reference's found first; ``any_setting``: a
        side missing there is taken at another (to be refused by name)."""
        found = []
        for model in (self.reference, self.candidate):
            side = self.finder.measurement(
                model, metric, setting, expected_tests=self.expected_tests(model, metric, expected)
            )
            if isinstance(side, Missing) and any_setting:
                other = self.finder.measurement(model, metric, {}, expected_tests=[])
                side = other if isinstance(other, Found) else side
            if not isinstance(side, Found):
                return side
            found.append(side.side)
        return Found((found[1], found[0]))


# --------------------------------------------------------------------------- accuracy
@dataclass(frozen=True)
class AccuracySides:
    """Both sides' items, and with ``--holm`` every candidate's (``others``, by name)."""

    candidate: ModelItems
    reference: ModelItems
    others: Mapping[str, ModelItems] | None = None


@dataclass
class AccuracyComparison(_Pair):
    """A candidate against the reference on one accuracy benchmark, item by item. The side
    tested in this session is found first, the other's stored items preferred where their ids
    match (``candidate_first``)."""

    metric: str
    margin: float | None
    resamples: int
    candidate_first: bool
    holm_candidates: Sequence[str] | None = None
    """Every candidate of the run with ``--holm``; None without."""
    skip_reason: str | None = None
    """Why the benchmark does not apply to one of the models (e.g. BFCL's tools mode)."""
    kind: ComparisonKind = "accuracy"

    def _items(
        self,
        model: str,
        match: ModelItems | None = None,
    ) -> Found[ModelItems] | Missing | Skipped | Failed:
        return self.finder.items(
            model,
            self.metric,
            expected_tests=self.expected_tests(model, self.metric, None),
            match_ids=[r.item_id for r in match.items] if match is not None else None,
        )

    def find(self) -> Found[AccuracySides] | Missing | Skipped | Failed:
        if self.skip_reason is not None:
            return Skipped(self.skip_reason)
        first, second = (
            (self.candidate, self.reference)
            if self.candidate_first
            else (self.reference, self.candidate)
        )
        found = self._items(first)
        if not isinstance(found, Found):
            return found
        other = self._items(second, match=found.side)
        if not isinstance(other, Found):
            return other
        sides = {first: found.side, second: other.side}
        candidate, reference = sides[self.candidate], sides[self.reference]
        others: dict[str, ModelItems] | None = None
        if self.holm_candidates is not None:
            others = {}
            for name in self.holm_candidates:
                more = Found(candidate) if name == self.candidate else self._items(name)
                if not isinstance(more, Found):
                    return more
                others[name] = more.side
        return Found(AccuracySides(candidate, reference, others))

    def _sequence(self, side: ModelItems) -> AccuracySequence | None:
        """The sequence a side's items were chosen by (None: it scored every item)."""
        found = self.finder.store.measurement_of(side.run_id, side.model, self.metric)
        return sequential_population(None if found is None else Measurement.from_dict(found))

    def refuse(self, sides: AccuracySides) -> str | None:
        for items in [sides.candidate, *(sides.others or {}).values()]:
            refused = failed_items_reason(items, sides.reference, self.metric) or unlike_requests(
                items.model, items.requests, self.reference, sides.reference.requests
            )
            if refused is not None:
                return refused
        return None

    def interval(self, sides: AccuracySides) -> PairedInterval | SequentialJudgement:
        """The bootstrap interval; where a side's items were chosen sequentially, the
        decision of the confidence sequence they stopped by (over the common prefix of the
        seeded order, final: no more items come)."""
        candidate_sequence = self._sequence(sides.candidate)
        reference_sequence = self._sequence(sides.reference)
        if candidate_sequence is not None or reference_sequence is not None:
            if sides.others is not None:
                raise ValueError(
                    f"cannot judge {self.candidate} with --holm: its items were chosen "
                    "sequentially (--until-decided), and confidence sequences have no Holm "
                    "adjustment; re-run without --holm"
                )
            check_same_serving(
                self.candidate,
                sides.candidate.provenance,
                self.reference,
                sides.reference.provenance,
            )
            paired = pair_sequentially(
                (self.candidate, sides.candidate.items, candidate_sequence),
                (self.reference, sides.reference.items, reference_sequence),
            )
            decision = verdict_decision(
                paired.first,
                paired.second,
                paired.order,
                margin=self.margin,
                population=paired.population,
                final=True,
            )[1]
            return SequentialJudgement(decision, paired)
        interval = paired_interval(
            sides.candidate,
            sides.reference,
            resamples=self.resamples,
            seed=0,
            confidence=CONFIDENCE,
        )
        if sides.others is None:
            return interval
        return holm_adjusted_interval(
            self.candidate,
            sides.others,
            sides.reference,
            resamples=self.resamples,
            seed=0,
            confidence=CONFIDENCE,
        )

    def judged(
        self, sides: AccuracySides, interval: PairedInterval | SequentialJudgement, verdict: Verdict
    ) -> Judged:
        rule = RULE_COVERS_ZERO if self.margin is None else RULE_EQUIVALENCE_MARGIN
        head = f"{self.candidate} vs {self.reference} on {self.metric}: {verdict.value}"
        holm = sides.others is not None  # never with a sequence (refused by interval)
        params: dict[str, Any] = {
            "reference": self.reference,
            "verdict": str(verdict.value),
            "holm": holm,
            "margin": self.margin,
        }
        sequence: SequentialVerdict | None = None
        if isinstance(interval, SequentialJudgement):
            sequence = sequential_verdict(interval.sides, interval.decision)
            shown, rule = None, f"sequence+{rule}"
            summary = (
                f"{head}, {sequence.text()} (difference {sequence.difference:+.3f}, "
                f"{100 * sequence.confidence:.4g}% confidence sequence "
                f"[{sequence.low:+.3f}, {sequence.high:+.3f}], "
                f"discordant={sequence.discordant})"
            )
            difference, n = sequence.difference, sequence.n
            params["sequential"] = True
        else:
            shown, rule = interval, f"holm+{rule}" if holm else rule
            summary = (
                f"{head} (difference {interval.difference:+.3f}, "
                f"{100 * interval.confidence:.4g}% interval [{interval.low:+.3f}, "
                f"{interval.high:+.3f}], n={interval.n}, discordant={interval.discordant}, "
                f"detectable ±{interval.min_detectable_difference:.3f})"
            )
            if interval.too_few_items:
                summary += f"; no verdict from it: {interval.too_few_reason()}"
            difference, n = interval.difference, interval.n
        stats = AccuracyVerdictStats(
            self.candidate,
            self.reference,
            self.metric,
            verdict,
            shown,
            self.margin,
            rule,
            sides.candidate.run_id,
            sides.reference.run_id,
            sequence=sequence,
        )
        return Judged(
            verdict,
            f"{VERDICT_PREFIX}{self.metric}",
            difference,
            "accuracy difference",
            n,
            stats,
            summary,
            params=params,
        )


# --------------------------------------------------------------------------- throughput
@dataclass(frozen=True)
class InterleavedSides:
    """Both models measured in pairs of windows in this run (``--interleave``)."""

    run_id: str
    measured: Interleaved
    policy: RepeatPolicy
    """The ``--repeats`` policy the pairs were measured under (it makes their interval)."""


ThroughputSides = BothMeasured | InterleavedSides
"""(candidate, reference) measurements, or both measured interleaved."""


@dataclass
class ThroughputComparison(_Pair):
    """A candidate's throughput ÷ the reference's at one setting: both measurements found, or
    with ``interleaved`` both measured here in pairs of windows (drift cancels)."""

    metric: str
    setting: Mapping[str, Any]
    margin: float
    """``--ratio-tolerance``."""
    interleaved: InterleavedSides | None = None
    kind: ComparisonKind = "throughput"

    def find(self) -> Found[ThroughputSides] | Missing | Skipped | Failed:
        if self.interleaved is not None:
            return Found(self.interleaved)
        return self._measurements(self.metric, self.setting, self.setting)

    def refuse(self, sides: ThroughputSides) -> str | None:
        # throughput_ratio_interval refuses unlike serving and unusable rates
        if isinstance(sides, InterleavedSides):
            return None  # both measured here, in pairs, with this run's settings
        candidate, reference = sides
        return unlike_requests(
            self.candidate, candidate.requests, self.reference, reference.requests
        )

    def interval(self, sides: ThroughputSides) -> RatioInterval:
        if isinstance(sides, InterleavedSides):
            return sides.policy.paired_ratio(
                sides.measured.candidate_values, sides.measured.reference_values
            )
        return throughput_ratio_interval(*sides)

    def judged(self, sides: ThroughputSides, interval: RatioInterval, verdict: Verdict) -> Judged:
        tolerance = self.margin
        how: dict[str, Any] = (
            {
                "candidate_run": sides.run_id,
                "reference_run": sides.run_id,
                "design": DESIGN_INTERLEAVED,
                "interleaved": sides.measured,
            }
            if isinstance(sides, InterleavedSides)
            else {
                "candidate_run": sides[0].run_id,
                "reference_run": sides[1].run_id,
                "candidate_flags": _flags(sides[0]),
                "reference_flags": _flags(sides[1]),
                "design": DESIGN_BACK_TO_BACK,
            }
        )
        stats = ThroughputRatioStats(
            self.candidate,
            self.reference,
            self.metric,
            verdict,
            interval,
            tolerance,
            RULE_RATIO_COVERS_ONE,
            **how,
        )
        concurrency, prompt_tokens = self.setting["concurrency"], self.setting["prompt_tokens"]
        shown = (
            "no interval: a side has one repeat"
            if interval.degenerate
            else f"95% interval {interval.low:.2f}–{interval.high:.2f}"
        )
        summary = (
            f"{self.candidate} ÷ {self.reference}, {self.metric} c{concurrency}"
            f"{f' p{prompt_tokens}' if prompt_tokens else ''}: {interval.ratio:.2f}x, "
            f"{verdict.value} ({shown}, tolerance ±{tolerance:.0%}, repeats "
            f"{interval.candidate_n}/{interval.reference_n}"
            f"{flags_text(stats.candidate_flags, stats.reference_flags)})"
        )
        return Judged(
            verdict,
            RATIO_BENCHMARK,
            interval.ratio,
            "x reference",
            interval.candidate_n,
            stats,
            summary,
            params={
                "benchmark": self.metric,
                **self.setting,
                "reference": self.reference,
                "verdict": str(verdict.value),
                "design": stats.design,
            },
        )


def _flags(side: ModelMeasurement) -> tuple[str, ...]:
    """What makes a side doubtful (``unstable (CV 53%)``, ``contended``)."""
    stats = side.measurement.stats
    return stats.flags if isinstance(stats, ThroughputStats | SearchStats) else ()


# --------------------------------------------------------------------------- capacity
@dataclass
class CapacityComparison(_Pair):
    """A candidate's capacity ÷ the reference's under this run's SLO and attainment target,
    both searched over ``knob``, judged on the interval the two searches give."""

    slo: Slo | None
    attainment_target: float
    margin: float
    """``--ratio-tolerance``."""
    knob: str = CONCURRENCY

    @property
    def kind(self) -> ComparisonKind:
        return "rate_capacity" if self.knob == RATE else "capacity"

    @property
    def metric(self) -> str:
        return SEARCH_BENCHMARK[self.knob]

    @property
    def setting(self) -> dict[str, Any]:
        return {
            "slo": None if self.slo is None else self.slo.as_dict(),
            "attainment_target": self.attainment_target,
        }

    def find(self) -> Found[BothMeasured] | Missing | Skipped | Failed:
        if self.slo is None:
            return Skipped(NEEDS_SLO[self.knob])
        # a capacity under another SLO or target is refused by name
        return self._measurements(
            self.metric, self.setting, None, any_setting=self.knob == CONCURRENCY
        )

    def brackets(self, sides: BothMeasured) -> tuple[SearchBracket, SearchBracket] | str:
        """Both sides' brackets (candidate, reference), or why one cannot be read."""
        rate = self.knob == RATE
        brackets = []
        for side, role in zip(sides, ("candidate", "reference")):
            stats = side.measurement.stats
            try:
                if not isinstance(stats, SearchStats) or stats.knob != self.knob:
                    raise ValueError(
                        f"not a {'rate sweep' if rate else 'capacity measurement'} "
                        f"({side.measurement.benchmark})"
                    )
                brackets.append(stats.measured_bracket())
            except ValueError as error:
                return (
                    f"cannot compare capacities{' in req/s' if rate else ''}: the {role}'s "
                    f"({side.model}) is {error}"
                )
        return brackets[0], brackets[1]

    def _other_slo(self, sides: BothMeasured) -> str | None:
        """Why a side found under another SLO or target than this run's is refused."""
        for side in sides:
            asked = RequestSettings.of("this run", self.metric, self.setting)
            found = RequestSettings.of(
                side.model,
                self.metric,
                {k: v for k, v in side.measurement.params.items() if k in self.setting},
            )
            other = unlike_requests(side.model, found, "this run", asked)
            if other is not None:
                return (
                    f"{other.removesuffix('measure both with the same request settings')}"
                    f"re-run {side.model}'s capacity test (run {side.run_id}) under this "
                    "run's --slo and --slo-attainment"
                )
        return None

    def _other_burstiness(self, sides: BothMeasured) -> str | None:
        candidate, reference = (side.measurement.stats for side in sides)
        if (
            isinstance(candidate, SearchStats)
            and isinstance(reference, SearchStats)
            and candidate.burstiness != reference.burstiness
        ):
            return (
                f"cannot compare capacities in req/s swept at different burstiness "
                f"({self.candidate} {candidate.burstiness:g}, {self.reference} "
                f"{reference.burstiness:g}): sweep both with the same --burstiness"
            )
        return None

    def refuse(self, sides: BothMeasured) -> str | None:
        brackets = self.brackets(sides)
        unread = brackets if isinstance(brackets, str) else None
        unlike = unlike_requests(
            self.candidate, sides[0].requests, self.reference, sides[1].requests
        )
        checks = (
            [unread, self._other_burstiness(sides), unlike]
            if self.knob == RATE
            else [unlike, self._other_slo(sides), unread]
        )
        refused = next((check for check in checks if check is not None), None)
        if refused is not None or isinstance(brackets, str):
            return refused
        if brackets[1].capacity == 0:
            stats = sides[1].measurement.stats
            why = (
                None
                if not isinstance(stats, SearchStats)
                else stats.stopped
                if self.knob == RATE
                else stats.reason
            )
            return (
                f"cannot compare: the reference meets the SLO at no "
                f"{'rate of its sweep' if self.knob == RATE else 'concurrency'} "
                f"({self.reference} under {self.slo}: {why or ''})"
            )
        return None

    def interval(self, sides: BothMeasured) -> SearchRatio:
        brackets = self.brackets(sides)
        if isinstance(brackets, str):
            raise MeasurementError(brackets)
        return capacity_ratio(*brackets)

    def judged(self, sides: BothMeasured, interval: SearchRatio, verdict: Verdict) -> Judged:
        candidate, reference = sides
        tolerance, rate = self.margin, self.knob == RATE
        stats = SearchRatioStats(
            self.candidate,
            self.reference,
            self.metric,
            verdict,
            interval,
            tolerance,
            RULE_INTERVAL[self.knob],
            self.attainment_target,
            candidate.measurement.params.get("max_concurrency"),
            reference.measurement.params.get("max_concurrency"),
            candidate.measurement.stats.confidence
            if isinstance(candidate.measurement.stats, SearchStats)
            else None,
            candidate.run_id,
            reference.run_id,
            _flags(candidate),
            _flags(reference),
            self.knob,
        )
        if rate:
            shown = (
                "no interval: both sweeps passed at their maximum rate"
                if interval.degenerate
                else interval.text()
            )
            figures = (
                f"{interval.candidate.capacity:.3g} ÷ {interval.reference.capacity:.3g} = "
                f"{interval.ratio:.2f}x, {verdict.value} ({shown}; brackets "
                f"{interval.candidate.text()} and {interval.reference.text()} req/s"
            )
        else:
            shown = (
                "no interval: both searches reached their server's maximum concurrency"
                if interval.degenerate
                else interval_text(interval)
            )
            both = (
                f"capacity intervals {interval.candidate.interval_text()} and "
                f"{interval.reference.interval_text()} at "
                f"{100 * (interval.candidate.confidence or 0):.4g}% each"
                if interval.confidence is not None
                else f"capacity brackets {interval.candidate.text()} and "
                f"{interval.reference.text()} of one-window steps"
            )
            figures = (
                f"{knob_text(self.knob, interval.candidate.capacity)} ÷ "
                f"{knob_text(self.knob, interval.reference.capacity)} = "
                f"{interval.ratio:.2f}x, {verdict.value} ({shown}; {both}"
            )
        summary = (
            f"{self.candidate} ÷ {self.reference}, capacity{' in req/s' if rate else ''} "
            f"under {self.slo} ({self.attainment_target:.0%} attainment): {figures}, "
            f"tolerance ±{tolerance:.0%}"
            f"{flags_text(stats.candidate_flags, stats.reference_flags)})"
        )
        return Judged(
            verdict,
            RATE_CAPACITY_RATIO_BENCHMARK if rate else CAPACITY_RATIO_BENCHMARK,
            interval.ratio,
            "x reference",
            candidate.measurement.n,
            stats,
            summary,
            params={
                "reference": self.reference,
                "verdict": str(verdict.value),
                "slo": self.setting["slo"],
            },
        )
