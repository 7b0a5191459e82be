"""One throughput setting measured as every bench measures it: repeats, flags, one record
(:func:`measure_setting`; your own prompts: :func:`measure_throughput`), or two models in
pairs of windows (``--interleave``)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..api.evaluation import check_positive
from ..api.prompts import checked_prompts, prompts_digest
from ..core.cost import cost_stats, costs_of
from ..core.errors import DataError, MeasurementError
from ..core.measurements import (
    Contention,
    Interleaved,
    InterleavedWindow,
    ThroughputStats,
    ThroughputWindow,
)
from ..core.slo import goodput_stats
from .arrivals import ArrivalProcess
from .contention import ContentionMeter, coefficient_of_variation
from .openloop import DEFAULT_MAX_IN_FLIGHT, run_open_loop, window_seed
from .prompts import make_tokenizer
from .throughput import OUTPUT_TOKENS, ThroughputResult, measure_window

if TYPE_CHECKING:
    from ..core.settings import BenchSettings
    from ..serving.endpoint import Endpoint

OPEN_LOOP_WARMUP = 2
"""Closed-loop warm-up requests before each open-loop window."""


TICK_S = 30.0
"""Seconds between the progress lines of a long repeat."""


def measure_setting(
    endpoint: Endpoint,
    settings: BenchSettings,
    record_measurement: Callable[..., Any],
    benchmark: str,
    concurrency: int | None,
    prompt_tokens: int | None,
    progress: Callable[[str], None] | None = None,
    *,
    output_tokens: int = OUTPUT_TOKENS,
    user_prompts: Sequence[str] | None = None,
    unique_prefixes: bool = True,
    params: dict[str, Any] | None = None,
    arrivals: ArrivalProcess | None = None,
) -> None:
    """Measure one throughput setting over its repeats, record it, then raise MeasurementError
    on broken rules. With ``arrivals`` each window is an open loop, ``concurrency`` its cap."""
    if arrivals is None and concurrency is None:
        raise ValueError("a closed-loop setting needs a concurrency")
    cap = concurrency or DEFAULT_MAX_IN_FLIGHT
    timed = (
        settings.open_loop_timed_requests
        if arrivals is not None
        else settings.timed_requests_at(cap)
    )
    tokenizer = make_tokenizer(endpoint)
    policy = settings.repeats
    label = (f"c{cap}" if arrivals is None else f"{arrivals.rate:g}rps") + (
        "" if prompt_tokens is None else f"-p{prompt_tokens}"
    )
    shape: dict[str, Any] = {
        **(
            {}
            if user_prompts is None
            else {
                "user_prompts": len(user_prompts),
                "prompts_hash": prompts_digest(user_prompts),
                "unique_prefixes": unique_prefixes,
            }
        ),
        **(
            {}
            if arrivals is None
            else {
                "request_rate": arrivals.rate,
                "burstiness": arrivals.burstiness,
                "max_in_flight": cap,
            }
        ),
    }
    server_pids = endpoint.server_pids()
    results: list[ThroughputResult] = []
    windows: list[Contention] = []
    try:
        for repeat in range(policy.at_most):
            meter = ContentionMeter.of(server_pids, settings)
            result: ThroughputResult
            with ticker(
                progress, f"{benchmark} {endpoint.model.name} {label}: repeat {repeat + 1}", meter
            ):
                if arrivals is None:
                    result = measure_window(
                        endpoint,
                        benchmark=benchmark,
                        concurrency=cap,
                        prompt_tokens=prompt_tokens,
                        repeat=repeat,
                        run_id=settings.run_id,
                        timed_requests=timed,
                        timeout_s=settings.request_timeout_s,
                        idle_timeout_s=settings.idle_timeout_s,
                        tokenizer=tokenizer,
                        meter=meter,
                        progress=progress,
                        output_tokens=output_tokens,
                        user_prompts=user_prompts,
                        unique_prefixes=unique_prefixes,
                    )
                else:
                    result = run_open_loop(
                        endpoint,
                        arrivals=arrivals,
                        timed_requests=timed,
                        warmup_requests=OPEN_LOOP_WARMUP,
                        seed=window_seed(
                            settings.run_id, benchmark, arrivals, prompt_tokens, repeat
                        ),
                        timeout_s=settings.request_timeout_s,
                        prompt_tokens=prompt_tokens,
                        output_tokens=output_tokens,
                        idle_timeout_s=settings.idle_timeout_s,
                        max_in_flight=cap,
                        tokenizer=tokenizer,
                        meter=meter,
                        user_prompts=user_prompts,
                        unique_prefixes=unique_prefixes,
                    )
            results.append(result)
            windows.append(meter.result)
            values = [r.output_tokens_per_s for r in results]
            if progress is not None:
                progress(
                    repeat_line(
                        benchmark,
                        endpoint.model.name,
                        label,
                        policy.progress(values),
                        values,
                        meter.result,
                    )
                    + window_line(result.window())
                )
            if policy.done(values) or (policy.auto and result.violations):
                break
    finally:
        tokenizer.close()
    requests = [
        {**record.to_dict(), "repeat": repeat}
        for repeat, result in enumerate(results)
        for record in result.records
    ]
    stats = setting_stats(results, windows, settings)
    mean = sum(values) / len(values)
    record_measurement(
        benchmark,
        mean,
        "tokens/s",
        sum(r.figures.completed for r in results),
        params={
            "concurrency": concurrency,
            "prompt_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "timed_requests": timed,
            "repeats": len(results),
            **shape,
            **(params or {}),
        },
        stats=stats,
        requests=requests,
        endpoint=endpoint,
    )
    problems = [f"repeat {i}: {v}" for i, r in enumerate(results) for v in r.violations]
    if problems:
        raise MeasurementError("; ".join(problems[:10]))


def measure_throughput(
    endpoint_of: Callable[[], Endpoint],
    settings: BenchSettings,
    record_measurement: Callable[..., Any],
    benchmark: str,
    prompts: Sequence[str],
    *,
    concurrency: int,
    output_tokens: int = OUTPUT_TOKENS,
    unique_prefixes: bool = True,
    params: Mapping[str, Any] | None = None,
    rate: float | None = None,
    burstiness: float = 1.0,
    progress: Callable[[str], None] | None = None,
) -> None:
    """Your ``prompts`` as one throughput setting (:func:`measure_setting`) on the model of
    ``endpoint_of()``, asked for once the arguments are checked (a one-line DataError); with
    ``rate`` (requests/s) its windows are open loops of at most ``concurrency`` in flight."""
    check_positive(benchmark, concurrency=concurrency, output_tokens=output_tokens)
    arrivals = None
    if rate is not None:
        for number, what in ((rate, "rate (requests per second)"), (burstiness, "burstiness")):
            finite = what == "burstiness" or number != float("inf")
            if (
                isinstance(number, bool)
                or not isinstance(number, int | float)
                or not number > 0
                or not finite
            ):
                raise DataError(f"{benchmark}: {what} must be a positive number, got {number!r}")
        arrivals = ArrivalProcess(float(rate), float(burstiness))
    texts = checked_prompts(benchmark, prompts)
    measure_setting(
        endpoint_of(),
        settings,
        record_measurement,
        benchmark,
        concurrency,
        None,
        progress,
        output_tokens=output_tokens,
        user_prompts=texts,
        unique_prefixes=unique_prefixes,
        params=dict(params or {}),
        arrivals=arrivals,
    )


def setting_stats(
    results: Sequence[ThroughputResult],
    contention: Sequence[Contention],
    settings: BenchSettings,
) -> ThroughputStats:
    """The record of one setting from its repeats' windows and their contention."""
    values = [result.output_tokens_per_s for result in results]
    cv = coefficient_of_variation(values)
    contended = sum(1 for window in contention if window.contended)
    policy = settings.repeats
    rate_interval = policy.interval(values)
    repeats = [result.window(window) for result, window in zip(results, contention)]
    goodput = None
    if settings.slo is not None:
        goodputs = [result.goodput(settings.slo) for result in results]
        repeats = [replace(window, goodput=g.figures()) for window, g in zip(repeats, goodputs)]
        goodput = goodput_stats(settings.slo, goodputs)
    cost = None
    if settings.pricing is not None:
        repeats = [
            replace(window, priced=True, usd_per_million_output_tokens=usd)
            for window, usd in zip(repeats, costs_of(settings.pricing.usd_per_hour, values))
        ]
        cost = cost_stats(settings.pricing, sum(values) / len(values), rate_interval)
    return ThroughputStats(
        repeat_values=tuple(values),
        repeats=tuple(repeats),
        cv=cv,
        unstable=cv is not None and cv > settings.unstable_cv,
        unstable_cv_limit=settings.unstable_cv,
        contended=contended > 0,
        contended_windows=contended,
        repeats_rule=policy.rule,
        interval_rule=policy.interval_rule,
        interval=rate_interval,
        goodput=goodput,
        cost=cost,
    )


def measure_interleaved_setting(
    endpoints: Sequence[Endpoint],
    settings: BenchSettings,
    benchmark: str,
    setting: Mapping[str, Any],
    progress: Callable[[str], None] | None = None,
) -> Interleaved:
    """Both servers (reference, candidate) at one setting (``--interleave``), windows in pairs
    A B, B A, ..., as many as the run's ``repeats`` policy takes (of the pairs' ratios), so that
    a drift in the machine's speed hits both alike; MeasurementError when a window broke its
    rules."""
    concurrency, prompt_tokens = setting["concurrency"], setting["prompt_tokens"]
    first, second = endpoints
    names = [first.model.name, second.model.name]
    tokenizers = {e.model.name: make_tokenizer(e) for e in endpoints}
    windows: list[InterleavedWindow] = []
    violations: list[str] = []
    repeats = settings.repeats
    try:
        for pair in range(repeats.at_most):
            for endpoint in (first, second) if pair % 2 == 0 else (second, first):
                name = endpoint.model.name
                meter = ContentionMeter.of(endpoint.server_pids(), settings)
                result = measure_window(
                    endpoint,
                    benchmark=benchmark,
                    concurrency=concurrency,
                    prompt_tokens=prompt_tokens,
                    repeat=f"interleaved-{name}-{pair}",
                    run_id=settings.run_id,
                    timed_requests=settings.timed_requests,
                    timeout_s=settings.request_timeout_s,
                    idle_timeout_s=settings.idle_timeout_s,
                    tokenizer=tokenizers[name],
                    meter=meter,
                    progress=progress,
                )
                windows.append(
                    InterleavedWindow(name, pair, result.output_tokens_per_s, meter.result)
                )
                violations += [f"{name} pair {pair}: {v}" for v in result.violations]
            reference_values, candidate_values = (  # each side's tokens/s, in pair order
                [w.output_tokens_per_s for w in windows if w.model == name] for name in names
            )
            ratios = [y / x if x > 0 else 0.0 for x, y in zip(reference_values, candidate_values)]
            if progress is not None:
                progress(
                    f"interleaved {benchmark} c{concurrency}: pair "
                    f"{repeats.progress(ratios)}, {names[1]} ÷ {names[0]} {ratios[-1]:.2f}x"
                )
            if repeats.done(ratios) or (repeats.auto and violations):
                break
    finally:
        for tokenizer in tokenizers.values():
            tokenizer.close()
    if violations:
        raise MeasurementError(
            "interleaved windows broke their rules: " + "; ".join(violations[:10])
        )
    return Interleaved(tuple(windows), tuple(candidate_values), tuple(reference_values))


@contextlib.contextmanager
def ticker(
    progress: Callable[[str], None] | None,
    what: str,
    meter: ContentionMeter,
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
            other = meter.read().other_cpu_cores
            busy = "unknown" if other is None else f"{other:.2f} cores"
            progress(f"{elapsed}, others' CPU in the timed window so far: {busy}")

    thread = threading.Thread(target=tick, name="throughput-ticker", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def window_line(window: ThroughputWindow) -> str:
    """What a progress line adds for a window: an open loop's achieved rate, the server's
    queue when it queued (``""`` for neither)."""
    parts = []
    loop = window.open_loop
    if loop is not None:
        saturation = loop.saturation
        achieved = "n/a" if saturation.achieved_rps is None else f"{saturation.achieved_rps:.3g}"
        offered = "n/a" if saturation.offered_rps is None else f"{saturation.offered_rps:.3g}"
        parts.append(
            f"achieved {achieved} of {offered} req/s" + (", saturated" if loop.saturated else "")
        )
    server = window.server_metrics
    flag = None if server is None else server.summary.flag_line()
    if flag is not None:
        parts.append(flag)
    return "".join(f"; {part}" for part in parts)


def repeat_line(
    benchmark: str,
    model: str,
    label: str,
    of: str,
    values: list[float],
    window: Contention,
) -> str:
    """E.g. ``throughput smollm2-135m c16: repeat 2/3, 231.4 tokens/s, CV so far 4.1%,
    contended: no`` (``of``: the repeat policy's ``2/3``, ``2/≤10 (auto)``)."""
    cv = coefficient_of_variation(values)
    busy = (
        "unknown"
        if window.contended is None
        else f"yes (others {window.other_cpu_cores or 0.0:.2f} cores, "
        f"steal {window.steal_share or 0.0:.0%})"
        if window.contended
        else "no"
    )
    return (
        f"{benchmark} {model} {label}: repeat {of}, {values[-1]:.1f} tokens/s, "
        f"CV so far {'n/a' if cv is None else f'{cv:.1%}'}, contended: {busy}"
    )
