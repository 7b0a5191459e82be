"""The throughput workload's windows: N in flight, checked numbers.

A window sends ``/v1/completions`` requests whose prompts share no prefix (:mod:`.prompts`),
each generating exactly ``max_tokens`` = ``min_tokens`` (``ignore_eos``). The numbers follow
``vllm bench serve``: output tokens/s from first start to last end; TTFT to the first text
chunk; TPOT, ITL, E2E to ``[DONE]``; numpy's percentiles; then the window is checked against
the server's own counters (:func:`summarize`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..client import Guard, InFlight, StreamOutcome, stream_requests_detailed
from ..client.counters import METRICS_TIMEOUT_S, CounterKind, fetch_metrics, find_counter
from ..core.errors import EndpointError
from ..core.measurements import Contention, Latency, ServerMetricsWindow, ThroughputWindow
from ..core.options import DEFAULTS, default_timed_requests
from ..core.records import ApiRequest, RequestRecord
from ..core.secrets import Credentials
from ..core.slo import Goodput, Slo, window_goodput
from ..serving.endpoint import Endpoint
from ..serving.server_metrics import DEFAULT_INTERVAL_S, MetricsSampler
from .prompts import ServerTokenizer, WindowPrompts, draw_window_prompts

OVERDUE_REPORT_S = 30.0
"""Seconds between a window's progress lines about requests still waiting for bytes."""

FIDELITY_RANGE = (0.99, 1.01)
"""Our completion tokens ÷ the server's generated-tokens counter delta must be in here."""


def throughput_requests(
    prompts: Sequence[str], *, output_tokens: int = 256, id_prefix: str = "throughput"
) -> list[ApiRequest]:
    """Completions requests that each generate exactly ``output_tokens`` tokens."""
    return [
        ApiRequest(
            item_id=f"{id_prefix}-{i}",
            path="/v1/completions",
            payload={
                "prompt": prompt,
                "max_tokens": output_tokens,
                "min_tokens": output_tokens,
                "ignore_eos": True,
                "temperature": 0,
            },
        )
        for i, prompt in enumerate(prompts)
    ]


WARMUP_OUTPUT_TOKENS = 16
"""Tokens a warm-up request generates: enough to take the first-request costs (connections,
first batches, lazy allocations) out of the timed window."""


def window_requests(
    prompts: WindowPrompts, *, output_tokens: int, label: str
) -> tuple[list[ApiRequest], list[ApiRequest]]:
    """A window's warm-up requests (:data:`WARMUP_OUTPUT_TOKENS` tokens each, at most) and its
    timed ones (``output_tokens`` each)."""
    warmup = throughput_requests(
        prompts.warmup,
        output_tokens=min(output_tokens, WARMUP_OUTPUT_TOKENS),
        id_prefix=f"warmup-{label}",
    )
    return warmup, throughput_requests(
        prompts.timed, output_tokens=output_tokens, id_prefix=f"timed-{label}"
    )


# --------------------------------------------------------------------------- statistics
def latency_ms(values_s: Sequence[float]) -> Latency:
    """Mean and numpy's percentiles of one latency's values in seconds, as the record of it
    in milliseconds (NaN when there are no values)."""
    if not values_s:
        return Latency()
    arr = np.asarray(values_s, dtype=float)
    p50, p90, p99 = (float(v) * 1e3 for v in np.percentile(arr, [50, 90, 99]))
    return Latency(float(arr.mean()) * 1e3, p50, p90, p99, len(values_s))


def tpot(record: RequestRecord) -> float | None:
    """vLLM's time per output token: (E2E − TTFT) / (output tokens − 1)."""
    ttft = record.ttft
    tokens = record.completion_tokens
    if ttft is None or tokens is None or tokens < 2:
        return None
    return (record.latency - ttft) / (tokens - 1)


def itls(record: RequestRecord) -> list[float]:
    """Gaps between consecutive text chunks (the first chunk's wait is TTFT, not ITL)."""
    times = record.token_times
    return [b - a for a, b in itertools.pairwise(times)]


# --------------------------------------------------------------------------- result
@dataclass(frozen=True)
class ThroughputResult:
    """One timed window as measured: its ``figures`` as a throughput measurement records them
    (latencies in ms, a line for each rule :func:`summarize` found broken; an open-loop
    window's arrivals and saturation) and its request records."""

    figures: ThroughputWindow
    records: list[RequestRecord] = field(default_factory=list)

    @property
    def output_tokens_per_s(self) -> float:
        return self.figures.output_tokens_per_s

    @property
    def violations(self) -> list[str]:
        """The rules' violations, and an open-loop window's degenerate reason."""
        loop = self.figures.open_loop
        return [*self.figures.violations, *([loop.degenerate] if loop and loop.degenerate else [])]

    def goodput(self, slo: Slo) -> Goodput:
        """This window's goodput under ``slo``: its own request records (failed ones
        included, never good) over its duration, the span output tokens/s uses."""
        records = (record.to_dict() for record in self.records)
        return window_goodput(records, slo, self.figures.duration_s)

    def window(self, contention: Contention | None = None) -> ThroughputWindow:
        """The window as a throughput measurement records it, with ``contention`` if known."""
        return replace(self.figures, contention=contention or Contention())


def summarize(
    outcomes: Sequence[StreamOutcome],
    *,
    concurrency: int,
    prompt_tokens: int,
    output_tokens: int,
    server_kind: str,
    counters_before: dict[str, float],
    counters_after: dict[str, float],
    bos_tokens: int = 0,
    warmup: Sequence[StreamOutcome] = (),
    prompt_tokens_each: Sequence[int] | None = None,
    no_cache: bool = True,
    server: ServerMetricsWindow | None = None,
) -> ThroughputResult:
    """Statistics and violations of a timed window from its outcomes and counters: every
    request succeeds, produces exactly ``output_tokens`` and sends ``prompt_tokens`` + BOS;
    our completion tokens ÷ the server's lie in :data:`FIDELITY_RANGE`; no prefix-cache hit
    (unless ``no_cache`` is False)."""
    records = [o.record for o in outcomes]
    ok = [r for r in records if r.error is None]
    duration = (max(r.end for r in records) - min(r.start for r in records)) if records else 0.0
    ours = sum(r.completion_tokens or 0 for r in records)
    name, after = find_counter(server_kind, "generated", counters_after)
    server_generated = after - find_counter(server_kind, "generated", counters_before)[1]
    cached_delta = _delta(server_kind, "cached", counters_before, counters_after)
    prompt_delta = _delta(server_kind, "prompt", counters_before, counters_after)
    fidelity = ours / server_generated if server_generated > 0 else float("nan")
    reported_cached = sum(o.cached_tokens or 0 for o in outcomes)

    violations = [
        f"warm-up request {i} failed: {o.record.error}"
        for i, o in enumerate(warmup)
        if o.record.error is not None
    ]
    bos_note = f" ({prompt_tokens} + {bos_tokens} BOS the server adds)" if bos_tokens else ""
    for i, record in enumerate(records):
        if record.error is not None:
            violations.append(f"request {i} failed: {record.error}")
            continue
        if record.completion_tokens is None:
            violations.append(
                f"request {i} reported no usage (the server ignored stream_options.include_usage)"
            )
        elif record.completion_tokens != output_tokens:
            violations.append(
                f"request {i} produced {record.completion_tokens} of "
                f"{output_tokens} tokens (finish_reason={record.finish_reason})"
            )
        want_prompt = (
            prompt_tokens if prompt_tokens_each is None else prompt_tokens_each[i]
        ) + bos_tokens
        if record.prompt_tokens is not None and record.prompt_tokens != want_prompt:
            violations.append(
                f"request {i} sent {record.prompt_tokens} prompt tokens, expected "
                f"{want_prompt}{bos_note}"
            )
        cached = outcomes[i].cached_tokens
        if cached and no_cache:
            violations.append(f"request {i} reused {cached} cached prompt tokens, expected 0")
    low, high = FIDELITY_RANGE
    if server_generated <= 0:
        violations.append(
            f"the server's {name} did not move (delta {server_generated:g}) while "
            f"we counted {ours} completion tokens"
        )
    elif not low <= fidelity <= high:
        violations.append(
            f"fidelity {fidelity:.4f} outside {low}-{high}: we counted {ours} "
            f"completion tokens, the server's {name} moved by {server_generated:g}"
        )
    if no_cache and cached_delta is not None and cached_delta > 0:
        violations.append(
            f"the server's prefix cache reused {cached_delta:g} prompt tokens in "
            "the window, expected 0 (unique prompts, no template)"
        )

    ttfts = [r.ttft for r in ok if r.ttft is not None]
    tpots = [t for t in (tpot(r) for r in ok) if t is not None]
    gaps = [g for r in ok for g in itls(r)]
    shared = sum(max(0, (r.completion_tokens or 0) - len(r.token_times)) for r in ok)
    figures = ThroughputWindow(
        concurrency=concurrency,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        duration_s=duration,
        completed=len(ok),
        output_tokens_per_s=ours / duration if duration > 0 else 0.0,
        requests_per_s=len(ok) / duration if duration > 0 else 0.0,
        ttft=latency_ms(ttfts),
        tpot=latency_ms(tpots),
        itl=latency_ms(gaps),
        e2e=latency_ms([r.latency for r in ok]),
        total_prompt_tokens=sum(r.prompt_tokens or 0 for r in records),
        total_completion_tokens=ours,
        server_generated_tokens=server_generated,
        generated_counter=name,
        fidelity=fidelity,
        server_cached_tokens=cached_delta if cached_delta is not None else float("nan"),
        reported_cached_tokens=reported_cached,
        server_prompt_tokens=prompt_delta if prompt_delta is not None else float("nan"),
        bos_tokens=bos_tokens,
        tokens_in_shared_chunks=shared,
        violations=tuple(violations),
        server_metrics=server,
    )
    return ThroughputResult(figures, records)


def _delta(
    kind: str,
    which: CounterKind,
    before: dict[str, float],
    after: dict[str, float],
) -> float | None:
    try:
        return find_counter(kind, which, after)[1] - find_counter(kind, which, before)[1]
    except EndpointError:
        return None


def settled_metrics(
    base_url: str,
    server_kind: str,
    *,
    settle_s: float = 0.1,
    max_wait_s: float = 3.0,
    credentials: Credentials | None = None,
    timeout_s: float = METRICS_TIMEOUT_S,
) -> dict[str, float]:
    """The server's counters once its generated-tokens counter stops moving (a server may book
    tokens after the last chunk): two equal reads ``settle_s`` apart, or ``max_wait_s``."""
    metrics = fetch_metrics(base_url, credentials=credentials, timeout_s=timeout_s)
    deadline = time.monotonic() + max_wait_s
    while time.monotonic() < deadline:
        time.sleep(settle_s)
        again = fetch_metrics(base_url, credentials=credentials, timeout_s=timeout_s)
        if find_counter(server_kind, "generated", again) == find_counter(
            server_kind, "generated", metrics
        ):
            return again
        metrics = again
    return metrics


@contextlib.contextmanager
def sampled_window(
    endpoint: Endpoint,
    in_flight: InFlight,
    meter: AbstractContextManager[Any] | None = None,
    *,
    sample: bool = True,
    interval_s: float = DEFAULT_INTERVAL_S,
) -> Iterator[MetricsSampler | None]:
    """Around a window's timed requests: ``meter`` and, if ``sample``, the server's
    ``/metrics`` every ``interval_s`` with the client's ``in_flight`` count; yields the
    sampler (its ``window`` set once the window ends), None when not sampling."""
    sampler = (
        MetricsSampler(
            endpoint.base_url,
            endpoint.server_kind,
            interval_s=interval_s,
            credentials=endpoint.credentials,
            in_flight=lambda: in_flight.now,
        )
        if sample
        else None
    )
    with (
        meter if meter is not None else contextlib.nullcontext(),
        sampler if sampler is not None else contextlib.nullcontext(),
    ):
        yield sampler


def run_throughput(
    endpoint: Endpoint,
    *,
    concurrency: int,
    prompt_tokens: int | None,
    output_tokens: int = 256,
    timed_requests: int,
    warmup_requests: int,
    seed: int,
    timeout_s: float,
    idle_timeout_s: float = DEFAULTS.idle_timeout,
    tokenizer: ServerTokenizer | None = None,
    progress: Callable[[str], None] | None = None,
    meter: AbstractContextManager[Any] | None = None,
    user_prompts: Sequence[str] | None = None,
    unique_prefixes: bool = True,
    server_metrics: bool = True,
) -> ThroughputResult:
    """Warm up, read the counters, run the timed window with N in flight (``meter`` and
    :func:`sampled_window` around it), read them again. ``user_prompts``: these texts instead
    of drawn exact-length ones; ``unique_prefixes``: each with a distinct lead word."""
    warmup = max(warmup_requests, concurrency)
    prompts = draw_window_prompts(
        endpoint,
        warmup=warmup,
        timed=timed_requests,
        prompt_tokens=prompt_tokens,
        seed=seed,
        tokenizer=tokenizer,
        user_prompts=user_prompts,
        unique_prefixes=unique_prefixes,
    )
    label = (
        f"c{concurrency}-p{prompts.length}-o{output_tokens}"
        if user_prompts is None
        else f"c{concurrency}-user-o{output_tokens}"
    )
    warm_reqs, timed_reqs = window_requests(prompts, output_tokens=output_tokens, label=label)

    def overdue(waiting: int, seconds: float) -> None:
        if progress is not None:
            progress(f"{endpoint.model.name} {label}: {waiting} request(s) waiting {seconds:.0f} s")

    guard = Guard(
        idle_timeout_s=idle_timeout_s,
        credentials=endpoint.credentials,
        breaker=endpoint.breaker,
        on_wait=overdue,
        report_every_s=OVERDUE_REPORT_S,
    )

    async def stream(
        reqs: list[ApiRequest],
        gauge: InFlight | None = None,
    ) -> list[StreamOutcome]:
        return await stream_requests_detailed(
            endpoint.v1,
            endpoint.served_name,
            reqs,
            concurrency,
            timeout_s=timeout_s,
            guard=guard,
            in_flight=gauge,
        )

    warm = asyncio.run(stream(warm_reqs))
    creds, metrics_s = endpoint.credentials, min(timeout_s, METRICS_TIMEOUT_S)
    before = settled_metrics(
        endpoint.base_url, endpoint.server_kind, credentials=creds, timeout_s=metrics_s
    )
    gauge = InFlight()
    with sampled_window(endpoint, gauge, meter, sample=server_metrics) as sampler:
        timed = asyncio.run(stream(timed_reqs, gauge))
    after = settled_metrics(
        endpoint.base_url, endpoint.server_kind, credentials=creds, timeout_s=metrics_s
    )
    return summarize(
        timed,
        concurrency=concurrency,
        prompt_tokens=prompts.length,
        output_tokens=output_tokens,
        server_kind=endpoint.server_kind,
        counters_before=before,
        counters_after=after,
        bos_tokens=prompts.bos,
        warmup=warm,
        prompt_tokens_each=prompts.each,
        no_cache=prompts.no_cache,
        server=None if sampler is None else sampler.window,
    )


OUTPUT_TOKENS = 256
"""Tokens generated by every throughput request (the seed's setting)."""


def measure_window(
    endpoint: Endpoint,
    *,
    benchmark: str,
    concurrency: int,
    prompt_tokens: int | None,
    repeat: int | str,
    run_id: str,
    timed_requests: int | None,
    timeout_s: float,
    idle_timeout_s: float,
    tokenizer: ServerTokenizer,
    meter: AbstractContextManager[Any] | None = None,
    output_tokens: int = OUTPUT_TOKENS,
    user_prompts: Sequence[str] | None = None,
    unique_prefixes: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ThroughputResult:
    """One timed window of a throughput setting, as every bench and comparison measures it;
    prompts seeded by the run, the setting and ``repeat``: no two windows of a run share one;
    requests silent for :data:`OVERDUE_REPORT_S` are told to ``progress``."""
    seed = zlib.crc32(f"{run_id}/{benchmark}/{concurrency}/{prompt_tokens}/{repeat}".encode())
    return run_throughput(
        endpoint,
        concurrency=concurrency,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        timed_requests=timed_requests or default_timed_requests(concurrency),
        warmup_requests=concurrency,
        seed=seed,
        timeout_s=timeout_s,
        idle_timeout_s=idle_timeout_s,
        tokenizer=tokenizer,
        meter=meter,
        user_prompts=user_prompts,
        unique_prefixes=unique_prefixes,
        progress=progress,
    )
