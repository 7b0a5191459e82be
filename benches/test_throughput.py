"""Throughput and latency, exactly as the server counted them.

Each setting runs ``--repeats`` timed windows (warm-up first) with exactly N
requests in flight, 256 generated tokens each (``ignore_eos``), prompts that
share no prefix with any other request of the run. Every window is checked
against the server's own counters; a violation fails the test after the
figures are recorded. The candidate ÷ reference ratio at each setting is a
measurement of its own, with a bootstrap interval over the repeats.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pytest

from pytest_modelsweep.errors import MeasurementError
from pytest_modelsweep.fixtures import RecordMeasurement
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.state import BenchSettings
from pytest_modelsweep.workloads.throughput import make_tokenizer, run_throughput

OUTPUT_TOKENS = 256
SHORT = [pytest.param(c, id=f"c{c}") for c in (1, 4, 16)]
LONG = [pytest.param(p, 4, id=f"p{p}-c4") for p in (1024, 3072)]
SETTINGS = [
    pytest.param("throughput", None, c, marks=pytest.mark.throughput, id=f"c{c}") for c in (1, 4, 16)
] + [
    pytest.param("long_prompt", p, 4, marks=pytest.mark.long_prompt, id=f"p{p}-c4")
    for p in (1024, 3072)
]


def measure(
    endpoint: Endpoint,
    settings: BenchSettings,
    record_measurement: RecordMeasurement,
    benchmark: str,
    concurrency: int,
    prompt_tokens: int | None,
) -> None:
    timed = settings.timed_requests or max(4, 2 * concurrency)
    tokenizer = make_tokenizer(endpoint)
    results = []
    for repeat in range(settings.repeats):
        seed = zlib.crc32(f"{settings.run_id}/{benchmark}/{concurrency}/{prompt_tokens}/{repeat}".encode())
        results.append(run_throughput(
            endpoint, concurrency=concurrency, prompt_tokens=prompt_tokens,
            output_tokens=OUTPUT_TOKENS, timed_requests=timed, warmup_requests=concurrency,
            seed=seed, timeout_s=settings.request_timeout_s,
            idle_timeout_s=settings.idle_timeout_s, tokenizer=tokenizer,
        ))
    values = [r.output_tokens_per_s for r in results]
    requests: list[dict[str, Any]] = []
    for repeat, result in enumerate(results):
        requests += [{**record.to_dict(), "repeat": repeat} for record in result.records]
    record_measurement(
        benchmark,
        sum(values) / len(values),
        "tokens/s",
        sum(r.completed for r in results),
        params={"concurrency": concurrency, "prompt_tokens": prompt_tokens,
                "output_tokens": OUTPUT_TOKENS, "timed_requests": timed,
                "repeats": len(results)},
        stats={"repeat_values": values, "repeats": [r.as_stats() for r in results]},
        requests=requests,
        endpoint=endpoint,
    )
    problems = [f"repeat {i}: {v}" for i, r in enumerate(results) for v in r.violations]
    if problems:
        raise MeasurementError("; ".join(problems[:10]))


@pytest.mark.throughput
@pytest.mark.parametrize("concurrency", SHORT)
def test_throughput(
    endpoint: Endpoint, concurrency: int, bench_settings: BenchSettings,
    record_measurement: RecordMeasurement,
) -> None:
    measure(endpoint, bench_settings, record_measurement, "throughput", concurrency, None)


@pytest.mark.long_prompt
@pytest.mark.parametrize(("prompt_tokens", "concurrency"), LONG)
def test_long_prompt(
    endpoint: Endpoint, prompt_tokens: int, concurrency: int, bench_settings: BenchSettings,
    record_measurement: RecordMeasurement,
) -> None:
    measure(endpoint, bench_settings, record_measurement, "long_prompt", concurrency,
            prompt_tokens)


@pytest.mark.verdict
@pytest.mark.parametrize(("kind", "prompt_tokens", "concurrency"), SETTINGS)
def test_throughput_ratio(
    candidate_name: str, kind: str, prompt_tokens: int | None, concurrency: int,
    judge_throughput_ratio: Callable[..., Any],
) -> None:
    judge_throughput_ratio(kind, concurrency=concurrency, prompt_tokens=prompt_tokens)
