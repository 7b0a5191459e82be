"""What the installed plugin costs a pytest run that does not use it.

Every pytest run in an environment where pytest-modelsweep is installed loads
it. This makes a throwaway project with two plain test files (no benches, no
modelsweep options) and times ``python -m pytest -q`` there with the plugin
and with ``-p no:modelsweep``, alternating the two so that drift in machine
speed hits both alike, and prints each side's median and the difference.
Target: at most 30 ms (exit status 1 above it).

    python benches/perf/plugin_overhead.py [--runs 15] [--target-ms 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN_TESTS = {
    "test_a.py": "def test_1():\n    assert 1 + 1 == 2\n\n\ndef test_2():\n    assert 'a' < 'b'\n",
    "test_b.py": "import pytest\n\n\n@pytest.mark.parametrize('x', [1, 2, 3])\n"
    "def test_3(x):\n    assert x > 0\n",
}


def make_project(root: Path) -> None:
    for name, text in PLAIN_TESTS.items():
        (root / name).write_text(text)
    (root / "pytest.ini").write_text("[pytest]\n")  # rootdir here, not in a parent's config


def time_run(root: Path, extra: list[str]) -> float:
    """Wall seconds of one ``python -m pytest -q`` in ``root`` (it must pass)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"pytest failed in {root} ({extra}):\n{done.stdout}{done.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each side (default 15)")
    parser.add_argument(
        "--target-ms",
        type=float,
        default=30.0,
        help="the most overhead allowed, in ms (default 30)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="modelsweep-overhead-") as folder:
        root = Path(folder)
        make_project(root)
        sides = {"with modelsweep": [], "-p no:modelsweep": []}  # type: dict[str, list[float]]
        extra = {"with modelsweep": [], "-p no:modelsweep": ["-p", "no:modelsweep"]}
        for side in sides:  # warm-up: the first run of each pays for compiling and disk
            time_run(root, extra[side])
        for i in range(args.runs):
            order = list(sides) if i % 2 == 0 else list(reversed(sides))
            for side in order:
                sides[side].append(time_run(root, extra[side]))
    medians = {side: statistics.median(times) for side, times in sides.items()}
    for side, times in sides.items():
        print(
            f"{side:18s} median {1000 * medians[side]:7.1f} ms  "
            f"(min {1000 * min(times):.1f}, max {1000 * max(times):.1f}, {len(times)} runs)"
        )
    # the paired differences of neighbouring runs are steadier than a difference of medians
    paired = [a - b for a, b in zip(sides["with modelsweep"], sides["-p no:modelsweep"])]
    overhead_ms = 1000 * statistics.median(paired)
    print(
        f"overhead: {overhead_ms:+.1f} ms (median of {len(paired)} paired differences; "
        f"difference of medians {1000 * (medians['with modelsweep'] - medians['-p no:modelsweep']):+.1f} ms); "
        f"target <= {args.target_ms:g} ms: {'met' if overhead_ms <= args.target_ms else 'MISSED'}"
    )
    return 0 if overhead_ms <= args.target_ms else 1


if __name__ == "__main__":
    sys.exit(main())
