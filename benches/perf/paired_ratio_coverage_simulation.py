"""Coverage of the interleaved throughput ratio's interval (``--interleave``), with and
without a drift in the machine's speed.

``--interleave`` measures the two models in pairs of windows whose order flips every pair
(reference, candidate; candidate, reference; ...) and reads the ratio's 95% interval from the
pairs' log ratios (``stats.intervals.paired_ratio_interval``, method ``paired-log-t``, n − 1
df). Back to back, all the reference's windows come first (``ratio_interval``, Welch on the
log scale). This draws each window's tokens/s as log-normal (coefficient of variation
``cv``) around its model's rate times the machine's speed at that window's place in the run:

* ``none``: a steady machine;
* ``linear``: the speed falls by 1% a window (a throttling CPU);
* ``walk``: the speed takes a random step of sd 3% each window (a busy neighbour);
* ``step``: the speed drops by 30% half way through the run (a neighbour starts).

Every interval comes from the package's own functions; the true ratio is 0.8. Coverage of
the interleaved interval is claimed: 93–97% in every steady cell, at least 93% in every
drifting one (exit status 1 otherwise). The back-to-back interval's coverage under drift is
shown, not claimed: it is why ``--interleave`` exists.

    python benches/perf/paired_ratio_coverage_simulation.py [--runs 4000] [--seed 7]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_modelsweep.core.stats.intervals import paired_ratio_interval, ratio_interval

TRUE_RATIO = 0.8
"""Candidate ÷ reference tokens/s."""
REFERENCE_RATE = 1000.0
PAIRS = (3, 5, 10)
CVS = (0.02, 0.10, 0.30)
DRIFTS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "none": lambda rng, k: np.zeros(k),
    "linear": lambda rng, k: -0.01 * np.arange(k),
    "walk": lambda rng, k: np.cumsum(rng.normal(0.0, 0.03, k)),
    "step": lambda rng, k: np.where(np.arange(k) >= k // 2, math.log(0.7), 0.0),
}
"""The log of the machine's speed at each of a run's ``k`` windows, in the order measured."""


def one_run(rng: np.random.Generator, pairs: int, cv: float, drift: str) -> tuple[bool, bool]:
    """(interleaved covers, back to back covers) the true ratio in one simulated run."""
    sigma = math.sqrt(math.log1p(cv * cv))
    log_rates = {
        "reference": math.log(REFERENCE_RATE),
        "candidate": math.log(REFERENCE_RATE * TRUE_RATIO),
    }

    def window(model: str, speed: float) -> float:
        return math.exp(log_rates[model] + speed + rng.normal(0.0, sigma))

    speed = DRIFTS[drift](rng, 2 * pairs)
    interleaved: dict[str, list[float]] = {"reference": [], "candidate": []}
    for pair in range(pairs):
        order = ("reference", "candidate") if pair % 2 == 0 else ("candidate", "reference")
        for place, model in enumerate(order):
            interleaved[model].append(window(model, float(speed[2 * pair + place])))
    paired = paired_ratio_interval(interleaved["candidate"], interleaved["reference"])
    back = {
        "reference": [window("reference", float(speed[i])) for i in range(pairs)],
        "candidate": [window("candidate", float(speed[pairs + i])) for i in range(pairs)],
    }
    welch = ratio_interval(back["candidate"], back["reference"])
    return (paired.low <= TRUE_RATIO <= paired.high, welch.low <= TRUE_RATIO <= welch.high)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000, help="runs per cell (default 4000)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(
        f"coverage of the 95% interval of candidate ÷ reference (true {TRUE_RATIO}), "
        f"{args.runs} runs per cell"
    )
    print(f"{'drift':7s} {'pairs':>5s} {'cv':>5s}  {'interleaved':>11s}  {'back to back':>12s}")
    missed = []
    for drift in DRIFTS:
        for pairs in PAIRS:
            for cv in CVS:
                hits = np.array([one_run(rng, pairs, cv, drift) for _ in range(args.runs)])
                paired, back = hits.mean(axis=0)
                low, high = (0.93, 0.97) if drift == "none" else (0.93, 1.0)
                ok = low <= paired <= high
                if not ok:
                    missed.append(f"{drift} n={pairs} cv={cv:.0%}: {paired:.1%}")
                print(
                    f"{drift:7s} {pairs:5d} {cv:5.0%}  {paired:10.1%}{' ' if ok else '!'}  "
                    f"{back:12.1%}"
                )
    print(
        f"({time.perf_counter() - started:.1f} s) claimed: interleaved 93-97% steady, "
        f">= 93% drifting: {'met' if not missed else 'MISSED in ' + '; '.join(missed)}"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
