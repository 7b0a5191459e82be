"""The prebuilt llama.cpp server (xllamacpp's CPU wheel) against llama-server built here.

Run: ``python3 benches/perf/prebuilt_server_speed.py [--rounds R] [--tokens T]
[--models a,b,c]`` (needs ``modelsweep provision --build`` first, for the native side).

For each embedded model both servers are started through the package's own launch path
(``launch_llamacpp`` with the embedded sweep's serving settings), both stay up, and timed
windows of the throughput workload (``run_throughput``: T output tokens a request, one wave of
N in flight) alternate between them at 1 and 4 concurrent requests, the order flipping every
round, so that a machine that drifts slows both alike. It prints each model's output tokens/s
on each side (median over the rounds) and the ratio prebuilt ÷ native with its spread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_modelsweep.core.sweep import load_sweep
from pytest_modelsweep.serving.llamacpp import launch_llamacpp
from pytest_modelsweep.serving.provision import (
    LlamaServer,
    ensure_llama_server,
    llama_server_path,
    prebuilt_llama_server,
)
from pytest_modelsweep.workloads.throughput import run_throughput

CONCURRENCIES = (1, 4)


def servers() -> dict[str, LlamaServer]:
    """The two sides; exits with one line where either is missing."""
    prebuilt = prebuilt_llama_server()
    if prebuilt is None:
        sys.exit("the prebuilt side needs xllamacpp: pip install -e '.[embedded]'")
    if not llama_server_path().is_file():
        sys.exit("the native side needs a build first: modelsweep provision --build")
    return {"prebuilt": prebuilt, "native": ensure_llama_server(print)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m,qwen2.5-coder-0.5b")
    args = parser.parse_args()
    sweep = load_sweep("embedded")
    sides = servers()
    for side, server in sides.items():
        print(f"{side}: {server.origin}")
    print(
        f"{'model':<20}{'c':>3}{'prebuilt tok/s':>16}{'native tok/s':>14}"
        f"{'ratio p/n':>11}{'ratios by round':>28}"
    )
    with tempfile.TemporaryDirectory(prefix="modelsweep-prebuilt-speed-") as logs:
        for name in args.models.split(","):
            launched = {
                side: launch_llamacpp(
                    sweep.model(name), sweep.serving, Path(logs), lambda _line: None, server
                )
                for side, server in sides.items()
            }
            try:
                rate: dict[tuple[str, int], list[float]] = {}
                for round_ in range(args.rounds):
                    order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
                    for concurrency in CONCURRENCIES:
                        for side in order:
                            window = run_throughput(
                                launched[side][0],
                                concurrency=concurrency,
                                prompt_tokens=None,
                                output_tokens=args.tokens,
                                timed_requests=concurrency,
                                warmup_requests=1,
                                seed=round_ * 100 + concurrency,
                                timeout_s=600.0,
                                server_metrics=False,
                            )
                            rate.setdefault((side, concurrency), []).append(
                                window.output_tokens_per_s
                            )
                for concurrency in CONCURRENCIES:
                    pre, nat = rate[("prebuilt", concurrency)], rate[("native", concurrency)]
                    ratios = [p / n for p, n in zip(pre, nat, strict=True)]
                    shown = " ".join(f"{r:.2f}" for r in ratios)
                    print(
                        f"{name:<20}{concurrency:>3}{statistics.median(pre):>16.1f}"
                        f"{statistics.median(nat):>14.1f}{statistics.median(ratios):>10.2f}x"
                        f"{shown:>28}",
                        flush=True,
                    )
            finally:
                for _endpoint, process in launched.values():
                    process.stop()


if __name__ == "__main__":
    main()
