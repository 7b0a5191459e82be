"""Capacity under an SLO: the most concurrent requests a model serves while enough meet it.

``test_capacity`` searches the concurrency, up to the server's ``max_num_seqs``, at
which at least ``--slo-attainment`` (default 90%) of requests meet every ``--slo``
target: 1, 2, 4, ... until a step misses, then bisection down to adjacent
concurrencies. Each step is one timed window of the throughput workload (short
unique prompts, 256 tokens each, checked against the server's counters), with its
contention recorded and a progress line. One measurement: the capacity, the
figures at it (output tokens/s, goodput, $/1M output tokens when priced) and every
step. ``test_capacity_ratio`` compares a candidate's capacity with the reference's
through the two searches' brackets. Without ``--slo`` both skip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_modelsweep.core.cost import usd_per_million_output_tokens
from pytest_modelsweep.core.errors import MeasurementError
from pytest_modelsweep.core.slo import Goodput, Slo, window_goodput
from pytest_modelsweep.core.sweep import Sweep
from pytest_modelsweep.pytest.fixtures import RecordMeasurement
from pytest_modelsweep.pytest.state import BenchSettings
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.workloads.capacity import (
    NEEDS_SLO,
    CapacityBracket,
    CapacityResult,
    CapacityStep,
    find_capacity,
    server_max_concurrency,
    step_line,
)
from pytest_modelsweep.workloads.contention import ContentionMeter
from pytest_modelsweep.workloads.throughput import (
    OUTPUT_TOKENS,
    ThroughputResult,
    make_tokenizer,
    measure_window,
)


class MeasuredWindow:
    """One measured step: the throughput window, its goodput and its contention."""

    def __init__(self, result: ThroughputResult, goodput: Goodput, timed: int,
                 contention: dict[str, Any]) -> None:
        self.result = result
        self.goodput = goodput
        self.timed = timed
        self.contention = contention

    @property
    def output_tokens_per_s(self) -> float:
        return self.result.output_tokens_per_s

    @property
    def violations(self) -> list[str]:
        return self.result.violations


def timed_requests(settings: BenchSettings, concurrency: int) -> int:
    """``--timed-requests``, else 2 × concurrency, at least 4; never fewer than the
    concurrency, so that the window really has that many requests in flight."""
    return max(settings.timed_requests or max(4, 2 * concurrency), concurrency)


def search(
    endpoint: Endpoint, settings: BenchSettings, slo: Slo, max_concurrency: int,
    progress: Callable[[str], None], measured: list[tuple[CapacityStep, MeasuredWindow]],
) -> CapacityResult[MeasuredWindow]:
    """The capacity search on one endpoint; every step also lands in ``measured`` as it
    is taken (so that a window that raises still leaves the earlier ones)."""
    tokenizer = make_tokenizer(endpoint)
    server_pids = endpoint.server_pids()
    name = endpoint.model.name
    target = settings.slo_attainment
    windows: list[MeasuredWindow] = []

    def window(concurrency: int) -> tuple[Goodput, MeasuredWindow]:
        step = len(windows) + 1
        progress(f"capacity {name}: step {step}, c{concurrency}: measuring")
        meter = ContentionMeter(server_pids, max_other_cores=settings.contended_cores)
        timed = timed_requests(settings, concurrency)
        result = measure_window(
            endpoint, benchmark="capacity", concurrency=concurrency, prompt_tokens=None,
            repeat=f"step{step}", run_id=settings.run_id, timed_requests=timed,
            timeout_s=settings.request_timeout_s, idle_timeout_s=settings.idle_timeout_s,
            tokenizer=tokenizer, meter=meter,
        )
        goodput = window_goodput([r.to_dict() for r in result.records], slo, result.duration_s)
        windows.append(MeasuredWindow(result, goodput, timed, meter.result))
        return goodput, windows[-1]

    def shown(step: CapacityStep) -> None:
        measured.append((step, windows[-1]))
        contended = windows[-1].contention.get("contended")
        busy = "unknown" if contended is None else ("yes" if contended else "no")
        progress(f"{step_line(name, len(measured), step, target)}, contended: {busy}")

    try:
        return find_capacity(window, max_concurrency=max_concurrency, target=target,
                             on_step=shown)
    finally:
        tokenizer.close()


def step_stats(
    step: CapacityStep, window: MeasuredWindow, settings: BenchSettings,
) -> dict[str, Any]:
    """One step as the measurement's ``stats.steps`` lists it."""
    stats = {**step.to_dict(), "timed_requests": window.timed,
             "ttft": window.result.ttft.as_ms(), "tpot": window.result.tpot.as_ms(),
             "e2e": window.result.e2e.as_ms(), "fidelity": window.result.fidelity,
             "contention": window.contention}
    if settings.pricing is not None:
        stats["usd_per_million_output_tokens"] = usd_per_million_output_tokens(
            settings.pricing.usd_per_hour, step.output_tokens_per_s)
    return stats


def record_capacity(
    record_measurement: RecordMeasurement, endpoint: Endpoint, settings: BenchSettings,
    slo: Slo, max_concurrency: int, source: str,
    measured: list[tuple[CapacityStep, MeasuredWindow]],
    result: CapacityResult[MeasuredWindow] | None, error: str | None,
) -> None:
    """The one capacity measurement: value = the capacity; with ``error`` (the search broke
    off) the highest concurrency that passed before it, and ``stats.capacity`` null."""
    steps = [step_stats(step, window, settings) for step, window in measured]
    requests: list[dict[str, Any]] = []
    for index, (step, window) in enumerate(measured):
        requests += [{**record.to_dict(), "step": index, "concurrency": step.concurrency}
                     for record in window.result.records]
    contended = sum(1 for _, window in measured if window.contention.get("contended"))
    stats: dict[str, Any] = {
        "capacity": None if result is None else result.capacity, "steps": steps,
        "bracket": None if result is None or result.bracket is None else list(result.bracket),
        "max_concurrency_source": source,
        "contended": contended > 0, "contended_windows": contended,
    }
    at = None if result is None else result.capacity_step
    if at is not None:
        stats.update(output_tokens_per_s=at.output_tokens_per_s, goodput_rps=at.goodput_rps,
                     slo_attainment=at.slo_attainment)
        if settings.pricing is not None:
            stats["usd_per_million_output_tokens"] = usd_per_million_output_tokens(
                settings.pricing.usd_per_hour, at.output_tokens_per_s)
    if settings.pricing is not None:
        stats["pricing"] = settings.pricing.as_dict()
    reason = error if error is not None else None if result is None else result.reason
    if reason is not None:
        stats["reason"] = reason
    if error is not None:
        stats["error"] = error
    passed = [step.concurrency for step, _ in measured if step.passed]
    value = result.last_pass if result is not None else max(passed, default=0)
    record_measurement(
        "capacity", value, "concurrent requests", len(requests),
        params={"slo": slo.as_dict(), "attainment_target": settings.slo_attainment,
                "max_concurrency": max_concurrency, "output_tokens": OUTPUT_TOKENS},
        stats=stats, requests=requests, endpoint=endpoint,
    )


@pytest.mark.capacity
def test_capacity(
    request: pytest.FixtureRequest, model_name: str, sweep: Sweep,
    bench_settings: BenchSettings, record_measurement: RecordMeasurement,
    progress: Callable[[str], None],
) -> None:
    slo = bench_settings.slo
    if slo is None:
        pytest.skip(NEEDS_SLO)
    endpoint: Endpoint = request.getfixturevalue("endpoint")  # no server started to skip
    max_concurrency, source = server_max_concurrency(
        endpoint.provenance.server_settings, sweep.serving.max_num_seqs)
    measured: list[tuple[CapacityStep, MeasuredWindow]] = []
    try:
        result = search(endpoint, bench_settings, slo, max_concurrency, progress, measured)
    except Exception as error:
        if measured:  # what the clean windows before it showed, marked broken off
            record_capacity(record_measurement, endpoint, bench_settings, slo, max_concurrency,
                            source, measured, None, f"the search broke off: {error}")
        raise
    record_capacity(record_measurement, endpoint, bench_settings, slo, max_concurrency, source,
                    measured, result, result.error)
    if result.error is not None:
        raise MeasurementError(f"{model_name}: {result.error}")
    line = (f"capacity {model_name} under {slo} ({bench_settings.slo_attainment:.0%} "
            f"attainment): {result.capacity} concurrent requests, bracket "
            f"{CapacityBracket(result.last_pass, result.last_pass, result.first_fail).text()}, "
            f"{len(result.steps)} steps")
    progress(line if result.reason is None else f"{line}; {result.reason}")


@pytest.mark.verdict
@pytest.mark.capacity
def test_capacity_ratio(candidate_name: str, judge_capacity_ratio: Callable[[], Any]) -> None:
    judge_capacity_ratio()
