"""What freezing the run's loaded objects saves each pytest process that runs benches.

A run that collects modelsweep tests imports the plugin's floors (the store's SQLAlchemy,
numpy, the records and their converters); pytest then runs five full garbage collections
as it exits (its unraisable-exception check), each walking every one of those objects.
``pytest_modelsweep.pytest.context.freeze_what_the_run_loaded`` calls ``gc.freeze()`` once
the run state is made, so that the collections skip what lives until exit anyway.

This imports what an active run imports, then alternates the two sides in one process
(``gc.unfreeze()`` / ``gc.freeze()``), timing pytest's five exit collections on each, and
prints each side's median CPU and their ratio. Target: the frozen side at most a fifth of
the other (exit status 1 above it).

    python benches/perf/exit_collections.py [--rounds 15] [--target 0.2]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

EXIT_COLLECTIONS = 5
"""``gc_collect_harder``'s iterations in pytest's unraisableexception plugin."""


def exit_collections_cpu_s() -> float:
    started = time.process_time()
    for _ in range(EXIT_COLLECTIONS):
        gc.collect()
    return time.process_time() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="rounds of each side (default 15)")
    parser.add_argument(
        "--target",
        type=float,
        default=0.2,
        help="the largest frozen ÷ unfrozen CPU ratio allowed (default 0.2)",
    )
    args = parser.parse_args()
    # what plugin.py's configure and an active run's first test import
    import pytest_modelsweep.plugin
    import pytest_modelsweep.pytest.fixtures
    import pytest_modelsweep.pytest.state
    import pytest_modelsweep.workloads.setting  # noqa: F401

    gc.collect()
    sides: dict[str, list[float]] = {"not frozen": [], "frozen": []}
    for i in range(args.rounds):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for side in order:
            if side == "frozen":
                gc.freeze()
            else:
                gc.unfreeze()
            sides[side].append(exit_collections_cpu_s())
    medians = {side: statistics.median(times) for side, times in sides.items()}
    for side, times in sides.items():
        print(
            f"{side:11s} median {1000 * medians[side]:7.1f} CPU-ms for {EXIT_COLLECTIONS} "
            f"collections (min {1000 * min(times):.1f}, max {1000 * max(times):.1f}, "
            f"{len(times)} rounds)"
        )
    ratio = medians["frozen"] / medians["not frozen"]
    print(
        f"frozen ÷ not frozen: {ratio:.3f}; target <= {args.target:g}: "
        f"{'met' if ratio <= args.target else 'MISSED'} ({gc.get_freeze_count()} objects frozen)"
    )
    return 0 if ratio <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
