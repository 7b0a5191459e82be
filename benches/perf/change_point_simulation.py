"""False alarms and detection of the change rule of ``modelsweep history``.

Calls the project's real ``pytest_modelsweep.core.stats.changes.change_points`` on simulated
series of runs, each run a throughput figure from lognormal repeats, as history reads them
(the log of each run's mean figure, its repeats' variance as the within-run floor):

(a) the project's CV (that of a run's repeats, ``ThroughputStats.cv``) 10%, 3 repeats a run;
(b) CV 10% of the runs' figures themselves (a run-to-run effect, one figure a run).

For series of 6, 8 and 12 runs: the share of unchanged series in which any change is found
(target <= 5%: the rule is an exact 5% test for normal noise, so its simulated rate is 5%
within its 95% interval at most) and the share of series with a 25% drop after the first half
in which the change is found at that run (target >= 80%). numpy only, seeded; exits 1 if (a)
misses a target.  ``python benches/perf/change_point_simulation.py [--series N]``
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_modelsweep.core.stats.changes import change_points
from pytest_modelsweep.core.stats.intervals import wilson_interval

LENGTHS = (6, 8, 12)
STEP = 0.75
CV = 0.10
REPEATS = 3


def series(
    rng: np.random.Generator, n: int, step_at: int | None, per_repeat: bool
) -> tuple[list[float], list[float] | None]:
    """(log figures, within-run variances) of one series of ``n`` runs."""
    sigma = math.sqrt(math.log1p(CV * CV))
    level = np.log(100.0) + np.where(
        np.arange(n) >= (step_at if step_at is not None else n), math.log(STEP), 0.0
    )
    if per_repeat:
        logs = level[:, np.newaxis] + rng.normal(0.0, sigma, (n, REPEATS))
        figures = np.log(np.exp(logs).mean(axis=1))
        within = logs.var(axis=1, ddof=1) / REPEATS
        return figures.tolist(), within.tolist()
    return (level + rng.normal(0.0, sigma, n)).tolist(), None


def rates(rng: np.random.Generator, n: int, count: int, per_repeat: bool) -> tuple[int, int]:
    """(series with a false alarm, series whose step was found) of ``count`` each."""
    alarms = sum(bool(change_points(*series(rng, n, None, per_repeat))) for _ in range(count))
    step_at = n // 2
    found = sum(
        any(c.index == step_at for c in change_points(*series(rng, n, step_at, per_repeat)))
        for _ in range(count)
    )
    return alarms, found


def shown(count: int, total: int) -> str:
    low, high = wilson_interval(count, total)
    return f"{count / total:6.1%} [{low:5.1%}, {high:5.1%}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--series", type=int, default=2000, help="simulated series per cell (default 2000)"
    )
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    ok = True
    print(
        f"change rule: {args.series} unchanged and {args.series} stepped series per line, "
        f"step {1 - STEP:.0%} drop after run n/2, seed {args.seed}, alpha 0.05"
    )
    for label, per_repeat in (
        (f"(a) CV {CV:.0%} of {REPEATS} repeats a run", True),
        (f"(b) CV {CV:.0%} of the run figures", False),
    ):
        print(label)
        print(
            f"    {'runs':>4}  {'false alarms [95% interval]':<27} "
            f"{'detected [95% interval]':<24} targets <= 5%, >= 80%"
        )
        for n in LENGTHS:
            alarms, found = rates(rng, n, args.series, per_repeat)
            # an exact 5% test: its false alarms are 5% give or take the simulation's error
            met = wilson_interval(alarms, args.series)[0] <= 0.05 and found / args.series >= 0.80
            if per_repeat:
                ok &= met
            print(
                f"    {n:>4}  {shown(alarms, args.series):<27} {shown(found, args.series):<24} "
                f"{'ok' if met else 'MISSED'}"
            )
    print(f"{time.perf_counter() - started:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
