"""Coverage of modelsweep's paired bootstrap interval on simulated paired 0/1 runs.

Each run draws n items from a known paired distribution (reference 45% correct,
candidate 43%, 18% of items discordant, so the true difference is -0.02),
computes the 95% interval of candidate minus reference, and checks whether it
covers -0.02.  Reports coverage (target 94-96%) with its binomial standard
error, how often the interval lies wholly below / above the truth, mean width, and how often the seed's rule says
"worse" (the power to see the true -0.02).

    python benches/perf/coverage_simulation.py [--runs 2000] [--sizes 1319 400]

``--small-samples`` asks where that coverage ends: paired 0/1 runs of 10 to 1,319 items
with 1-60% of items discordant and the candidate ahead on 50%, 30% or 15% of them, with
coverage grouped by how many items the run saw scored differently, and by its size. It is
the evidence for ``core.stats.bootstrap.MIN_DISCORDANT`` and ``MIN_PAIRED_ITEMS``: below
either, no verdict and no gate decision is drawn.

    python benches/perf/coverage_simulation.py --small-samples [--runs 300]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_modelsweep.core.stats import Verdict, decide_verdict
from pytest_modelsweep.core.stats.bootstrap import (
    MIN_DISCORDANT,
    MIN_PAIRED_ITEMS,
    paired_bootstrap,
)

# both right, reference only, candidate only, both wrong
CELL_PROBABILITIES = [0.35, 0.10, 0.08, 0.47]
TRUE_DIFFERENCE = (0.35 + 0.08) - (0.35 + 0.10)
CONFIDENCE = 0.95
RESAMPLES = 10_000


SMALL_SIZES = (10, 16, 20, 30, 40, 60, 120, 400, 1319)
DISCORDANT_RATES = (0.01, 0.03, 0.1, 0.2, 0.4, 0.6)
CANDIDATE_AHEAD = (0.5, 0.3, 0.15)  # share of the discordant items the candidate gets right
DISCORDANT_GROUPS = ((0, 0), (1, 4), (5, 9), (10, 14), (15, 19), (20, 29), (30, 49), (50, None))


def _row(label: str, cells: list[list[int]], said: str) -> str:
    shown = [
        f"{covered / total:>8.1%} of {total:>5}" if total else f"{'-':>16}"
        for covered, total in cells
    ]
    return f"{label:>11} " + " ".join(shown) + f"  {said}"


def small_samples(runs: int, seed: int) -> None:
    """Coverage by observed discordant count (runs of at least MIN_PAIRED_ITEMS items) and by
    run size (runs with at least MIN_DISCORDANT discordant items)."""
    rng = np.random.default_rng(seed)
    by_discordant: dict[tuple[float, int], list[int]] = {}  # (ahead, group) -> [covered, runs]
    by_size: dict[tuple[float, int], list[int]] = {}  # (ahead, size) -> [covered, runs]
    start = time.perf_counter()
    for size in SMALL_SIZES:
        ids = [f"item-{i:04d}" for i in range(size)]
        for rate in DISCORDANT_RATES:
            for ahead in CANDIDATE_AHEAD:
                truth = rate * (2 * ahead - 1)
                for run in range(runs):
                    discordant = rng.random(size) < rate
                    candidate_right = rng.random(size) < ahead
                    both = rng.random(size) < 0.5  # concordant items: both right or both wrong
                    candidate = np.where(discordant, candidate_right, both).astype(float)
                    reference = np.where(discordant, ~candidate_right, both).astype(float)
                    count = int(discordant.sum())
                    if size < MIN_PAIRED_ITEMS and count < MIN_DISCORDANT:
                        continue  # in neither table
                    interval = paired_bootstrap(
                        dict(zip(ids, candidate.tolist(), strict=True)),
                        dict(zip(ids, reference.tolist(), strict=True)),
                        resamples=RESAMPLES,
                        confidence=CONFIDENCE,
                        seed=run,
                    )
                    covered = int(interval.low <= truth <= interval.high)
                    if size >= MIN_PAIRED_ITEMS:
                        group = next(
                            i
                            for i, (low, high) in enumerate(DISCORDANT_GROUPS)
                            if low <= count and (high is None or count <= high)
                        )
                        cell = by_discordant.setdefault((ahead, group), [0, 0])
                        cell[0], cell[1] = cell[0] + covered, cell[1] + 1
                    if count >= MIN_DISCORDANT:
                        cell = by_size.setdefault((ahead, size), [0, 0])
                        cell[0], cell[1] = cell[0] + covered, cell[1] + 1
    print(
        f"{CONFIDENCE:.0%} paired bootstrap ({RESAMPLES} resamples); sizes "
        f"{', '.join(map(str, SMALL_SIZES))} items; discordant rates "
        f"{', '.join(f'{r:.0%}' for r in DISCORDANT_RATES)}; {runs} runs per size, rate and "
        f"share ({time.perf_counter() - start:.0f} s)"
    )
    header = f"{'':>11} " + " ".join(f"{f'ahead {a:.0%}':>16}" for a in CANDIDATE_AHEAD)
    print(f"\n(a) runs of {MIN_PAIRED_ITEMS}+ items, by how many items scored differently")
    print(header + "  verdict")
    print("-" * (len(header) + 16))
    for group, (low, high) in enumerate(DISCORDANT_GROUPS):
        label = f"{low}+" if high is None else (f"{low}" if low == high else f"{low}-{high}")
        print(
            _row(
                label,
                [by_discordant.get((a, group), [0, 0]) for a in CANDIDATE_AHEAD],
                "drawn" if low >= MIN_DISCORDANT else "none (too few)",
            )
        )
    print(f"\n(b) runs with {MIN_DISCORDANT}+ items scored differently, by items paired")
    print(header + "  verdict")
    print("-" * (len(header) + 16))
    for size in SMALL_SIZES:
        print(
            _row(
                f"{size} items",
                [by_size.get((a, size), [0, 0]) for a in CANDIDATE_AHEAD],
                "drawn" if size >= MIN_PAIRED_ITEMS else "none (too few)",
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="simulated runs per size and method")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1319, 400], help="items per run")
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["percentile", "basic", "bca"],
        choices=["percentile", "basic", "bca"],
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--small-samples",
        action="store_true",
        help="coverage by observed discordant count, 10 to 1,319 items",
    )
    args = parser.parse_args()
    if args.small_samples:
        small_samples(args.runs if args.runs != 2000 else 300, args.seed)
        return

    print(
        f"true difference {TRUE_DIFFERENCE:+.3f} (reference 0.45, candidate 0.43, 18% discordant); "
        f"{args.runs} runs per row, {CONFIDENCE:.0%} interval, {RESAMPLES} resamples"
    )
    header = (
        f"{'n':>5} {'method':<10} {'coverage':>9} {'± SE':>7} {'all below':>9} {'all above':>10} "
        f"{'mean width':>11} {'says worse':>11} {'seconds':>8}"
    )
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        ids = [f"item-{i:04d}" for i in range(size)]
        for method in args.methods:
            data_rng = np.random.default_rng([args.seed, size])  # same data for every method
            covered = below = above = worse = 0
            width = 0.0
            start = time.perf_counter()
            for run in range(args.runs):
                cells = data_rng.choice(4, size=size, p=CELL_PROBABILITIES)
                candidate = dict(
                    zip(ids, np.isin(cells, (0, 2)).astype(float).tolist(), strict=True)
                )
                reference = dict(
                    zip(ids, np.isin(cells, (0, 1)).astype(float).tolist(), strict=True)
                )
                interval = paired_bootstrap(
                    candidate,
                    reference,
                    resamples=RESAMPLES,
                    confidence=CONFIDENCE,
                    seed=run,
                    method=method,
                )
                if interval.high < TRUE_DIFFERENCE:
                    below += 1
                elif interval.low > TRUE_DIFFERENCE:
                    above += 1
                else:
                    covered += 1
                worse += decide_verdict(interval, None) is Verdict.WORSE
                width += interval.high - interval.low
            seconds = time.perf_counter() - start
            coverage = covered / args.runs
            standard_error = math.sqrt(coverage * (1 - coverage) / args.runs)
            print(
                f"{size:>5} {method:<10} {coverage:>9.2%} {standard_error:>7.2%} {below / args.runs:>9.2%} "
                f"{above / args.runs:>10.2%} {width / args.runs:>11.4f} {worse / args.runs:>11.2%} {seconds:>8.1f}"
            )


if __name__ == "__main__":
    main()
