"""One open-loop window: requests arrive at a rate, whatever the server's pace.

Request i is sent at its scheduled time from an :class:`~.arrivals.ArrivalProcess` however
many are in flight, its latencies run from that *scheduled* time (no coordinated omission);
otherwise the window is the throughput workload's (:func:`~.throughput.summarize`). It is
*saturated* when its achieved rate (:func:`kept_up_rate`) is more than ``tolerance`` below the
offered one or a request found the ``max_in_flight`` cap, *degenerate* (no figure; a
violation) as :func:`degenerate_reason` says (docs/open-loop.md).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from ..client import (
    Guard,
    InFlight,
    OpenLoopRun,
    StreamOutcome,
    stream_open_loop,
    stream_requests_detailed,
)
from ..core.measurements import OpenLoop, Saturation
from ..core.options import DEFAULTS
from ..serving.endpoint import Endpoint
from ..serving.server_metrics import DEFAULT_INTERVAL_S
from .arrivals import ArrivalProcess, offered_rate
from .prompts import ServerTokenizer, draw_window_prompts
from .throughput import (
    OUTPUT_TOKENS,
    ThroughputResult,
    latency_ms,
    sampled_window,
    settled_metrics,
    summarize,
    window_requests,
)

DEFAULT_SATURATION_TOLERANCE = 0.10
"""How far the achieved rate may fall below the offered one before a window is saturated."""

DEFAULT_MAX_IN_FLIGHT = 256
"""The client's cap on open requests; a request that finds it reached marks saturation."""

PREOPEN_CONNECTIONS = 16
"""Keep-alive connections opened before a window's clock starts (more are opened on need)."""


def kept_up_rate(sends: Sequence[float], ends: Sequence[float]) -> float | None:
    """Completions per second against the schedule: the offered rate × slope(sends) ÷
    slope(ends), least-squares slopes of the sorted times on their rank; None for fewer
    than three or times all at once."""
    if len(sends) != len(ends):
        raise ValueError(f"{len(sends)} send times but {len(ends)} end times")
    if len(sends) < 3:
        return None
    order = np.arange(len(sends), dtype=float)
    send_slope, end_slope = (
        float(np.polyfit(order, np.sort(np.asarray(times, dtype=float)), 1)[0])
        for times in (sends, ends)
    )
    offered = offered_rate(sorted(sends))
    if offered is None or send_slope <= 0 or end_slope <= 0:
        return None
    return offered * send_slope / end_slope


def sent_rate(run: OpenLoopRun) -> float | None:
    """The rate the client began its requests at (:func:`kept_up_rate` of due and send times)."""
    sent = [
        (due, o.sent_at) for o, due in zip(run.outcomes, run.scheduled) if o.sent_at is not None
    ]
    return kept_up_rate([due for due, _ in sent], [at for _, at in sent])


def degenerate_reason(
    requests: int,
    completed: int,
    offered_rps: float | None,
    sent_rps: float | None,
    tolerance: float,
    *,
    achieved: bool = True,
) -> str | None:
    """Why a window supports no figure: its schedule offers no rate (``offered_rps`` None:
    fewer than two requests, or every one due at once), fewer than half its ``requests``
    finished, no rate was achieved (``achieved`` false: fewer than three finished, or all at
    once), or the client sent (``sent_rps``, None when capped) more than ``tolerance`` below
    ``offered_rps``."""
    if offered_rps is None:
        return (
            f"degenerate: its {requests} timed "
            f"{'requests offer' if requests != 1 else 'request offers'} no rate (fewer "
            "than two, or every one due at once); time more requests "
            "(--timed-requests) or give a --burstiness nearer 1"
        )
    if 2 * completed < requests:
        return (
            f"degenerate: only {completed} of {requests} requests finished, so the window "
            "shows failures, not a rate"
        )
    if not achieved:
        return (
            f"degenerate: its {completed} finished requests show no achieved rate (fewer "
            "than three, or all at once); time more requests (--timed-requests)"
        )
    if offered_rps and sent_rps is not None and sent_rps < offered_rps * (1 - tolerance):
        return (
            f"degenerate: the client began requests at {sent_rps:.3g} req/s of "
            f"{offered_rps:.3g} offered ({1 - sent_rps / offered_rps:.0%} behind, no cap "
            "reached): its own lag, not the server, set the pace; give it a free core or "
            "a lower --request-rate"
        )
    return None


def run_open_loop(
    endpoint: Endpoint,
    *,
    arrivals: ArrivalProcess,
    timed_requests: int,
    warmup_requests: int,
    seed: int,
    timeout_s: float,
    prompt_tokens: int | None = None,
    output_tokens: int = OUTPUT_TOKENS,
    idle_timeout_s: float = DEFAULTS.idle_timeout,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    saturation_tolerance: float = DEFAULT_SATURATION_TOLERANCE,
    tokenizer: ServerTokenizer | None = None,
    meter: AbstractContextManager[Any] | None = None,
    server_metrics: bool = True,
    metrics_interval_s: float = DEFAULT_INTERVAL_S,
    user_prompts: Sequence[str] | None = None,
    unique_prefixes: bool = True,
) -> ThroughputResult:
    """Warm up (closed loop), read the counters, send the timed requests on their schedule
    (``meter`` and the metrics sampler around them only), read the counters, summarise."""
    if not 0.0 <= saturation_tolerance < 1.0:
        raise ValueError(
            f"the saturation tolerance must be a share in [0, 1), got {saturation_tolerance!r}"
        )
    prompts = draw_window_prompts(
        endpoint,
        warmup=warmup_requests,
        timed=timed_requests,
        prompt_tokens=prompt_tokens,
        seed=seed,
        tokenizer=tokenizer,
        user_prompts=user_prompts,
        unique_prefixes=unique_prefixes,
    )
    label = f"open-{arrivals.rate:g}rps-p{prompts.length}-o{output_tokens}"
    warm_reqs, timed_reqs = window_requests(prompts, output_tokens=output_tokens, label=label)
    offsets = arrivals.offsets(timed_requests, seed)
    guard = Guard(
        idle_timeout_s=idle_timeout_s, credentials=endpoint.credentials, breaker=endpoint.breaker
    )
    warm: list[StreamOutcome] = []
    if warm_reqs:
        warm = asyncio.run(
            stream_requests_detailed(
                endpoint.v1,
                endpoint.served_name,
                warm_reqs,
                min(len(warm_reqs), max_in_flight),
                timeout_s=timeout_s,
                guard=guard,
            )
        )
    creds = endpoint.credentials
    before = settled_metrics(endpoint.base_url, endpoint.server_kind, credentials=creds)
    gauge = InFlight()
    with sampled_window(
        endpoint, gauge, meter, sample=server_metrics, interval_s=metrics_interval_s
    ) as sampler:
        run: OpenLoopRun = asyncio.run(
            stream_open_loop(
                endpoint.v1,
                endpoint.served_name,
                timed_reqs,
                offsets,
                max_in_flight=max_in_flight,
                timeout_s=timeout_s,
                preopen=min(PREOPEN_CONNECTIONS, max_in_flight),
                guard=guard,
                in_flight=gauge,
            )
        )
    after = settled_metrics(endpoint.base_url, endpoint.server_kind, credentials=creds)
    result = summarize(
        run.outcomes,
        concurrency=run.peak_in_flight,
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
    done = [r for r in result.records if r.error is None]  # the rate they completed at:
    saturation = Saturation(
        offered_rate(offsets),
        kept_up_rate([r.start for r in done], [r.end for r in done]),
        saturation_tolerance,
        run.capped,
        max_in_flight,
    )
    degenerate = degenerate_reason(
        len(offsets),
        result.figures.completed,
        saturation.offered_rps,
        None if run.capped else sent_rate(run),
        saturation_tolerance,
        achieved=saturation.achieved_rps is not None,
    )
    ramp = arrivals.ramp_up
    loop = OpenLoop(
        rate=arrivals.rate,
        burstiness=arrivals.burstiness,
        ramp_up=None if ramp is None else asdict(ramp),
        describe=arrivals.describe(),
        seed=seed,
        saturation=saturation,
        peak_in_flight=run.peak_in_flight,
        send_lag=latency_ms(run.send_lags),
        degenerate=degenerate,
    )
    return replace(result, figures=replace(result.figures, open_loop=loop))


def window_seed(
    run_id: str,
    benchmark: str,
    arrivals: ArrivalProcess,
    prompt_tokens: int | None,
    repeat: int | str,
) -> int:
    """The seed of one window's prompts and send times, from run, setting and repeat."""
    key = (
        f"{run_id}/{benchmark}/open/{arrivals.rate:g}/{arrivals.burstiness:g}/"
        f"{prompt_tokens}/{repeat}"
    )
    return zlib.crc32(key.encode())
