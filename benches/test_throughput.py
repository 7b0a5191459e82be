"""Throughput and latency, exactly as the server counted them.

Each setting runs ``--repeats`` timed windows (warm-up first; ``auto``: until
the 95% interval of the mean is narrow enough) with exactly N requests in
flight, 256 generated tokens each (``ignore_eos``), prompts that share no prefix
with any other request of the run. Every window is checked against the server's
own counters; a violation fails the test after the figures are recorded. Each
window records who else used the CPUs during it (``contention``); each setting
its repeats' CV and the ``unstable`` and ``contended`` flags, and a progress
line per repeat. With a price (``--usd-per-hour`` or the sweep's ``[pricing]``)
each setting and repeat records $/1M output tokens; with ``--slo`` each window
its goodput and SLO attainment. The candidate ÷ reference ratio at each setting
is a measurement of its own, with an interval over the repeats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_modelsweep.pytest.fixtures import RecordMeasurement
from pytest_modelsweep.pytest.state import BenchSettings
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.workloads.setting import measure_setting

SHORT = [pytest.param(c, id=f"c{c}") for c in (1, 4, 16)]
LONG = [pytest.param(p, 4, id=f"p{p}-c4") for p in (1024, 3072)]
SETTINGS = [
    pytest.param("throughput", None, c, marks=pytest.mark.throughput, id=f"c{c}")
    for c in (1, 4, 16)
] + [
    pytest.param("long_prompt", p, 4, marks=pytest.mark.long_prompt, id=f"p{p}-c4")
    for p in (1024, 3072)
]


@pytest.mark.throughput
@pytest.mark.parametrize("concurrency", SHORT)
def test_throughput(
    endpoint: Endpoint,
    concurrency: int,
    bench_settings: BenchSettings,
    record_measurement: RecordMeasurement,
    progress: Callable[[str], None],
) -> None:
    measure_setting(
        endpoint, bench_settings, record_measurement, "throughput", concurrency, None, progress
    )


@pytest.mark.long_prompt
@pytest.mark.parametrize(("prompt_tokens", "concurrency"), LONG)
def test_long_prompt(
    endpoint: Endpoint,
    prompt_tokens: int,
    concurrency: int,
    bench_settings: BenchSettings,
    record_measurement: RecordMeasurement,
    progress: Callable[[str], None],
) -> None:
    measure_setting(
        endpoint,
        bench_settings,
        record_measurement,
        "long_prompt",
        concurrency,
        prompt_tokens,
        progress,
    )


@pytest.mark.verdict
@pytest.mark.parametrize(("kind", "prompt_tokens", "concurrency"), SETTINGS)
def test_throughput_ratio(
    candidate_name: str,
    kind: str,
    prompt_tokens: int | None,
    concurrency: int,
    judge_throughput_ratio: Callable[..., Any],
) -> None:
    judge_throughput_ratio(kind, concurrency=concurrency, prompt_tokens=prompt_tokens)
