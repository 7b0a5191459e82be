"""Coverage of the ``--repeats auto`` interval under its own stopping rule.

Simulates a throughput setting's timed windows as log-normal tokens/s (coefficient of
variation 2-30%), and, in a drifting variant, with the machine's speed moving by
``--drift`` (default 1%) per window; the interval claims the geometric mean of the
windows' expected rates (under drift: over the windows the setting took). Two rules,
both aiming at a 95% half-width within ``--target`` (default: ``--repeats-target``'s)
with at most ``--max`` repeats (default: ``--repeats-max``'s):

* **sequential** (the rule before this change): repeat until the t interval of all
  repeats so far (n − 1 df) has a half-width within the target, at least 3; record
  that interval. It stops when the spread happens to look small, so it under-covers.
* **two-stage** (Stein; :class:`pytest_modelsweep.core.stats.repeats.RepeatPolicy`, what
  ``--repeats auto`` does now): the spread s0 of a first stage of 4 repeats fixes the
  total N; the interval is mean ± t(3) · s0 / √N. Exact for log-normal windows.
  ``--first-stage 3`` shows the cost of a smaller first stage.

Vectorised with numpy (``--runs`` per cell, default 20,000); the first ``--check`` runs
of every cell are also run through the package's own ``RepeatPolicy`` (the loop of
``workloads/setting.py``: add a window, stop when ``done``) and must give the same
repeats and interval. Prints the table docs/throughput.md shows; exits 1 when the
two-stage coverage leaves 93-97% in a cell without drift.

    python benches/perf/repeats_coverage_simulation.py [--runs 20000] [--target 0.05] [--max 10]
        [--first-stage 4] [--drift 0.01]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_modelsweep.core.options import AUTO_FIRST_STAGE, DEFAULTS
from pytest_modelsweep.core.stats.intervals import t_half_width
from pytest_modelsweep.core.stats.repeats import RepeatPolicy

CVS = (0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.10, 0.12, 0.15, 0.20, 0.25, 0.30)
SEQUENTIAL_MIN = 3
"""The sequential rule's least repeats (its ``MIN_AUTO_REPEATS``)."""
SCALE = 1000.0
"""Tokens/s of the simulated setting (any positive number: the rules are scale-free)."""


def t975(df: int) -> float:
    return t_half_width(1.0, df)


def windows(rng: np.random.Generator, cv: float, drift: float, runs: int, most: int) -> np.ndarray:
    """Log tokens/s (minus log SCALE) of ``most`` windows per run: normal with the sd that
    gives coefficient of variation ``cv``, plus ``drift`` per window."""
    sigma = math.sqrt(math.log1p(cv * cv))
    return rng.normal(0.0, sigma, (runs, most)) + drift * np.arange(most)


def truth(drift: float, n: np.ndarray) -> np.ndarray:
    """The mean expected log rate over the first ``n`` windows (0 without drift)."""
    return drift * (n - 1) / 2


def sequential(logs: np.ndarray, target: float, drift: float) -> tuple[np.ndarray, np.ndarray]:
    """(repeats taken, covered) per run under the sequential rule."""
    runs, most = logs.shape
    taken = np.full(runs, most)
    covered = np.zeros(runs, dtype=bool)
    open_ = np.ones(runs, dtype=bool)
    for n in range(2, most + 1):
        mean = logs[:, :n].mean(axis=1)
        half = t975(n - 1) * logs[:, :n].std(axis=1, ddof=1) / math.sqrt(n)
        stop = open_ & (((n >= SEQUENTIAL_MIN) & (np.expm1(half) <= target)) | (n == most))
        taken[stop] = n
        covered[stop] = np.abs(mean[stop] - truth(drift, np.full(stop.sum(), n))) <= half[stop]
        open_ &= ~stop
    return taken, covered


def two_stage(
    logs: np.ndarray, target: float, drift: float, n0: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(repeats taken, covered, interval low, high on the log scale) per run, Stein's rule
    with a first stage of ``n0``."""
    runs, most = logs.shape
    s0 = logs[:, :n0].std(axis=1, ddof=1)
    taken = np.full(runs, most)
    for total in reversed(range(n0, most)):
        taken = np.where(np.expm1(t975(n0 - 1) * s0 / math.sqrt(total)) <= target, total, taken)
    mean = np.cumsum(logs, axis=1)[np.arange(runs), taken - 1] / taken
    half = t975(n0 - 1) * s0 / np.sqrt(taken)
    covered = np.abs(mean - truth(drift, taken)) <= half
    return taken, covered, mean - half, mean + half


def check_against_package(
    logs: np.ndarray,
    taken: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    target: float,
    most: int,
    n0: int,
) -> None:
    """The package's RepeatPolicy, run window by window, agrees with the vectorised rule."""
    policy = RepeatPolicy(None, target, most, first_stage=n0)
    for i in range(logs.shape[0]):
        values: list[float] = []
        for window in range(policy.at_most):
            values.append(SCALE * math.exp(logs[i, window]))
            if policy.done(values):
                break
        interval = policy.interval(values)
        assert interval is not None and len(values) == taken[i], (i, len(values), taken[i])
        got = (math.log(interval[0] / SCALE), math.log(interval[1] / SCALE))
        assert math.isclose(got[0], low[i], abs_tol=1e-9), (i, got, low[i])
        assert math.isclose(got[1], high[i], abs_tol=1e-9), (i, got, high[i])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--target", type=float, default=DEFAULTS.repeats_target)
    parser.add_argument("--max", type=int, default=DEFAULTS.repeats_max)
    parser.add_argument("--drift", type=float, default=0.01)
    parser.add_argument(
        "--first-stage",
        type=int,
        default=AUTO_FIRST_STAGE,
        help="the two-stage rule's first stage (default: the package's)",
    )
    parser.add_argument("--check", type=int, default=300)
    parser.add_argument("--seed", type=int, default=20260)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(
        f"--repeats auto, target ±{args.target:.0%}, at most {args.max} repeats, two-stage "
        f"first stage {args.first_stage}; {args.runs} runs per cell; coverage of the 95% "
        "interval (mean repeats)"
    )
    print(f"{'':>6} | {'no drift':^38} | {f'drift {args.drift:.0%} per window':^38}")
    print(
        f"{'CV':>6} | {'sequential':^18} {'two-stage':^19} | {'sequential':^18} {'two-stage':^19}"
    )
    misses: list[str] = []
    for cv in CVS:
        cells: list[str] = []
        for drift in (0.0, args.drift):
            logs = windows(rng, cv, drift, args.runs, args.max)
            old_taken, old_covered = sequential(logs, args.target, drift)
            taken, covered, low, high = two_stage(logs, args.target, drift, args.first_stage)
            check_against_package(
                logs[: args.check], taken, low, high, args.target, args.max, args.first_stage
            )
            cells.append(
                f"{old_covered.mean():6.1%} ({old_taken.mean():4.1f})  "
                f"{covered.mean():6.1%} ({taken.mean():4.1f})"
            )
            if drift == 0.0 and not 0.93 <= covered.mean() <= 0.97:
                misses.append(f"CV {cv:.0%}: two-stage coverage {covered.mean():.1%}")
        print(f"{cv:>6.0%} | {cells[0]:<38} | {cells[1]:<38}")
    print(
        f"({time.perf_counter() - started:.1f} s; the package's RepeatPolicy agreed on the "
        f"first {args.check} runs of every cell)"
    )
    for miss in misses:
        print(f"MISSED 93-97%: {miss}")
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
