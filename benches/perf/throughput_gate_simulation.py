"""Coverage of the throughput ratio interval and false alarms / power of the baseline gate.

Simulates lognormal throughput repeats and calls the project's real
``pytest_modelsweep.core.stats.intervals.ratio_interval`` and
``pytest_modelsweep.judging.gate.compare_with_baseline`` on measurement dicts shaped as
``benches/test_throughput.py`` writes them.

(a) coverage of the 95% ratio interval, no true difference: repeats 3/5/10 x CV 2/10/30%;
    target 93-97%.
(b) gate false alarms per model (5 throughput rows) with no change, 3 repeats, CV 5% and 10%,
    without and with a between-run effect (each run = new server process: its own
    lognormal level, CV 5%), baseline histories of 1 and 3 runs; target <= 5% where the
    gate's model holds (no between-run effect, or a history of >= 2 runs).
(c) power: a true 25% slowdown at CV 5%, 3 repeats: share of rows flagged regressed >= 80%.

numpy only, seeded. Exits 1 if a target is missed.  ``python benches/perf/throughput_gate_simulation.py``
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_modelsweep.core.measurements import Measurement
from pytest_modelsweep.core.options import Thresholds, default_timed_requests
from pytest_modelsweep.core.stats.intervals import ratio_interval
from pytest_modelsweep.judging.gate import compare_with_baseline

SETTINGS = [
    ("throughput", 1, None),
    ("throughput", 4, None),
    ("throughput", 16, None),
    ("long_prompt", 4, 1024),
    ("long_prompt", 4, 3072),
]
PROVENANCE = {
    "server_name": "llama.cpp",
    "server_version": "b1",
    "image_digest": None,
    "server_settings": {"total_slots": 16},
}


def lognormal(rng: np.random.Generator, centre: float, cv: float, size: int) -> list[float]:
    """Values whose log is normal with sd giving coefficient of variation ``cv``."""
    sigma = math.sqrt(math.log1p(cv * cv))
    return [float(v) for v in centre * np.exp(rng.normal(0.0, sigma, size))]


def measurement(
    benchmark: str, concurrency: int, prompt_tokens: int | None, values: list[float]
) -> Measurement:
    timed = default_timed_requests(concurrency)
    return Measurement.from_dict(
        {
            "model": "smollm2-135m",
            "benchmark": benchmark,
            "value": sum(values) / len(values),
            "unit": "tokens/s",
            "n": timed * len(values),
            "outcome": "passed",
            "params": {
                "concurrency": concurrency,
                "prompt_tokens": prompt_tokens,
                "output_tokens": 256,
                "timed_requests": timed,
                "repeats": len(values),
            },
            "stats": {"repeat_values": values},
            "provenance": dict(PROVENANCE),
        }
    )


def run_of(
    rng: np.random.Generator, cv: float, between: float, repeats: int, factor: float = 1.0
) -> list[Measurement]:
    """One run (one server process) of the model's five throughput settings."""
    out = []
    for i, (benchmark, concurrency, prompt_tokens) in enumerate(SETTINGS):
        level = 100.0 * (i + 1) * factor
        if between > 0:
            level *= math.exp(rng.normal(0.0, math.sqrt(math.log1p(between * between))))
        out.append(
            measurement(benchmark, concurrency, prompt_tokens, lognormal(rng, level, cv, repeats))
        )
    return out


def coverage(runs: int, seed: int) -> tuple[list[str], bool]:
    rng = np.random.default_rng(seed)
    lines = [
        "(a) coverage of the 95% ratio interval (Welch t on log), no true difference",
        f"    {'repeats':>7} {'CV':>5} {'coverage':>9}  target 93-97%  ({runs} runs each)",
    ]
    ok = True
    for repeats in (3, 5, 10):
        for cv in (0.02, 0.10, 0.30):
            hits = 0
            for _ in range(runs):
                r = ratio_interval(
                    lognormal(rng, 100.0, cv, repeats), lognormal(rng, 100.0, cv, repeats)
                )
                hits += r.low <= 1.0 <= r.high
            share = hits / runs
            good = 0.93 <= share <= 0.97
            ok &= good
            lines.append(f"    {repeats:>7} {cv:>5.0%} {share:>9.1%}  {'ok' if good else 'MISSED'}")
    return lines, ok


def gate_trial(
    rng: np.random.Generator, cv: float, between: float, history: int, factor: float
) -> list[str]:
    baseline = [m for _ in range(history) for m in run_of(rng, cv, between, 3)]
    current = run_of(rng, cv, between, 3, factor)
    return [row.status for row in compare_with_baseline(current, baseline, Thresholds())]


def gate(trials: int, seed: int) -> tuple[list[str], bool]:
    rng = np.random.default_rng(seed)
    lines = [
        (
            "(b) false alarms: share of unchanged models with any of 5 rows regressed "
            f"(3 repeats, threshold 10%, {trials} models each)"
        ),
        f"    {'CV':>4} {'between-run CV':>14} {'baseline runs':>13} {'false alarms':>12}  target <= 5%",
    ]
    ok = True
    for cv in (0.05, 0.10):
        for between in (0.0, 0.05):
            for history in (1, 3):
                alarms = sum(
                    "regressed" in gate_trial(rng, cv, between, history, 1.0) for _ in range(trials)
                )
                share = alarms / trials
                required = between == 0.0 or history >= 2
                good = share <= 0.05
                if required:
                    ok &= good
                verdict = (
                    ("ok" if good else "MISSED")
                    if required
                    else (
                        "meets it"
                        if good
                        else "not claimed (one baseline run cannot see run-to-run variance)"
                    )
                )
                lines.append(
                    f"    {cv:>4.0%} {between:>14.0%} {history:>13} {share:>12.1%}  {verdict}"
                )
    lines.append(
        "(c) power: share of rows flagged regressed for a true 25% slowdown, CV 5%, 3 repeats "
        f"({trials} models each)"
    )
    lines.append(
        f"    {'between-run CV':>14} {'baseline runs':>13} {'rows flagged':>12}  target >= 80%"
    )
    for between in (0.0, 0.05):
        for history in (1, 3):
            flagged = sum(
                status == "regressed"
                for _ in range(trials)
                for status in gate_trial(rng, 0.05, between, history, 0.75)
            )
            share = flagged / (trials * len(SETTINGS))
            required = between == 0.0
            good = share >= 0.80
            if required:
                ok &= good
            verdict = (
                ("ok" if good else "MISSED")
                if required
                else ("meets it" if good else "below (shown, not claimed)")
            )
            lines.append(f"    {between:>14.0%} {history:>13} {share:>12.1%}  {verdict}")
    return lines, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coverage-runs", type=int, default=10_000)
    parser.add_argument("--gate-trials", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=20240614)
    args = parser.parse_args()
    started = time.perf_counter()
    lines_a, ok_a = coverage(args.coverage_runs, args.seed)
    lines_b, ok_b = gate(args.gate_trials, args.seed + 1)
    for line in lines_a + lines_b:
        print(line)
    print(
        f"{'all targets met' if ok_a and ok_b else 'A TARGET WAS MISSED'} "
        f"({time.perf_counter() - started:.0f} s)"
    )
    return 0 if ok_a and ok_b else 1


if __name__ == "__main__":
    sys.exit(main())
