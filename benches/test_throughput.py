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

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pytest_modelsweep.cost import cost_stats, costs_of
from pytest_modelsweep.errors import MeasurementError
from pytest_modelsweep.fixtures import RecordMeasurement
from pytest_modelsweep.options import MIN_AUTO_REPEATS
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.slo import goodput_stats
from pytest_modelsweep.state import BenchSettings
from pytest_modelsweep.stats import log_mean_interval
from pytest_modelsweep.workloads.contention import (
    ContentionMeter,
    coefficient_of_variation,
    log_half_width,
)
from pytest_modelsweep.workloads.throughput import (
    OUTPUT_TOKENS,
    ThroughputResult,
    make_tokenizer,
    measure_window,
)

TICK_S = 30.0
"""Seconds between the progress lines of a long repeat."""
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
    progress: Callable[[str], None] | None = None,
) -> None:
    timed = settings.timed_requests or max(4, 2 * concurrency)
    tokenizer = make_tokenizer(endpoint)
    auto = settings.repeats is None
    planned = settings.repeats_max if settings.repeats is None else settings.repeats
    rule = (f"auto: half-width ≤ {settings.repeats_target:.0%} or {planned} repeats"
            if auto else "fixed")
    label = f"c{concurrency}" if prompt_tokens is None else f"p{prompt_tokens}-c{concurrency}"
    server_pids = endpoint.server_pids()
    results: list[ThroughputResult] = []
    windows: list[dict[str, Any]] = []
    values: list[float] = []
    for repeat in range(planned):
        meter = ContentionMeter(server_pids, max_other_cores=settings.contended_cores)
        with ticker(progress, f"{benchmark} {endpoint.model.name} {label}: repeat "
                              f"{repeat + 1}", meter):
            result = measure_window(
                endpoint, benchmark=benchmark, concurrency=concurrency,
                prompt_tokens=prompt_tokens, repeat=repeat, run_id=settings.run_id,
                timed_requests=timed, timeout_s=settings.request_timeout_s,
                idle_timeout_s=settings.idle_timeout_s, tokenizer=tokenizer, meter=meter,
            )
        results.append(result)
        windows.append(meter.result)
        values.append(result.output_tokens_per_s)
        if progress is not None:
            progress(repeat_line(benchmark, endpoint.model.name, label, repeat, planned, auto,
                                 values, meter.result))
        if auto and (result.violations or (
                len(values) >= MIN_AUTO_REPEATS
                and log_half_width(values) <= settings.repeats_target)):
            break
    requests: list[dict[str, Any]] = []
    for repeat, result in enumerate(results):
        requests += [{**record.to_dict(), "repeat": repeat} for record in result.records]
    cv = coefficient_of_variation(values)
    contended = sum(1 for w in windows if w["contended"])
    mean = sum(values) / len(values)
    rate_interval = log_mean_interval(values)
    repeats = [{**r.as_stats(), "contention": w} for r, w in zip(results, windows)]
    stats: dict[str, Any] = {
        "repeat_values": values, "repeats": repeats, "cv": cv,
        "unstable": cv is not None and cv > settings.unstable_cv,
        "unstable_cv_limit": settings.unstable_cv,
        "contended": contended > 0, "contended_windows": contended, "repeats_rule": rule,
    }
    if rate_interval is not None:
        stats["output_tokens_per_s_interval"] = list(rate_interval)
    if settings.slo is not None:
        goodputs = [r.goodput(settings.slo) for r in results]
        for window, goodput in zip(repeats, goodputs):
            window.update(goodput.as_stats())
        stats.update(goodput_stats(settings.slo, goodputs))
    if settings.pricing is not None:
        for window, cost in zip(repeats, costs_of(settings.pricing.usd_per_hour, values)):
            window["usd_per_million_output_tokens"] = cost
        stats.update(cost_stats(settings.pricing, mean, rate_interval))
    record_measurement(
        benchmark,
        mean,
        "tokens/s",
        sum(r.completed for r in results),
        params={"concurrency": concurrency, "prompt_tokens": prompt_tokens,
                "output_tokens": OUTPUT_TOKENS, "timed_requests": timed,
                "repeats": len(results)},
        stats=stats,
        requests=requests,
        endpoint=endpoint,
    )
    problems = [f"repeat {i}: {v}" for i, r in enumerate(results) for v in r.violations]
    if problems:
        raise MeasurementError("; ".join(problems[:10]))


@contextlib.contextmanager
def ticker(
    progress: Callable[[str], None] | None, what: str, meter: ContentionMeter,
    every_s: float = TICK_S,
) -> Iterator[None]:
    """While a repeat runs, a line every ``every_s`` seconds with others' CPU use so far."""
    if progress is None:
        yield
        return
    done = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        while not done.wait(every_s):
            elapsed = f"{what}: running {time.monotonic() - started:.0f} s"
            if not meter.started:
                progress(f"{elapsed}, warming up")
                continue
            other = meter.read().get("other_cpu_cores")
            busy = "unknown" if other is None else f"{other:.2f} cores"
            progress(f"{elapsed}, others' CPU in the timed window so far: {busy}")

    thread = threading.Thread(target=tick, name="throughput-ticker", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def repeat_line(
    benchmark: str, model: str, label: str, repeat: int, planned: int, auto: bool,
    values: list[float], window: dict[str, Any],
) -> str:
    """E.g. ``throughput smollm2-135m c16: repeat 2/3, 231.4 tokens/s, CV so far 4.1%,
    contended: no``."""
    cv = coefficient_of_variation(values)
    of = f"≤{planned} (auto)" if auto else str(planned)
    other = window.get("other_cpu_cores")
    if window.get("contended") is None:
        busy = "unknown"
    elif window["contended"]:
        steal = window.get("steal_share") or 0.0
        busy = f"yes (others {other:.2f} cores, steal {steal:.0%})"
    else:
        busy = "no"
    return (f"{benchmark} {model} {label}: repeat {repeat + 1}/{of}, {values[-1]:.1f} tokens/s, "
            f"CV so far {'n/a' if cv is None else f'{cv:.1%}'}, contended: {busy}")


@pytest.mark.throughput
@pytest.mark.parametrize("concurrency", SHORT)
def test_throughput(
    endpoint: Endpoint, concurrency: int, bench_settings: BenchSettings,
    record_measurement: RecordMeasurement, progress: Callable[[str], None],
) -> None:
    measure(endpoint, bench_settings, record_measurement, "throughput", concurrency, None,
            progress)


@pytest.mark.long_prompt
@pytest.mark.parametrize(("prompt_tokens", "concurrency"), LONG)
def test_long_prompt(
    endpoint: Endpoint, prompt_tokens: int, concurrency: int, bench_settings: BenchSettings,
    record_measurement: RecordMeasurement, progress: Callable[[str], None],
) -> None:
    measure(endpoint, bench_settings, record_measurement, "long_prompt", concurrency,
            prompt_tokens, progress)


@pytest.mark.verdict
@pytest.mark.parametrize(("kind", "prompt_tokens", "concurrency"), SETTINGS)
def test_throughput_ratio(
    candidate_name: str, kind: str, prompt_tokens: int | None, concurrency: int,
    judge_throughput_ratio: Callable[..., Any],
) -> None:
    judge_throughput_ratio(kind, concurrency=concurrency, prompt_tokens=prompt_tokens)
