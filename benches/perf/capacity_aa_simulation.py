"""How often an unchanged model's capacity verdict says better or worse: A/A searches.

Run: ``python benches/perf/capacity_aa_simulation.py [--trials T] [--seed S]``

Each trial searches one simulated server twice, as two runs would, with the real
``find_capacity`` (``pytest_modelsweep.workloads.slo_search``), and compares the two
capacities with the real ``capacity_ratio`` and ``decide_capacity_verdict``
(``--ratio-tolerance`` 10%, attainment target 90%). The server is slower the more requests
it has in flight, as a batching server is: a request's time per output token is
``(20 + 5 c) ms × run × window × request`` at ``c`` in flight, each factor lognormal:

- ``run``: the machine's speed in that run (another server process, another load: the
  A/A experiment of issue 14 saw ~11% between throughput runs);
- ``window``: the machine's speed during one timed window, shared by all of its requests
  (they queue together: requests of a window are correlated);
- ``request``: each request's own noise (10%).

A request is good when its time per token meets the SLO; ``--slo tpot`` is placed so that
the median capacity is about 3, 8 or 13 of at most 16. A window has 2 × c requests (at
least 4), as the bench's default. The run's true capacity is the highest c whose expected
attainment (over windows and requests) reaches 90%.

Printed per configuration: the A/A verdicts (better, worse: target ≤ 5% together), the
coverage of each search's capacity interval of the run's own true capacity (target ≥ 95%,
its stated level, where windows vary by at most 5%), the ratio verdicts that are
inconclusive, the mean and 90th percentile of windows and requests per search, and the
mean width of the capacity interval; then the power against a candidate 1.5 and 2 times as
fast. numpy and scipy; seeded; exits 1 if a target is missed where the run effect is at
most 5% (larger run effects are shown, not claimed: one run per side cannot see them).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_modelsweep.core.measurements import SearchBracket
from pytest_modelsweep.core.slo import Goodput
from pytest_modelsweep.core.stats import Verdict
from pytest_modelsweep.workloads.slo_search import (
    INTERVAL_CONFIDENCE,
    Knob,
    SearchResult,
    capacity_ratio,
    decide_capacity_verdict,
    find_capacity,
)

TARGET = 0.90
TOLERANCE = 0.10
MAX_CONCURRENCY = 16
REQUEST_SIGMA = 0.10
A_MS, B_MS = 20.0, 5.0


@dataclass
class Window:
    output_tokens_per_s: float
    violations: tuple[str, ...] = ()
    offered_rps: float | None = None
    achieved_rps: float | None = None
    saturation_reason: str | None = None


def tpot_ms(concurrency: int) -> float:
    return A_MS + B_MS * concurrency


@dataclass(frozen=True)
class Config:
    capacity: int
    """The median capacity the SLO is placed for."""
    run_sigma: float
    window_sigma: float

    @property
    def slo_ms(self) -> float:
        """The SLO whose expected attainment is 90% half way between c and c + 1."""
        sigma = math.hypot(self.window_sigma, REQUEST_SIGMA)
        z90 = 1.2815515655446004
        return (tpot_ms(self.capacity) + tpot_ms(self.capacity + 1)) / 2 * math.exp(z90 * sigma)


class Server:
    """One run of the simulated server: its speed factor drawn once (``speedup`` > 1: a
    model that many times faster)."""

    def __init__(self, config: Config, rng: np.random.Generator, speedup: float = 1.0) -> None:
        self.config = config
        self.rng = rng
        self.run = math.exp(rng.normal(0.0, config.run_sigma)) if config.run_sigma else 1.0
        self.run /= speedup
        self.windows = 0
        self.requests = 0

    def attainment(self, concurrency: int) -> float:
        """The expected share of good requests at ``concurrency`` in this run."""
        from scipy.stats import norm

        sigma = math.hypot(self.config.window_sigma, REQUEST_SIGMA)
        margin = math.log(self.config.slo_ms / (tpot_ms(concurrency) * self.run))
        return float(norm.cdf(margin / sigma))

    def true_capacity(self) -> int | None:
        """The highest c whose attainment reaches the target (None: even the maximum)."""
        if self.attainment(MAX_CONCURRENCY) >= TARGET:
            return None
        return max(
            (c for c in range(1, MAX_CONCURRENCY + 1) if self.attainment(c) >= TARGET), default=0
        )

    def __call__(self, concurrency: int) -> tuple[Goodput, Window]:
        n = max(2 * concurrency, 4)
        window = math.exp(self.rng.normal(0.0, self.config.window_sigma))
        noise = np.exp(self.rng.normal(0.0, REQUEST_SIGMA, n))
        times = tpot_ms(concurrency) * self.run * window * noise
        good = int(np.sum(times <= self.config.slo_ms))
        self.windows += 1
        self.requests += n
        duration = n * 256 * float(np.mean(times)) / 1000 / concurrency
        return Goodput(good, n, duration), Window(256 * n / duration)


def covered(result: SearchResult, truth: int | None) -> bool:
    if truth is None:
        return result.first_fail is None
    return result.last_pass <= truth and (
        result.first_fail is None or truth <= result.first_fail - 1
    )


def width(result: SearchResult) -> float:
    high = MAX_CONCURRENCY if result.first_fail is None else result.first_fail - 1
    return high - result.last_pass


def trial(config: Config, rng: np.random.Generator, speedup: float = 1.0) -> dict[str, Any]:
    """One candidate search (``speedup`` × as fast) and one reference search, compared."""
    servers = [Server(config, rng, speedup), Server(config, rng)]
    results = [
        find_capacity(s, knob=Knob.concurrency(MAX_CONCURRENCY), target=TARGET) for s in servers
    ]
    brackets = [
        SearchBracket(r.last_pass, r.last_pass, r.first_fail, r.policy.interval_confidence)
        for r in results
    ]
    verdict = None
    if brackets[1].capacity > 0:
        verdict = decide_capacity_verdict(capacity_ratio(brackets[0], brackets[1]), TOLERANCE)
    return {
        "better": float(verdict is Verdict.BETTER),
        "worse": float(verdict is Verdict.WORSE),
        "inconclusive": float(verdict is Verdict.INCONCLUSIVE),
        "matches": float(verdict in (Verdict.MATCHES, Verdict.EQUIVALENT)),
        "no ratio": float(verdict is None),
        "covered": sum(covered(r, s.true_capacity()) for r, s in zip(results, servers)) / 2,
        "windows": [s.windows for s in servers],
        "requests": [s.requests for s in servers],
        "width": sum(width(r) for r in results) / 2,
    }


CONFIGS = [
    Config(capacity, run, window)
    for capacity in (3, 8, 13)
    for run, window in ((0.0, 0.05), (0.05, 0.05), (0.05, 0.10), (0.10, 0.05))
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    ok = True
    print(
        f"A/A capacity searches, target {TARGET:.0%} attainment, tolerance ±{TOLERANCE:.0%}, "
        f"{args.trials} pairs of runs each"
    )
    print(
        "capacity  run  window  better  worse  together  coverage  inconcl.  "
        "windows mean/p90  requests mean/p90  width"
    )
    for config in CONFIGS:
        rows = [trial(config, rng) for _ in range(args.trials)]
        better = float(np.mean([r["better"] for r in rows]))
        worse = float(np.mean([r["worse"] for r in rows]))
        coverage = float(np.mean([r["covered"] for r in rows]))
        inconclusive = float(np.mean([r["inconclusive"] for r in rows]))
        windows = np.array([w for r in rows for w in r["windows"]])
        requests = np.array([n for r in rows for n in r["requests"]])
        spread = float(np.mean([r["width"] for r in rows]))
        claimed = config.run_sigma <= 0.05
        aa_ok = better + worse <= 0.05
        covers = coverage >= INTERVAL_CONFIDENCE or config.window_sigma > 0.05
        verdict = (
            "ok"
            if aa_ok and covers and claimed
            else "MISSED"
            if claimed
            else "meets it (shown, not claimed)"
            if aa_ok
            else "A/A above (shown, not claimed)"
        )
        if aa_ok and claimed and coverage < INTERVAL_CONFIDENCE:
            verdict = "ok; coverage below 95% (shown, not claimed)"
        ok = ok and ((aa_ok and covers) or not claimed)
        print(
            f"{config.capacity:8d}  {config.run_sigma:3.0%}  {config.window_sigma:6.0%}  "
            f"{better:6.1%}  {worse:5.1%}  {better + worse:8.1%}  {coverage:8.1%}  "
            f"{inconclusive:8.1%}  {windows.mean():7.1f} / {np.percentile(windows, 90):4.0f}"
            f"  {requests.mean():8.0f} / {np.percentile(requests, 90):5.0f}  {spread:5.2f}"
            f"  {verdict}"
        )
    print(
        f"power: share of verdicts better for a candidate that many times as fast "
        f"(run 5%, window 5%, {args.trials} pairs each)"
    )
    print("capacity  speedup  better  inconclusive  matches")
    for capacity, speedup in ((3, 1.5), (3, 2.0), (8, 1.5), (8, 2.0)):
        config = Config(capacity, 0.05, 0.05)
        rows = [trial(config, rng, speedup) for _ in range(args.trials)]
        print(
            f"{capacity:8d}  {speedup:7.1f}  {np.mean([r['better'] for r in rows]):6.1%}  "
            f"{np.mean([r['inconclusive'] for r in rows]):12.1%}  "
            f"{np.mean([r['matches'] for r in rows]):7.1%}"
        )
    print(
        f"{'all claimed targets met' if ok else 'a target was missed'} "
        f"({time.monotonic() - started:.0f} s)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
