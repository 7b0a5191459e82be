"""Capacity under an SLO: the most concurrent requests a model serves while enough meet it.

``test_capacity`` searches the concurrency, up to the server's ``max_num_seqs``, at
which at least ``--slo-attainment`` (default 90%) of requests meet every ``--slo``
target. It navigates with one timed window a concurrency (1, 2, 4, ... until a window
falls below the target, then bisection to adjacent concurrencies), then decides the
boundary: each concurrency there takes more windows until the exact interval of its
pooled attainment (corrected for how alike a window's requests are) lies above or below
the target. The capacity is the highest concurrency that surely passed, with its 95%
interval up to the lowest that surely missed. Each window is one of the throughput
workload (short unique prompts, 256 tokens each, checked against the server's counters),
with its contention recorded and a progress line. One measurement: the capacity, the
figures at it (output tokens/s, goodput, $/1M output tokens when priced) and every
window. ``test_capacity_ratio`` compares a candidate's capacity with the reference's
through both intervals. Without ``--slo`` both skip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_modelsweep.core.measurements import CONCURRENCY, SearchBracket
from pytest_modelsweep.core.sweep import Sweep
from pytest_modelsweep.pytest.fixtures import RecordMeasurement
from pytest_modelsweep.pytest.state import BenchSettings
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.workloads.slo_search import (
    NEEDS_SLO,
    Knob,
    measure_capacity,
    server_max_concurrency,
)


@pytest.mark.capacity
def test_capacity(
    request: pytest.FixtureRequest,
    model_name: str,
    sweep: Sweep,
    bench_settings: BenchSettings,
    record_measurement: RecordMeasurement,
    progress: Callable[[str], None],
) -> None:
    slo = bench_settings.slo
    if slo is None:
        pytest.skip(NEEDS_SLO[CONCURRENCY])
    endpoint: Endpoint = request.getfixturevalue("endpoint")  # no server started to skip
    max_concurrency, source = server_max_concurrency(
        endpoint.provenance.server_settings, sweep.serving.max_num_seqs
    )
    knob = Knob.concurrency(max_concurrency)
    result = measure_capacity(
        endpoint, bench_settings, slo, knob, record_measurement, progress, source
    )
    bracket = SearchBracket(result.last_pass, result.last_pass, result.first_fail)
    line = (
        f"capacity {model_name} under {slo} ({bench_settings.slo_attainment:.0%} "
        f"attainment): {result.capacity} concurrent requests "
        f"({result.policy.interval_confidence:.0%} interval {result.interval_text()}, "
        f"bracket {bracket.text()}), {len(result.steps)} windows"
    )
    progress(line if result.reason is None else f"{line}; {result.reason}")


@pytest.mark.verdict
@pytest.mark.capacity
def test_capacity_ratio(candidate_name: str, judge_capacity_ratio: Callable[[], Any]) -> None:
    judge_capacity_ratio()
