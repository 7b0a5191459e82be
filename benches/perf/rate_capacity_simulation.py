"""How often the rate sweep's bracket misses the crossing, and the A/A error of its ratio.

Run: ``python benches/perf/rate_capacity_simulation.py [--sweeps N] [--seed S]``

Each simulated server has an SLO attainment curve that falls with the rate,
p(r) = target ** ((r / r*) ** steepness): at its crossing r* exactly the target, above it
less, and it falls behind the offered rate (a *saturated* window) above ``saturation`` × r*.
A step's window draws its good requests as independent Bernoulli(p(r)) and the real
``find_capacity`` over the rate knob decides it (``RATE_POLICY``: Clopper-Pearson, 90%
two-sided, from its first window; a boundary step still undecided takes more windows,
pooled, up to 4), growing from ``--rate-sweep``'s start by doubling to its maximum, then
bisecting to 10%. The crossing r* is drawn log-uniformly over a factor of 8 so that it does
not sit on the sweep's grid.

(a) coverage: the share of sweeps whose bracket [last pass, first fail] holds r*
    (target ≥ 90%: both ends are steps decided at 95% one-sided confidence a look);
(b) A/A: two sweeps of the same server, compared as ``test_rate_capacity_ratio`` compares
    them (:func:`capacity_ratio`, :func:`decide_capacity_verdict` at ±10%): the
    share of *worse* or *better* verdicts (target ≤ 10%: the ratio's interval holds the true
    ratio 1 whenever both brackets hold r*, so at most the two sweeps' misses);
(c) power, shown: the share of *better* verdicts for a candidate whose crossing is 1.5× and
    2× the reference's.

Requests in a window are independent here; a queue makes neighbours alike, which
``attainment_interval_simulation.py`` shows costs the step decisions more errors.
numpy and scipy; seeded; exits 1 if a target of (a) or (b) is missed.
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from pytest_modelsweep.core.measurements import RATE, SearchBracket
from pytest_modelsweep.core.slo import Goodput
from pytest_modelsweep.core.stats import Verdict, attainment
from pytest_modelsweep.workloads import slo_search

TARGET = 0.90
START_RPS, MAX_RPS = 0.25, 64.0
CASES = [(29, 3.0, 1.3), (29, 6.0, 1.3), (60, 3.0, 1.3), (60, 6.0, 1.6), (120, 6.0, 1.3)]
"""(requests per step, steepness of the attainment curve, saturation at × the crossing)."""


@dataclass(frozen=True)
class Window:
    """What the sweep reads of a simulated window."""

    output_tokens_per_s: float
    saturated: bool
    violations: tuple[str, ...] = ()

    @property
    def offered_rps(self) -> float | None:
        return None

    @property
    def achieved_rps(self) -> float | None:
        return None

    @property
    def saturation_reason(self) -> str | None:
        return "saturated (simulated)" if self.saturated else None


def sweep(
    rng: np.random.Generator, crossing: float, n: int, steepness: float, saturation: float
) -> SearchBracket | None:
    """One simulated sweep's capacity and bracket (None: no capacity concluded)."""

    def measure(rate: float) -> tuple[Goodput, Window]:
        p = TARGET ** ((rate / crossing) ** steepness)
        good = int(rng.binomial(n, p))
        return Goodput(good, n, n / rate), Window(256 * rate, rate > saturation * crossing)

    result = slo_search.find_capacity(
        measure,
        knob=slo_search.Knob.rate(START_RPS, MAX_RPS),
        target=TARGET,
        policy=slo_search.RATE_POLICY,
    )
    if result.capacity is None or result.bracket is None:
        return None
    return SearchBracket(result.capacity, *result.bracket, result.policy.interval_confidence, RATE)


def covers(bracket: SearchBracket | None, crossing: float) -> bool:
    return (
        bracket is not None
        and bracket.last_pass <= crossing
        and (bracket.first_fail is None or crossing < bracket.first_fail)
    )


def verdict(
    candidate: SearchBracket | None,
    reference: SearchBracket | None,
) -> Verdict | None:
    if candidate is None or reference is None or reference.capacity <= 0:
        return None
    return slo_search.decide_capacity_verdict(slo_search.capacity_ratio(candidate, reference), 0.10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=2000, help="simulated pairs per row")
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    # a one-window step's interval depends only on (good, n): computed once per pair
    cached = functools.lru_cache(maxsize=None)(attainment.attainment_interval)
    attainment.attainment_interval = cached
    slo_search.attainment_interval = cached  # type: ignore[attr-defined]
    rng = np.random.default_rng(args.seed)
    began = time.perf_counter()
    failed = False
    print(
        f"{'n':>3} {'steep':>5} {'sat':>4}  {'coverage':>8}  {'A/A wrong':>9}  "
        f"{'inconcl.':>8}  {'1.5x better':>11}  {'2x better':>9}"
    )
    for n, steepness, saturation in CASES:
        covered, wrong, inconclusive, better_15, better_2 = 0, 0, 0, 0, 0
        for _ in range(args.sweeps):
            crossing = math.exp(rng.uniform(math.log(0.5), math.log(4.0)))
            a = sweep(rng, crossing, n, steepness, saturation)
            b = sweep(rng, crossing, n, steepness, saturation)
            covered += covers(a, crossing) + covers(b, crossing)
            same = verdict(a, b)
            wrong += same in (Verdict.WORSE, Verdict.BETTER)
            inconclusive += same is Verdict.INCONCLUSIVE or same is None
            better_15 += (
                verdict(sweep(rng, 1.5 * crossing, n, steepness, saturation), b) is Verdict.BETTER
            )
            better_2 += (
                verdict(sweep(rng, 2 * crossing, n, steepness, saturation), b) is Verdict.BETTER
            )
        coverage, aa = covered / (2 * args.sweeps), wrong / args.sweeps
        failed |= coverage < 0.90 or aa > 0.10
        print(
            f"{n:>3} {steepness:>5g} {saturation:>4g}  {coverage:>8.1%}  {aa:>9.1%}  "
            f"{inconclusive / args.sweeps:>8.1%}  {better_15 / args.sweeps:>11.1%}  "
            f"{better_2 / args.sweeps:>9.1%}"
        )
    print(f"{len(CASES) * args.sweeps * 4} sweeps in {time.perf_counter() - began:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
