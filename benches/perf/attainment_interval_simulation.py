"""How often a rate-sweep step decides wrongly: the Clopper-Pearson attainment interval.

Run: ``python benches/perf/attainment_interval_simulation.py [--trials T] [--seed S]``

A step passes when the low end of its 90% interval reaches the target and misses when the
high end lies below it (``pytest_modelsweep.core.stats.attainment``). This calls the real
``attainment_interval`` for every possible count of good requests, then draws windows:

(a) independent requests (each good with probability p): the interval's coverage
    (target ≥ 90%), the false passes when p is below the target and the false misses
    when p reaches it (target ≤ 5% each, at every p);
(b) requests that are alike in runs, as behind a queue: a two-state Markov chain with
    the same share p of good requests and lag-1 correlation rho. The interval assumes
    independence; this shows how much more often it then decides wrongly (shown, not
    claimed: the step decision makes no promise for correlated requests).

numpy and scipy; seeded; exits 1 if a target of (a) is missed.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pytest_modelsweep.core.stats.attainment import StepOutcome, attainment_interval

TARGET = 0.90
SIZES = (30, 60, 120)
SHARES = (0.80, 0.85, 0.88, 0.90, 0.92, 0.95)


def tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For every good count 0..n: low, high, passes, misses."""
    intervals = [attainment_interval(good, n) for good in range(n + 1)]
    low = np.array([i.low for i in intervals])
    high = np.array([i.high for i in intervals])
    passes = np.array([i.decide(TARGET) is StepOutcome.PASS for i in intervals])
    misses = np.array([i.decide(TARGET) is StepOutcome.MISS for i in intervals])
    return low, high, passes, misses


def markov_goods(rng: np.random.Generator, p: float, rho: float, n: int, trials: int) -> np.ndarray:
    """Good counts of ``trials`` windows of ``n`` requests from a stationary two-state chain
    with P(good) = p and lag-1 correlation rho."""
    stay_good = p + rho * (1 - p)
    to_good_from_bad = p * (1 - rho)
    state = rng.random(trials) < p
    total = state.astype(int)
    for _ in range(n - 1):
        u = rng.random(trials)
        state = np.where(state, u < stay_good, u < to_good_from_bad)
        total += state
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=25)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    ok = True
    print(
        f"(a) independent requests, target {TARGET:.0%}, 90% Clopper-Pearson interval, "
        f"{args.trials} windows each"
    )
    print("      n     p  coverage  false pass  false miss  inconclusive")
    for n in SIZES:
        low, high, passes, misses = tables(n)
        for p in SHARES:
            goods = rng.binomial(n, p, args.trials)
            coverage = float(np.mean((low[goods] <= p) & (p <= high[goods])))
            false_pass = float(np.mean(passes[goods])) if p < TARGET else None
            false_miss = float(np.mean(misses[goods])) if p >= TARGET else None
            inconclusive = float(np.mean(~passes[goods] & ~misses[goods]))
            row_ok = (
                coverage >= 0.90 - 0.005
                and (false_pass or 0) <= 0.05 + 0.005
                and (false_miss or 0) <= 0.05 + 0.005
            )
            ok = ok and row_ok
            fp = "-" if false_pass is None else f"{false_pass:.1%}"
            fm = "-" if false_miss is None else f"{false_miss:.1%}"
            print(
                f"  {n:5d}  {p:.2f}  {coverage:8.1%}  {fp:>10}  {fm:>10}  {inconclusive:12.1%}"
                f"  {'ok' if row_ok else 'MISSED'}"
            )
    print(
        "(b) correlated requests (lag-1 correlation rho), n = 60: false verdicts "
        "(shown, not claimed)"
    )
    print("    rho     p  false pass  false miss")
    low, high, passes, misses = tables(60)
    for rho in (0.3, 0.6):
        for p in (0.85, 0.88, 0.90, 0.92):
            goods = markov_goods(rng, p, rho, 60, args.trials)
            fp = f"{np.mean(passes[goods]):.1%}" if p < TARGET else "-"
            fm = f"{np.mean(misses[goods]):.1%}" if p >= TARGET else "-"
            print(f"    {rho:.1f}  {p:.2f}  {fp:>10}  {fm:>10}")
    print(
        f"{'all targets of (a) met' if ok else 'a target of (a) was missed'} "
        f"({time.monotonic() - started:.0f} s)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
