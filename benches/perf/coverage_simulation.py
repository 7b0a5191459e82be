"""Coverage of modelsweep's paired bootstrap interval on simulated paired 0/1 runs.

Each run draws n items from a known paired distribution (reference 45% correct,
candidate 43%, 18% of items discordant, so the true difference is -0.02),
computes the 95% interval of candidate minus reference, and checks whether it
covers -0.02.  Reports coverage (target 94-96%) with its binomial standard
error, how often the interval lies wholly below / above the truth, mean width, and how often the seed's rule says
"worse" (the power to see the true -0.02).

    python benches/perf/coverage_simulation.py [--runs 2000] [--sizes 1319 400]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_modelsweep.stats import Verdict, decide_verdict, paired_bootstrap  # noqa: E402

# both right, reference only, candidate only, both wrong
CELL_PROBABILITIES = [0.35, 0.10, 0.08, 0.47]
TRUE_DIFFERENCE = (0.35 + 0.08) - (0.35 + 0.10)
CONFIDENCE = 0.95
RESAMPLES = 10_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="simulated runs per size and method")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1319, 400], help="items per run")
    parser.add_argument(
        "--methods", nargs="+", default=["percentile", "basic", "bca"], choices=["percentile", "basic", "bca"]
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

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
                candidate = dict(zip(ids, np.isin(cells, (0, 2)).astype(float).tolist(), strict=True))
                reference = dict(zip(ids, np.isin(cells, (0, 1)).astype(float).tolist(), strict=True))
                interval = paired_bootstrap(
                    candidate, reference, resamples=RESAMPLES, confidence=CONFIDENCE, seed=run, method=method
                )
                if interval.high < TRUE_DIFFERENCE:
                    below += 1
                elif interval.low > TRUE_DIFFERENCE:
                    above += 1
                else:
                    covered += 1
                worse += decide_verdict(interval, None) is Verdict.WORSE
                width += interval.width
            seconds = time.perf_counter() - start
            coverage = covered / args.runs
            standard_error = math.sqrt(coverage * (1 - coverage) / args.runs)
            print(
                f"{size:>5} {method:<10} {coverage:>9.2%} {standard_error:>7.2%} {below / args.runs:>9.2%} "
                f"{above / args.runs:>10.2%} {width / args.runs:>11.4f} {worse / args.runs:>11.2%} {seconds:>8.1f}"
            )


if __name__ == "__main__":
    main()
