"""Traffic as users send it: requests arriving at a rate, and capacity in requests/second.

``test_open_loop`` sends requests at ``--request-rate`` (Poisson arrivals, or gamma with
``--burstiness``, as ``vllm bench serve`` draws them) whatever is in flight, over
``--repeats`` windows of ``--timed-requests`` (default 32) short unique prompts generating
256 tokens each, checked against the server's counters like every throughput window. Each
request's latency runs from its *scheduled* send time, so a queue shows in TTFT and E2E
instead of slowing the client down (no coordinated omission); a window whose completions
fall more than 10% behind the offered rate is flagged ``saturated``. The server's
``/metrics`` are sampled in every window. Without ``--request-rate`` it skips.

``test_rate_capacity`` sweeps the rate over ``--rate-sweep`` (doubling, then bisecting to
10%) under ``--slo``: each step one open-loop window whose SLO attainment is decided from
its Clopper-Pearson interval (pass, miss or inconclusive: a step at the boundary takes
more windows until decided); a saturated server fails the step, as GuideLLM's
``--stop-over-saturated`` does. The capacity is the highest rate that passed, with its
bracket. ``test_rate_capacity_ratio`` compares a candidate's with the
reference's through the two brackets. Without ``--slo`` both skip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_modelsweep.core.measurements import RATE
from pytest_modelsweep.pytest.fixtures import RecordMeasurement
from pytest_modelsweep.pytest.state import BenchSettings
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.workloads.arrivals import ArrivalProcess
from pytest_modelsweep.workloads.setting import measure_setting
from pytest_modelsweep.workloads.slo_search import NEEDS_SLO, Knob, measure_capacity

NEEDS_RATE = "the open loop needs --request-rate, e.g. --request-rate 2"


@pytest.mark.open_loop
def test_open_loop(
    request: pytest.FixtureRequest,
    model_name: str,
    bench_settings: BenchSettings,
    record_measurement: RecordMeasurement,
    progress: Callable[[str], None],
) -> None:
    rate = bench_settings.request_rate
    if rate is None:
        pytest.skip(NEEDS_RATE)
    endpoint: Endpoint = request.getfixturevalue("endpoint")  # no server started to skip
    measure_setting(
        endpoint,
        bench_settings,
        record_measurement,
        "open_loop",
        None,
        None,
        progress,
        arrivals=ArrivalProcess(rate, bench_settings.burstiness),
    )


@pytest.mark.rate_capacity
def test_rate_capacity(
    request: pytest.FixtureRequest,
    model_name: str,
    bench_settings: BenchSettings,
    record_measurement: RecordMeasurement,
    progress: Callable[[str], None],
) -> None:
    slo = bench_settings.slo
    if slo is None:
        pytest.skip(NEEDS_SLO[RATE])
    endpoint: Endpoint = request.getfixturevalue("endpoint")
    sweep = bench_settings.rate_sweep
    knob = Knob.rate(sweep.start_rps, sweep.max_rps)
    result = measure_capacity(endpoint, bench_settings, slo, knob, record_measurement, progress)
    first_fail = "open" if result.first_fail is None else f"{result.first_fail:.3g}"
    progress(
        f"rate capacity {model_name} under {slo} ({bench_settings.slo_attainment:.0%} "
        f"attainment): {result.last_pass:.3g} req/s, bracket [{result.last_pass:.3g}, "
        f"{first_fail}], {len(result.steps)} steps; {result.stopped}"
    )


@pytest.mark.verdict
@pytest.mark.rate_capacity
def test_rate_capacity_ratio(candidate_name: str, judge_capacity_ratio: Callable[[], Any]) -> None:
    judge_capacity_ratio()
