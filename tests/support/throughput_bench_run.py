"""The real throughput bench (benches/test_throughput.py) run in a pytester project against a
steady fake server, and what it wrote: the tests of noise (tests/test_noise.py) and of a CPU
hog beside the bench (tests/test_contention.py) share them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.sse_server import ListingServer

ROOT = Path(__file__).resolve().parents[2]
MODEL = "smollm2-135m"


@pytest.fixture
def steady() -> Iterator[str]:
    """A fake server of one token a millisecond."""
    with ListingServer(MODEL, chunk_delay_s=0.001) as server:
        yield server.base_url


def run_bench(pytester: pytest.Pytester, url: str, *args: str) -> Any:
    """The real benches/test_throughput.py at concurrency 1, two timed requests a repeat, in a
    process of its own: each window records the CPU of the server's process, which must not
    be the bench's (the fake server runs in this one)."""
    pytester.makepyfile(test_throughput=(ROOT / "benches" / "test_throughput.py").read_text())
    return pytester.runpytest_subprocess(
        "-k",
        "test_throughput and c1 and not c16 and not ratio",
        "--timed-requests",
        "2",
        "--model",
        MODEL,
        "--endpoint",
        f"{MODEL}={url}",
        "--modelsweep-dir",
        "work",
        "--results",
        "r.json",
        "-s",
        "-p",
        "no:cacheprovider",
        *args,
        timeout=90,
    )


def stats_of(pytester: pytest.Pytester) -> dict[str, Any]:
    measurements = json.loads((pytester.path / "r.json").read_text())["measurements"]
    (throughput,) = [m for m in measurements if m["benchmark"] == "throughput"]
    stats: dict[str, Any] = throughput["stats"]
    return stats


def gate_rows(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((pytester.path / "r.json").read_text())["summary"][
        "gate"
    ]
    return rows
