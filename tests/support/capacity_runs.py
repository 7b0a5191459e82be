"""Shared by the tests: moved from test_capacity.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.pytest_runs import run_pytest
from support.sse_server import ListingServer

ROOT = Path(__file__).resolve().parents[2]


REFERENCE, CANDIDATE = "gemma3-270m", "smollm2-135m"


TIMED = 2  # timed requests per step: max(2, c), so that c are in flight


class Servers:
    """The two paced fake servers and the ``--endpoint`` arguments that attach them."""

    def __init__(self, reference: ListingServer, candidate: ListingServer) -> None:
        self.reference, self.candidate = reference, candidate
        self.args = [
            f"--endpoint={REFERENCE}={reference.base_url}",
            f"--endpoint={CANDIDATE}={candidate.base_url}",
        ]


def run(pytester: pytest.Pytester, *args: str, own_process: bool = False) -> pytest.RunResult:
    """The real benches/test_capacity.py (as test_the_capacity.py: no clash with this
    suite's module of that name), with a store shared across runs; ``own_process`` for a
    timing test (:func:`support.pytest_runs.run_pytest`)."""
    pytester.makepyfile(test_the_capacity=(ROOT / "benches" / "test_capacity.py").read_text())
    return run_pytest(
        pytester,
        f"--timed-requests={TIMED}",
        "--slo-attainment=0.5",
        "--contended-cores=64",
        "--contended-steal=1",
        "--results=r.json",
        "--store=s.sqlite",
        "--modelsweep-dir=work",
        "-p",
        "no:cacheprovider",
        "-s",
        *args,
        own_process=own_process,
    )
