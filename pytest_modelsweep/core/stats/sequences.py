"""Anytime-valid paired confidence sequences: verdicts that may stop as soon as they are decided.

A confidence sequence C_1, C_2, ... of the mean paired difference covers the truth at every n at
once (P(truth ∈ C_n for all n) ≥ 1 − α), so it may be looked at after every item and stopped at
any time. Its construction (Waudby-Smith & Ramdas's hedged capital process, with and without
replacement) and guarantee: docs/verdicts.md, "The construction"; the simulation:
``benches/perf/sequential_simulation.py``.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .bootstrap import id_examples
from .intervals import FloatArray
from .verdicts import Verdict, check_confidence, check_margin

IntArray = NDArray[np.int64]

#: Sample sizes the three averaged bets are tuned for (the paper's fixed-sample plug-in bet
#: for h items, averaged over h): sharp after tens, hundreds and about a thousand items.
HORIZONS = (50, 200, 800)
#: c: a bet never stakes more than this share of what the gambler can lose on one item.
TRUNCATION = 0.75
#: Resolution of the interval's ends found by search (difference units).
BOUND_TOLERANCE = 1e-6
_SEARCH_POINTS = 65
_CHUNK_ELEMENTS = 1 << 20  # array elements per chunk of runs in crossing_times
_FEASIBLE_SLACK = 1e-9  # round-off allowed when comparing a mean with the data's bounds


class StopReason(StrEnum):
    """Why a sequential verdict stopped."""

    DECIDED = "decided"  # the sequence excludes 0 (or lies within the margin)
    FINAL = "final"  # no more items will come: end of the data set or of --limit


@dataclass(frozen=True)
class SequenceInterval:
    """Where the confidence sequence stands after ``n`` paired items.

    The sequence's set lies within [``low``, ``high``], each end resolved to
    :data:`BOUND_TOLERANCE` outward; ``low`` > ``high``: the set is empty (every mean ruled
    out: a miss, in at most α of runs). ``population``: as :class:`PairedConfidenceSequence`.
    """

    low: float
    high: float
    difference: float
    n: int
    population: int | None
    confidence: float
    method: str


@dataclass(frozen=True)
class SequentialDecision:
    """A look at the sequence: stop with a verdict, or go on (``verdict`` None).

    ``reason`` is :class:`StopReason` when stopped. ``message`` is one line for a reader, e.g.
    ``better after 240 of 1319 items (95% sequence 0.012 to 0.161)``.
    """

    verdict: Verdict | None
    reason: StopReason | None
    interval: SequenceInterval
    margin: float | None
    message: str


# --------------------------------------------------------------------------- validation


def _check_population(population: int | None) -> int | None:
    if population is None:
        return None
    if (
        isinstance(population, bool)
        or not isinstance(population, (int, np.integer))
        or population < 1
    ):
        raise ValueError(
            f"population must be a whole number of items >= 1 (the data set's "
            f"size) or None, got {population!r}"
        )
    return int(population)


def _check_differences(differences: ArrayLike) -> FloatArray:
    array = np.asarray(differences, dtype=np.float64)
    if array.ndim not in (1, 2):
        raise ValueError(
            f"differences must be one row (items) or a table (runs x items), "
            f"got shape {array.shape}"
        )
    if not np.all(np.isfinite(array)):
        raise ValueError("a paired difference is not a finite number")
    if np.any(np.abs(array) > 1.0):
        raise ValueError("a paired difference lies outside [-1, 1]: scores must lie in [0, 1]")
    return array


# --------------------------------------------------------------------------- the capital


def _bet_sizes(y: FloatArray, log_threshold: float) -> list[FloatArray]:
    """lambda_{i,h} for each horizon h: the bets placed on item i from the items before it."""
    n = y.shape[1]
    count = np.arange(1, n + 1, dtype=np.float64)
    running_mean = (0.5 + np.cumsum(y, axis=1)) / (count + 1.0)
    variance = (0.25 + np.cumsum((y - running_mean) ** 2, axis=1)) / (count + 1.0)
    # the variance known before each item: the prior 0.25 before the first
    previous = np.concatenate((np.full((y.shape[0], 1), 0.25), variance[:, :-1]), axis=1)
    return [np.sqrt(2.0 * log_threshold / (previous * horizon)) for horizon in HORIZONS]


def _log_capitals(
    y: FloatArray, mean: FloatArray, population: int | None, bets: list[FloatArray]
) -> tuple[FloatArray, FloatArray]:
    """Running maxima of log K+ and log K− at the candidate means ``mean`` (y units, one per run)."""
    runs, n = y.shape
    if population is None:
        predicted = np.broadcast_to(mean[:, None], (runs, n))
    else:
        before = np.cumsum(y, axis=1) - y
        remaining = population - np.arange(n, dtype=np.float64)
        predicted = np.clip((population * mean[:, None] - before) / remaining, 0.0, 1.0)
    gap = y - predicted
    with np.errstate(divide="ignore"):
        cap_up = TRUNCATION / predicted
        cap_down = TRUNCATION / (1.0 - predicted)

    def running_max(sign: float, cap: FloatArray) -> FloatArray:
        """The running maximum of the bets' averaged log capital, betting ``sign`` × gap."""
        logs = [np.cumsum(np.log1p(sign * np.minimum(bet, cap) * gap), axis=1) for bet in bets]
        return np.maximum.accumulate(np.logaddexp.reduce(logs) - math.log(len(bets)), axis=1)

    return running_max(1.0, cap_up), running_max(-1.0, cap_down)


def _first_true(flags: NDArray[np.bool_]) -> IntArray:
    """Per row, 1 + the index of the first True (the number of items seen), n + 1 if none."""
    n = flags.shape[1]
    first: IntArray = np.where(flags.any(axis=1), flags.argmax(axis=1) + 1, n + 1).astype(np.int64)
    return first


def crossing_times(
    differences: ArrayLike,
    value: ArrayLike,
    *,
    population: int | None,
    confidence: float = 0.95,
) -> tuple[IntArray, IntArray]:
    """When the sequence first rules out a mean difference, for many runs at once.

    ``differences`` is a table, one row per run, of paired differences in the order the items
    were scored; ``value`` one mean difference per run (or one for all runs; or one row of
    differences tested at many values).
    Returns two arrays of item counts: the first n after which every mean at or below the
    run's value is outside the sequence (*below*: at value 0, the count at which the candidate
    is found better), and the first n after which every mean at or above it is (*above*:
    at 0, worse). A run that never rules it out within its items gets items + 1.
    Without replacement, a mean the data no longer allow counts as ruled out.
    """
    confidence = check_confidence(confidence)
    population = _check_population(population)
    table = np.atleast_2d(_check_differences(differences))
    n = table.shape[1]
    if population is not None and n > population:
        raise ValueError(f"{n} items but the data set has only {population} (population)")
    values = np.atleast_1d(np.asarray(value, dtype=np.float64))
    runs = max(table.shape[0], values.size)
    if values.ndim != 1 or values.size not in (1, runs) or table.shape[0] not in (1, runs):
        raise ValueError(
            f"{table.shape[0]} runs of differences and {values.size} values: give "
            "one value per run, or one for all, or one run for many values"
        )
    table = np.broadcast_to(table, (runs, n))
    values = np.broadcast_to(values, (runs,))
    if not np.all(np.isfinite(values)):
        raise ValueError("a mean difference to test is not a finite number")
    log_threshold = math.log(2.0 / (1.0 - confidence))
    below = np.full(runs, n + 1, dtype=np.int64)
    above = np.full(runs, n + 1, dtype=np.int64)
    if n == 0:
        return below, above
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, runs, rows):
        stop = min(runs, start + rows)
        d = table[start:stop]
        y = (d + 1.0) / 2.0
        mean = (np.clip(values[start:stop], -1.0, 1.0) + 1.0) / 2.0
        up, down = _log_capitals(y, mean, population, _bet_sizes(y, log_threshold))
        # a mean outside [-1, 1] is impossible whatever the data
        out_below = (up >= log_threshold) | (values[start:stop] < -1.0)[:, None]
        out_above = (down >= log_threshold) | (values[start:stop] > 1.0)[:, None]
        if population is not None:
            total = np.cumsum(d, axis=1)
            left = population - np.arange(1, n + 1, dtype=np.float64)
            out_below |= values[start:stop, None] < (total - left) / population - _FEASIBLE_SLACK
            out_above |= values[start:stop, None] > (total + left) / population + _FEASIBLE_SLACK
        below[start:stop] = _first_true(out_below)
        above[start:stop] = _first_true(out_above)
    return below, above


# --------------------------------------------------------------------------- streaming


class PairedConfidenceSequence:
    """The confidence sequence of one comparison, fed paired differences as items arrive.

    ``population``: the data set's size N (without replacement), None for the i.i.d. form.
    :meth:`interval` and :meth:`decide` recompute from the kept history (O(n) per look), so a
    re-run that feeds the same items in the same order gets the same answers.
    """

    def __init__(self, population: int | None, *, confidence: float = 0.95) -> None:
        self.population = _check_population(population)
        self.confidence = check_confidence(confidence)
        self._differences: list[float] = []

    @property
    def n(self) -> int:
        """Paired items seen."""
        return len(self._differences)

    @property
    def difference(self) -> float:
        """Mean of the differences seen (NaN before the first)."""
        return math.fsum(self._differences) / self.n if self._differences else math.nan

    @property
    def method(self) -> str:
        """``"betting-wor"`` (without replacement) or ``"betting-iid"``."""
        return "betting-iid" if self.population is None else "betting-wor"

    def update(self, differences: ArrayLike) -> None:
        """Append paired differences (candidate − reference, each in [−1, 1]) in scoring order."""
        added = _check_differences(np.atleast_1d(np.asarray(differences, dtype=np.float64)))
        if added.ndim != 1:
            raise ValueError(f"update takes one row of differences, got shape {added.shape}")
        if self.population is not None and self.n + added.size > self.population:
            raise ValueError(
                f"{self.n + added.size} items but the data set has only "
                f"{self.population} (population): feed each item once"
            )
        self._differences.extend(added.tolist())

    def _rules_out(self, values: FloatArray) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """For each value: whether every mean at or below it / at or above it is ruled out."""
        if not self._differences:
            return values < -1.0, values > 1.0
        below, above = crossing_times(
            np.asarray(self._differences),
            values,
            population=self.population,
            confidence=self.confidence,
        )
        return below <= self.n, above <= self.n

    def rules_out(self, value: float) -> tuple[bool, bool]:
        """(every mean difference at or below ``value`` is outside the sequence, every one at
        or above it is): at 0, (better, worse) as :meth:`decide` reads them."""
        below, above = self._rules_out(np.array([float(value)]))
        return bool(below[0]), bool(above[0])

    def _end(self, side: int) -> float:
        """The lower (side 0) or upper (side 1) end: search for the edge of the ruled-out ray."""
        ends = (-1.0, 1.0)
        ruled = self._rules_out(np.array(ends))[side]
        if ruled[1 - side]:
            return ends[1 - side]  # everything ruled out from this side: an empty set
        if not ruled[side]:
            return ends[side]
        low, high = ends
        while high - low > BOUND_TOLERANCE:
            points = np.linspace(low, high, _SEARCH_POINTS)
            # side 0: ruled out True then False along points; side 1: False then True
            out = np.flatnonzero(self._rules_out(points)[side])
            edge = int(out[-1]) + 1 if side == 0 else int(out[0])
            low, high = float(points[edge - 1]), float(points[edge])
        return (low, high)[side]

    def interval(self) -> SequenceInterval:
        """The sequence's current interval (running intersection, without replacement also the
        means the data still allow)."""
        low, high = self._end(0), self._end(1)
        if self.population is not None and self._differences:
            total = math.fsum(self._differences)
            left = self.population - self.n
            low = max(low, (total - left) / self.population)
            high = min(high, (total + left) / self.population)
        return SequenceInterval(
            low=low,
            high=high,
            difference=self.difference,
            n=self.n,
            population=self.population,
            confidence=self.confidence,
            method=self.method,
        )

    def decide(self, margin: float | None = None, *, final: bool = False) -> SequentialDecision:
        """Stop with a verdict, or go on.

        Every mean at or below 0 ruled out: *better*; at or above 0: *worse*; with a margin,
        everything below −margin and above +margin ruled out: *equivalent* (better and worse
        first, as :func:`~pytest_modelsweep.core.stats.verdicts.decide_verdict` does). Otherwise the
        comparison goes on (verdict None) unless ``final`` (no more items: the data set's end
        or the limit; without replacement, all N items seen counts as final), when it ends
        *matches* without a margin (the last interval covers 0, as the fixed-n rule says) and
        *inconclusive* with one. Both 0 ruled out from both sides means the set is empty (a
        miss, at most α of runs): *inconclusive*.
        """
        margin = check_margin(margin)
        final = final or (self.population is not None and self.n == self.population)
        points = np.array([0.0] if margin is None else [0.0, -margin, margin])
        below, above = self._rules_out(points)
        interval = self.interval()
        rules = (
            (Verdict.INCONCLUSIVE, below[0] and above[0]),
            (Verdict.BETTER, below[0]),
            (Verdict.WORSE, above[0]),
            (Verdict.EQUIVALENT, margin is not None and below[1] and above[2]),
        )
        verdict = next((verdict for verdict, ruled in rules if ruled), None)
        reason = StopReason.DECIDED if verdict is not None else None
        if verdict is None and final:
            verdict = Verdict.MATCHES if margin is None else Verdict.INCONCLUSIVE
            reason = StopReason.FINAL
        return SequentialDecision(
            verdict=verdict,
            reason=reason,
            interval=interval,
            margin=margin,
            message=_message(verdict, reason, interval),
        )


def _message(verdict: Verdict | None, reason: StopReason | None, interval: SequenceInterval) -> str:
    of = f" of {interval.population}" if interval.population is not None else ""
    bounds = (
        f"{interval.confidence:.0%} sequence {interval.low:+.3f} to {interval.high:+.3f}, "
        f"mean difference {interval.difference:+.3f}"
    )
    if verdict is None:
        return f"undecided after {interval.n}{of} items ({bounds}): go on"
    if verdict is Verdict.INCONCLUSIVE and reason is StopReason.DECIDED:
        return f"inconclusive after {interval.n}{of} items: the sequence is empty ({bounds})"
    when = "decided" if reason is StopReason.DECIDED else "no more items"
    return f"{verdict.value}, {when} after {interval.n}{of} items ({bounds})"


# --------------------------------------------------------------------------- items and order


def seeded_order(item_ids: Iterable[str], seed: int) -> list[str]:
    """The order items are sent in for a sequential comparison: the same for every model.

    Each id's place comes from a BLAKE2b hash of the seed and the id alone, so the order does
    not depend on the listing, the platform or the other ids present (``--limit``'s items go
    out in the same relative order as in a longer run). Duplicate ids raise ``ValueError``.
    """
    ids = list(item_ids)
    twice = sorted(item for item, count in Counter(ids).items() if count > 1)
    if twice:
        raise ValueError(f"item ids must be unique: {id_examples(twice)} appear more than once")
    prefix = f"{int(seed)}\0".encode()

    def key(item: str) -> tuple[bytes, str]:
        return hashlib.blake2b(prefix + item.encode(), digest_size=16).digest(), item

    return sorted(ids, key=key)


def paired_sequence(
    candidate: Mapping[str, float],
    reference: Mapping[str, float],
    order: Sequence[str],
    *,
    population: int | None,
    confidence: float = 0.95,
) -> PairedConfidenceSequence:
    """The sequence over the longest prefix of ``order`` that both sides have scored.

    An item one side has not scored yet ends the prefix: the guarantee needs the items in the
    seeded order. Scores must lie in [0, 1] (ValueError naming the item otherwise).
    """
    sequence = PairedConfidenceSequence(population, confidence=confidence)
    differences: list[float] = []
    for item in order:
        if item not in candidate or item not in reference:
            break
        pair = float(candidate[item]), float(reference[item])
        for side, score in zip(("candidate", "reference"), pair, strict=True):
            if not (math.isfinite(score) and 0.0 <= score <= 1.0):
                raise ValueError(
                    f"{side} score of item {item!r} is {score!r}: a sequential "
                    "verdict needs scores in [0, 1]"
                )
        differences.append(pair[0] - pair[1])
    sequence.update(differences)
    return sequence
