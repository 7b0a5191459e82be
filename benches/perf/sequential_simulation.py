"""Stopping when decided: false verdicts, coverage and items used by the paired confidence sequences.

Simulated paired runs of a candidate against a reference, item by item, in a random order: 0/1
scores or partial credit (quarters), reference accuracy 5%, 30% or 60% and the candidate 0, 5,
10 or 20 points ahead (accuracies 5-80%), data sets of 1,319 and 400 items. The two sides are
correlated as models are on a benchmark (they agree on most items: an item has a difficulty
both feel, with latent correlation 0.9), and each run draws its own data set of i.i.d. items.

For each cell (``--runs`` runs, default 2,000) it reports:

* ``pytest_modelsweep.core.stats.sequences`` with replacement (i.i.d.; target: the population
  difference, as for the bootstrap) and without replacement (WoR; target: the run's own data
  set's mean difference), stopping at the first look where the sequence excludes 0:
  how often it says better/worse, how often that is false (better when the target is <= 0,
  worse when it is >= 0) under monitoring after every item, coverage of the target at the
  stopping time (every-item looks) and over all n at once, and the mean items used with a look
  every ``--look`` items (a run that never decides uses the whole data set);
* the fixed-n paired bootstrap at the full data set (``core.stats.bootstrap.paired_bootstrap`` and
  ``decide_verdict``; ``--bootstrap-runs`` runs per cell, ``--resamples`` resamples);
* the items a fixed-n test needs for 80% power at the cell's difference,
  (z_0.975 + z_0.8)² · var(d) / difference², as a share of the data set;
* the naive rule: peek at the fixed-n 95% interval every ``--look`` items (from 30 items with 10
  scored differently, as ``decide_verdict`` asks) and stop when it excludes 0. For speed the
  peek uses the normal interval mean ± 1.96·sd/sqrt(n), the large-sample form of the percentile
  bootstrap; the last line checks it against the bootstrap's verdicts at the full data set.

A second table runs the WoR sequence on data sets whose mean difference is exactly 0 (each
item drawn is also present with the sides swapped), its own "no true difference".

    python benches/perf/sequential_simulation.py            # the table in docs/verdicts.md
    python benches/perf/sequential_simulation.py --quick    # 200 runs, fewer cells (under a minute)
    python benches/perf/sequential_simulation.py --full     # 10,000 runs per cell
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr, ndtri

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_modelsweep.core.stats import Verdict, decide_verdict
from pytest_modelsweep.core.stats.bootstrap import (
    MIN_DISCORDANT,
    MIN_PAIRED_ITEMS,
    paired_bootstrap,
)
from pytest_modelsweep.core.stats.sequences import crossing_times

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

CONFIDENCE = 0.95
LATENT_SCALE = 2.0  # spread of item difficulty (probit scale): items mostly easy or hard
LATENT_CORRELATION = 0.9  # how alike the two models find an item
REFERENCE_ACCURACIES = (0.05, 0.30, 0.60)
DIFFERENCES = (0.0, 0.05, 0.10, 0.20)
SIZES = (1319, 400)
KINDS = {"0/1": 1, "partial": 4}  # credit in steps of 1/k


@dataclass(frozen=True)
class Cell:
    kind: str
    size: int
    reference: float
    difference: float

    @property
    def candidate(self) -> float:
        return self.reference + self.difference


def draw_scores(
    rng: np.random.Generator, runs: int, size: int, reference: float, candidate: float, steps: int
) -> tuple[FloatArray, FloatArray]:
    """Candidate and reference scores (runs x size): item difficulty z (correlated between the
    sides), chance of each check q = Phi(a + s·z), score = Binomial(steps, q)/steps, with a
    chosen so that the mean score is the accuracy: E Phi(a + s·z) = Phi(a / sqrt(1 + s²))."""
    stretch = math.sqrt(1.0 + LATENT_SCALE**2)
    shared = rng.standard_normal((runs, size))
    own = rng.standard_normal((runs, size))
    z_reference = shared
    z_candidate = LATENT_CORRELATION * shared + math.sqrt(1 - LATENT_CORRELATION**2) * own
    q_reference = ndtr(float(ndtri(reference)) * stretch + LATENT_SCALE * z_reference)
    q_candidate = ndtr(float(ndtri(candidate)) * stretch + LATENT_SCALE * z_candidate)
    return (rng.binomial(steps, q_candidate) / steps, rng.binomial(steps, q_reference) / steps)


def mirrored_differences(
    rng: np.random.Generator, runs: int, size: int, accuracy: float, steps: int
) -> FloatArray:
    """Data sets whose mean difference is exactly 0: size // 2 items drawn, each also present
    with the sides swapped (and one tie when size is odd), in a random order."""
    half = size // 2
    candidate, reference = draw_scores(rng, runs, half, accuracy, accuracy, steps)
    d = candidate - reference
    table = np.concatenate([d, -d, np.zeros((runs, size - 2 * half))], axis=1)
    return rng.permuted(table, axis=1)


@dataclass
class SequenceOutcome:
    """One sequence form over the runs of a cell."""

    says: float  # share of runs ending better or worse (every-item looks)
    false: float  # share ending with a verdict that contradicts the target
    cover_at_stop: float
    cover_always: float
    items_look: float  # mean items used with a look every --look items, share of the data set


def judge_sequence(
    d: FloatArray, truth: FloatArray, population: int | None, look: int
) -> SequenceOutcome:
    """Stop at the first look where the sequence excludes 0; score it against ``truth``."""
    size = d.shape[1]
    better_at, worse_at = crossing_times(d, 0.0, population=population, confidence=CONFIDENCE)
    low_out, high_out = crossing_times(d, truth, population=population, confidence=CONFIDENCE)
    missed_at = np.minimum(low_out, high_out)
    decided_at = np.minimum(better_at, worse_at)  # size + 1 when never

    def stop(every: int) -> IntArray:
        looked = np.minimum(-(-decided_at // every) * every, size)
        return np.where(decided_at <= size, looked, size)

    stop_every = stop(1)
    better = better_at <= stop_every
    worse = worse_at <= stop_every
    verdict = better ^ worse  # both at once: the set is empty, inconclusive
    false = (better & ~worse & (truth <= 0)) | (worse & ~better & (truth >= 0))
    return SequenceOutcome(
        says=float(verdict.mean()),
        false=float(false.mean()),
        cover_at_stop=float((missed_at > stop_every).mean()),
        cover_always=float((missed_at > size).mean()),
        items_look=float(stop(look).mean()) / size,
    )


def peek_normal(d: FloatArray, look: int) -> tuple[FloatArray, FloatArray]:
    """The naive rule: every ``look`` items (from MIN_PAIRED_ITEMS with MIN_DISCORDANT scored
    differently) the fixed-n 95% interval; stop when it excludes 0. Returns per run the
    verdict sign (+1, -1, 0) and the items used."""
    runs, size = d.shape
    looks = np.arange(look, size + look, look)
    looks[-1] = min(looks[-1], size)
    looks = np.unique(np.minimum(looks, size))
    total = np.cumsum(d, axis=1)[:, looks - 1]
    squares = np.cumsum(d * d, axis=1)[:, looks - 1]
    discordant = np.cumsum(d != 0, axis=1)[:, looks - 1]
    mean = total / looks
    spread = np.sqrt(np.maximum(squares / looks - mean**2, 0.0) / looks)
    z = ndtri(0.5 + CONFIDENCE / 2)
    eligible = (looks >= MIN_PAIRED_ITEMS) & (discordant >= MIN_DISCORDANT)
    excluded = eligible & (np.abs(mean) > z * spread)
    first = np.where(excluded.any(axis=1), excluded.argmax(axis=1), looks.size - 1)
    rows = np.arange(runs)
    sign = np.where(excluded[rows, first], np.sign(mean[rows, first]), 0.0)
    return sign, looks[first].astype(np.float64)


@dataclass
class BootstrapOutcome:
    says: float
    false: float
    coverage: float
    normal_agrees: float  # the normal interval's verdict equals the bootstrap's at full n


def judge_bootstrap(
    candidate: FloatArray, reference: FloatArray, truth: float, resamples: int
) -> BootstrapOutcome:
    runs, size = candidate.shape
    ids = [f"item-{i:04d}" for i in range(size)]
    says = false = covered = agrees = 0
    z = ndtri(0.5 + CONFIDENCE / 2)
    for run in range(runs):
        interval = paired_bootstrap(
            dict(zip(ids, candidate[run].tolist(), strict=True)),
            dict(zip(ids, reference[run].tolist(), strict=True)),
            resamples=resamples,
            confidence=CONFIDENCE,
            seed=run,
        )
        verdict = decide_verdict(interval)
        said = verdict in (Verdict.BETTER, Verdict.WORSE)
        says += said
        false += (verdict is Verdict.BETTER and truth <= 0) or (
            verdict is Verdict.WORSE and truth >= 0
        )
        covered += interval.low <= truth <= interval.high
        d = candidate[run] - reference[run]
        normal_sign = (
            0
            if interval.too_few_items
            else int(np.sign(d.mean()) * (abs(d.mean()) > z * d.std() / math.sqrt(size)))
        )
        bootstrap_sign = {Verdict.BETTER: 1, Verdict.WORSE: -1}.get(verdict, 0)
        agrees += normal_sign == bootstrap_sign
    return BootstrapOutcome(says / runs, false / runs, covered / runs, agrees / runs)


def percent(value: float) -> str:
    return f"{100 * value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="runs per cell (default 2,000)")
    parser.add_argument(
        "--bootstrap-runs",
        type=int,
        default=None,
        help="runs per cell for the fixed-n bootstrap (default 500)",
    )
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--look", type=int, default=20, help="items per round between looks")
    parser.add_argument("--seed", type=int, default=0)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        action="store_true",
        help="200 runs (100 bootstrap), differences 0 and 10 points only",
    )
    mode.add_argument("--full", action="store_true", help="10,000 runs (2,000 bootstrap)")
    args = parser.parse_args()
    runs = args.runs or (200 if args.quick else 10_000 if args.full else 2000)
    bootstrap_runs = min(
        runs, args.bootstrap_runs or (100 if args.quick else 2000 if args.full else 500)
    )
    differences = (0.0, 0.10) if args.quick else DIFFERENCES
    cells = [
        Cell(kind, size, reference, difference)
        for kind in KINDS
        for size in SIZES
        for reference in REFERENCE_ACCURACIES
        for difference in differences
    ]
    started = time.perf_counter()
    print(
        f"{runs} runs per cell ({bootstrap_runs} for the fixed-n bootstrap, {args.resamples} "
        f"resamples), {CONFIDENCE:.0%}, a look every {args.look} items; percent of runs\n"
    )
    sequences_table = [
        (
            "| scores | items | accuracy | differ | i.i.d. says | false | cover at stop | "
            "cover all n | items used | WoR says | false | cover at stop | cover all n | items used |"
        ),
        "| --- | ---: | --- |" + " ---: |" * 11,
    ]
    fixed_table = [
        (
            "| scores | items | accuracy | bootstrap says | false | cover | peek says | false | "
            "items used | fixed n for 80% power |"
        ),
        "| --- | ---: | --- |" + " ---: |" * 7,
    ]
    worst = {"false": 0.0, "cover": 1.0}
    agreement: list[float] = []
    used_at_ten: list[tuple[Cell, float, float]] = []
    for index, cell in enumerate(cells):
        rng = np.random.default_rng([args.seed, index])
        candidate, reference = draw_scores(
            rng, runs, cell.size, cell.reference, cell.candidate, KINDS[cell.kind]
        )
        d = candidate - reference
        iid = judge_sequence(d, np.full(runs, cell.difference), None, args.look)
        wor = judge_sequence(d, d.mean(axis=1), cell.size, args.look)
        boot = judge_bootstrap(
            candidate[:bootstrap_runs], reference[:bootstrap_runs], cell.difference, args.resamples
        )
        agreement.append(boot.normal_agrees)
        sign, peek_items = peek_normal(d, args.look)
        peek_false = ((sign > 0) & (cell.difference <= 0)) | ((sign < 0) & (cell.difference >= 0))
        worst["false"] = max(worst["false"], iid.false, wor.false)
        worst["cover"] = min(worst["cover"], iid.cover_at_stop, wor.cover_at_stop)
        if cell.difference == 0.10:
            used_at_ten.append((cell, iid.items_look, wor.items_look))
        power_items = (
            "-"
            if cell.difference == 0
            else percent(
                min(
                    1.0,
                    (
                        (ndtri(0.5 + CONFIDENCE / 2) + ndtri(0.8)) ** 2
                        * float(d.var())
                        / cell.difference**2
                    )
                    / cell.size,
                )
            )
        )
        label = f"| {cell.kind} | {cell.size} | {cell.reference:.0%} → {cell.candidate:.0%} |"
        sequences_table.append(
            f"{label} {percent(float((d != 0).mean()))} | "
            + " | ".join(
                percent(value)
                for outcome in (iid, wor)
                for value in (
                    outcome.says,
                    outcome.false,
                    outcome.cover_at_stop,
                    outcome.cover_always,
                    outcome.items_look,
                )
            )
            + " |"
        )
        fixed_table.append(
            f"{label} {percent(boot.says)} | {percent(boot.false)} | {percent(boot.coverage)} | "
            f"{percent(float((sign != 0).mean()))} | {percent(float(peek_false.mean()))} | "
            f"{percent(float(peek_items.mean()) / cell.size)} | {power_items} |"
        )
        print(f"cell {index + 1}/{len(cells)} done", file=sys.stderr, flush=True)
    print("Confidence sequences, stopped at the first look that decides\n")
    print("\n".join(sequences_table))
    print(
        f"\nFixed-n rules beside them: the bootstrap at the full data set, and peeking at a "
        f"fixed-n interval every {args.look} items\n"
    )
    print("\n".join(fixed_table))

    print("\nWoR sequence on data sets whose mean difference is exactly 0\n")
    print("| scores | items | accuracy | says (false) | cover at stop | cover all n | items used |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for index, (kind, size, accuracy) in enumerate(
        (kind, size, accuracy)
        for kind in KINDS
        for size in SIZES
        for accuracy in REFERENCE_ACCURACIES
    ):
        rng = np.random.default_rng([args.seed, 1000 + index])
        d = mirrored_differences(rng, runs, size, accuracy, KINDS[kind])
        wor = judge_sequence(d, np.zeros(runs), size, args.look)
        worst["false"] = max(worst["false"], wor.false)
        worst["cover"] = min(worst["cover"], wor.cover_at_stop)
        print(
            f"| {kind} | {size} | {accuracy:.0%} | {percent(wor.false)} | "
            f"{percent(wor.cover_at_stop)} | {percent(wor.cover_always)} | "
            f"{percent(wor.items_look)} |",
            flush=True,
        )

    print(
        f"\nlargest false better/worse rate of a sequence: {percent(worst['false'])}% "
        f"(target at most {percent(1 - CONFIDENCE)}%)"
    )
    print(
        f"smallest coverage at the stopping time: {percent(worst['cover'])}% "
        f"(target at least {percent(CONFIDENCE)}%)"
    )
    for cell, iid_used, wor_used in used_at_ten:
        print(
            f"10 points ahead, {cell.kind}, {cell.size} items, {cell.reference:.0%} → "
            f"{cell.candidate:.0%}: items used {percent(iid_used)}% (i.i.d.), "
            f"{percent(wor_used)}% (WoR) of the data set (target at most 30%)"
        )
    print(
        f"normal interval and paired bootstrap agree on the full-data verdict in "
        f"{percent(min(agreement))}-{percent(max(agreement))}% of runs per cell"
    )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
