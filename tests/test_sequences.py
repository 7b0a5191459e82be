"""Tests of pytest_modelsweep.core.stats.sequences: the published properties of the betting
confidence sequences (time-uniform coverage, running intersection, shrinking to the data set's
mean without replacement), symmetry, exact answers on degenerate data, the verdict rule, the
order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_modelsweep.core.stats import Verdict
from pytest_modelsweep.core.stats.bootstrap import paired_bootstrap
from pytest_modelsweep.core.stats.sequences import (
    BOUND_TOLERANCE,
    PairedConfidenceSequence,
    StopReason,
    crossing_times,
    paired_sequence,
    seeded_order,
)

# both right, candidate only, reference only, both wrong: the sides agree on 80% of items
EVEN = (0.35, 0.10, 0.10, 0.45)  # no difference
AHEAD = (0.35, 0.15, 0.05, 0.45)  # candidate 10 points ahead


def paired_01(
    rng: np.random.Generator, runs: int, n: int, cells: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Correlated 0/1 scores (runs x n) drawn i.i.d. from the four cells."""
    drawn = rng.choice(4, size=(runs, n), p=cells)
    return np.isin(drawn, (0, 1)).astype(float), np.isin(drawn, (0, 2)).astype(float)


def fed(differences: np.ndarray, population: int | None) -> PairedConfidenceSequence:
    sequence = PairedConfidenceSequence(population)
    sequence.update(differences)
    return sequence


def test_time_uniform_coverage_with_replacement() -> None:
    """P(the true mean is in the sequence at every n) >= 95% under continuous monitoring."""
    rng = np.random.default_rng(11)
    truth = 0.15 - 0.05
    candidate, reference = paired_01(rng, 600, 300, AHEAD)
    below, above = crossing_times(candidate - reference, truth, population=None)
    covered = float(np.mean((below > 300) & (above > 300)))
    assert covered >= 0.95
    # and at 0 it is decided better in most runs, worse in none
    better, worse = crossing_times(candidate - reference, 0.0, population=None)
    assert np.mean(better <= 300) > 0.5 and not np.any(worse <= 300)


def test_time_uniform_coverage_without_replacement() -> None:
    """Random orders of one fixed data set: the data set's mean stays inside at every n."""
    rng = np.random.default_rng(12)
    candidate, reference = paired_01(rng, 1, 400, EVEN)
    data = (candidate - reference)[0]
    orders = np.stack([rng.permutation(data) for _ in range(600)])
    below, above = crossing_times(orders, data.mean(), population=400)
    assert float(np.mean((below > 400) & (above > 400))) >= 0.95


def test_false_verdicts_under_continuous_monitoring_stay_below_alpha() -> None:
    """No difference, a look after every item: better or worse in at most 5% of runs."""
    rng = np.random.default_rng(13)
    candidate, reference = paired_01(rng, 600, 400, EVEN)
    better, worse = crossing_times(candidate - reference, 0.0, population=None)
    assert float(np.mean((better <= 400) | (worse <= 400))) <= 0.05


def test_without_replacement_shrinks_to_the_data_set_mean() -> None:
    rng = np.random.default_rng(14)
    candidate, reference = paired_01(rng, 1, 120, AHEAD)
    d = (candidate - reference)[0]
    sequence = fed(d, 120)
    interval = sequence.interval()
    assert interval.low == pytest.approx(d.mean(), abs=1e-12)
    assert interval.high == pytest.approx(d.mean(), abs=1e-12)
    assert interval.method == "betting-wor" and interval.n == 120


def test_without_replacement_is_tighter_late_in_the_data_set() -> None:
    """With three quarters of the data set seen, the finite-population bets (not only the
    means the data still allow, which span 0.5 here) narrow the interval well below the i.i.d.
    one, about by the finite-population factor sqrt(1 - n/N) = 0.5."""
    rng = np.random.default_rng(20)
    candidate, reference = paired_01(rng, 1, 400, AHEAD)
    d = (candidate - reference)[0, :300]
    wor, iid = fed(d, 400).interval(), fed(d, None).interval()
    width = wor.high - wor.low
    assert width < 0.7 * (iid.high - iid.low) and width < 0.1
    assert iid.low < wor.low < d.mean() < wor.high < iid.high


def test_running_intersection_nests_and_stays_inside_bounds() -> None:
    rng = np.random.default_rng(15)
    candidate, reference = paired_01(rng, 1, 240, AHEAD)
    d = (candidate - reference)[0]
    for population in (None, 240):
        sequence = PairedConfidenceSequence(population)
        previous = (-1.0, 1.0)
        for start in range(0, 240, 40):
            sequence.update(d[start : start + 40])
            interval = sequence.interval()
            assert -1.0 <= interval.low <= interval.high <= 1.0
            assert interval.low >= previous[0] and interval.high <= previous[1]
            previous = (interval.low, interval.high)
        assert previous[1] - previous[0] < 0.2


def test_ends_are_the_edges_of_what_is_ruled_out() -> None:
    rng = np.random.default_rng(16)
    candidate, reference = paired_01(rng, 1, 150, AHEAD)
    d = (candidate - reference)[0]
    interval = fed(d, None).interval()
    below, _ = crossing_times(
        d, [interval.low, interval.low + 2 * BOUND_TOLERANCE], population=None
    )
    _, above = crossing_times(
        d, [interval.high, interval.high - 2 * BOUND_TOLERANCE], population=None
    )
    assert below[0] <= 150 < below[1]
    assert above[0] <= 150 < above[1]
    assert interval.low < d.mean() < interval.high


def test_symmetric_in_the_sides() -> None:
    """Swapping candidate and reference mirrors the interval and swaps better with worse."""
    rng = np.random.default_rng(17)
    candidate, reference = paired_01(rng, 200, 300, AHEAD)
    d = candidate - reference
    for population in (None, 300):
        below, above = crossing_times(d, 0.03, population=population)
        mirrored_below, mirrored_above = crossing_times(-d, -0.03, population=population)
        assert np.array_equal(below, mirrored_above) and np.array_equal(above, mirrored_below)
        one = fed(d[0], population).interval()
        other = fed(-d[0], population).interval()
        assert other.low == pytest.approx(-one.high, abs=2 * BOUND_TOLERANCE)
        assert other.high == pytest.approx(-one.low, abs=2 * BOUND_TOLERANCE)


def test_wider_than_the_fixed_n_bootstrap() -> None:
    """The price of looking at every n: at a fixed n the i.i.d. sequence is wider than the
    fixed-n 95% bootstrap interval, and still contains the running mean."""
    rng = np.random.default_rng(18)
    candidate, reference = paired_01(rng, 1, 400, AHEAD)
    ids = [f"item-{i:03d}" for i in range(400)]
    bootstrap = paired_bootstrap(
        dict(zip(ids, candidate[0].tolist(), strict=True)),
        dict(zip(ids, reference[0].tolist(), strict=True)),
    )
    interval = fed((candidate - reference)[0], None).interval()
    assert interval.low < bootstrap.low < bootstrap.high < interval.high
    assert interval.high - interval.low < 3 * (bootstrap.high - bootstrap.low)


def test_identical_scores() -> None:
    """Both sides alike on every item: never better or worse; the data set's end says matches
    (an exact [0, 0] without replacement) and a margin is reached."""
    same = np.zeros(300)
    wor = fed(same, 300)
    interval = wor.interval()
    assert (interval.low, interval.high) == (0.0, 0.0)
    decision = wor.decide()  # all N items seen: final without being told
    assert decision.verdict is Verdict.MATCHES and decision.reason is StopReason.FINAL
    assert decision.message == (
        "matches, no more items after 300 of 300 items (95% sequence "
        "+0.000 to +0.000, mean difference +0.000)"
    )
    assert wor.decide(margin=0.01).verdict is Verdict.EQUIVALENT
    iid = fed(same, None)
    assert iid.decide().verdict is None
    assert iid.decide(margin=0.05).verdict is Verdict.EQUIVALENT
    assert iid.decide(margin=0.05).reason is StopReason.DECIDED
    assert iid.decide(final=True).verdict is Verdict.MATCHES


def test_candidate_right_on_every_item() -> None:
    sequence = fed(np.ones(10), 10)
    interval = sequence.interval()
    assert (interval.low, interval.high) == (1.0, 1.0)
    assert sequence.decide().verdict is Verdict.BETTER
    # a few items of many: better once the bets have won enough, worse never
    better, worse = crossing_times(np.ones(40), 0.0, population=None)
    assert 1 < better[0] <= 40 and worse[0] == 41
    mirrored = fed(-np.ones(12), None)
    assert mirrored.decide().verdict is Verdict.WORSE


def test_before_any_item() -> None:
    sequence = PairedConfidenceSequence(1319)
    interval = sequence.interval()
    assert (interval.low, interval.high, interval.n) == (-1.0, 1.0, 0)
    assert math.isnan(interval.difference)
    decision = sequence.decide(margin=0.02)
    assert decision.verdict is None
    assert decision.message.startswith("undecided after 0 of 1319 items")
    assert sequence.decide(margin=0.02, final=True).verdict is Verdict.INCONCLUSIVE


def test_streaming_decisions_match_the_vectorised_times() -> None:
    rng = np.random.default_rng(19)
    candidate, reference = paired_01(rng, 1, 200, AHEAD)
    d = (candidate - reference)[0]
    better_at, worse_at = crossing_times(d, 0.0, population=200)
    assert better_at[0] <= 200 and worse_at[0] == 201
    sequence = PairedConfidenceSequence(200)
    for start in range(0, 200, 20):
        sequence.update(d[start : start + 20])
        decision = sequence.decide()
        assert (decision.verdict is Verdict.BETTER) == (better_at[0] <= sequence.n)
        if decision.verdict is not None:
            assert decision.interval.low >= 0.0
            assert decision.message.startswith(f"better, decided after {sequence.n} of 200 items")


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="outside \\[-1, 1\\]"):
        PairedConfidenceSequence(None).update([0.5, 1.5])
    with pytest.raises(ValueError, match="feed each item once"):
        PairedConfidenceSequence(3).update([0.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="population must be"):
        PairedConfidenceSequence(0)
    with pytest.raises(ValueError, match="confidence"):
        PairedConfidenceSequence(None, confidence=1.0)
    with pytest.raises(ValueError, match="margin"):
        PairedConfidenceSequence(None).decide(margin=-0.1)
    with pytest.raises(ValueError, match="not a finite number"):
        crossing_times([0.0, math.nan], 0.0, population=None)


def test_seeded_order_is_one_shuffle_for_every_model() -> None:
    ids = [f"gsm8k-{i:04d}" for i in range(200)]
    order = seeded_order(ids, seed=7)
    assert sorted(order) == sorted(ids) and order != ids
    assert seeded_order(reversed(ids), seed=7) == order
    assert seeded_order(ids, seed=8) != order
    # dropping items keeps the others' relative order (a smaller data set, the same shuffle)
    kept = set(ids[::3])
    assert seeded_order(sorted(kept), seed=7) == [item for item in order if item in kept]
    with pytest.raises(ValueError, match="'gsm8k-0001' appear more than once"):
        seeded_order([*ids, "gsm8k-0001"], seed=7)


def test_paired_sequence_takes_the_prefix_both_sides_scored() -> None:
    order = seeded_order([f"q{i}" for i in range(6)], seed=0)
    candidate = dict.fromkeys(order, 1.0)
    reference = dict.fromkeys(order[:2] + order[3:], 0.0)  # the third item still pending
    sequence = paired_sequence(candidate, reference, order, population=6)
    assert sequence.n == 2 and sequence.difference == 1.0
    reference[order[2]] = 0.5
    assert paired_sequence(candidate, reference, order, population=6).n == 6
    reference[order[4]] = 2.0
    with pytest.raises(ValueError, match=f"reference score of item '{order[4]}' is 2.0"):
        paired_sequence(candidate, reference, order, population=6)
