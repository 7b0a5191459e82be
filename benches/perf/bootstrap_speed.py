"""Time modelsweep's paired bootstrap beside scipy.stats.bootstrap and a plain numpy resample.

Realistic GSM8K-sized paired 0/1 data: n = 1,319 items, reference ~45% and
candidate ~43% correct, ~18% of items discordant.  10,000 resamples, 95%
percentile intervals.  Each method runs --repeats times; the median is reported.

    python benches/perf/bootstrap_speed.py [--repeats 5] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_modelsweep.core.stats.bootstrap import (
    bootstrap_mean_distribution,
    paired_bootstrap,
)

ITEMS = 1_319
RESAMPLES = 10_000
CONFIDENCE = 0.95
TARGET_FRACTION_OF_SCIPY = 0.02
# both right, reference only, candidate only, both wrong
CELL_PROBABILITIES = [0.35, 0.10, 0.08, 0.47]

Interval = tuple[float, float]


def paired_scores(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate and reference 0/1 scores drawn from CELL_PROBABILITIES."""
    cells = np.random.default_rng(seed).choice(4, size=ITEMS, p=CELL_PROBABILITIES)
    return np.isin(cells, (0, 2)).astype(float), np.isin(cells, (0, 1)).astype(float)


def timed(run: Callable[[], Interval], repeats: int) -> tuple[float, Interval]:
    """Median wall time over ``repeats`` runs, and the last interval."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        interval = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per method (median reported)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the data and of every bootstrap"
    )
    args = parser.parse_args()

    candidate, reference = paired_scores(args.seed)
    differences = candidate - reference
    ids = [f"gsm8k-{i:04d}" for i in range(ITEMS)]
    candidate_by_id = dict(zip(ids, candidate.tolist(), strict=True))
    reference_by_id = dict(zip(ids, reference.tolist(), strict=True))
    tail = (1 - CONFIDENCE) / 2

    def ours() -> Interval:
        interval = paired_bootstrap(
            candidate_by_id,
            reference_by_id,
            resamples=RESAMPLES,
            confidence=CONFIDENCE,
            seed=args.seed,
        )
        return interval.low, interval.high

    def ours_chunked_index() -> Interval:
        means = bootstrap_mean_distribution(
            differences, resamples=RESAMPLES, seed=args.seed, exact=False
        )
        low, high = np.quantile(means, [tail, 1 - tail])
        return float(low), float(high)

    def plain_numpy() -> Interval:
        rng = np.random.default_rng(args.seed)
        means = differences[rng.integers(0, ITEMS, size=(RESAMPLES, ITEMS))].mean(axis=1)
        low, high = np.quantile(means, [tail, 1 - tail])
        return float(low), float(high)

    def scipy_bootstrap() -> Interval:
        result = scipy_stats.bootstrap(
            (candidate, reference),
            lambda c, r, axis: np.mean(c - r, axis=axis),
            paired=True,
            vectorized=True,
            method="percentile",
            confidence_level=CONFIDENCE,
            n_resamples=RESAMPLES,
            random_state=args.seed,
        )
        return float(result.confidence_interval.low), float(result.confidence_interval.high)

    methods = {
        "scipy.stats.bootstrap (paired, vectorized)": scipy_bootstrap,
        "plain numpy index resample": plain_numpy,
        "modelsweep chunked index (fallback path)": ours_chunked_index,
        "modelsweep paired_bootstrap (multinomial)": ours,
    }
    results = {name: timed(run, args.repeats) for name, run in methods.items()}
    scipy_seconds = results["scipy.stats.bootstrap (paired, vectorized)"][0]

    print(
        f"n={ITEMS} items, {RESAMPLES} resamples, {CONFIDENCE:.0%} percentile interval, "
        f"median of {args.repeats} runs; candidate {candidate.mean():.4f}, reference {reference.mean():.4f}, "
        f"difference {differences.mean():+.4f}, discordant {int(np.count_nonzero(differences))}"
    )
    header = f"{'method':<44} {'seconds':>10} {'vs scipy':>9} {'low':>9} {'high':>9}"
    print(header)
    print("-" * len(header))
    for name, (seconds, (low, high)) in results.items():
        print(
            f"{name:<44} {seconds:>10.5f} {seconds / scipy_seconds:>8.2%} {low:>+9.4f} {high:>+9.4f}"
        )
    fraction = results["modelsweep paired_bootstrap (multinomial)"][0] / scipy_seconds
    verdict = "met" if fraction <= TARGET_FRACTION_OF_SCIPY else "NOT met"
    print(
        f"target: paired_bootstrap <= {TARGET_FRACTION_OF_SCIPY:.0%} of scipy's time: {verdict} ({fraction:.2%})"
    )


if __name__ == "__main__":
    main()
