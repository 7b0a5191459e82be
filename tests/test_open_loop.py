"""Open-loop windows and the rate sweep, against the loopback server (no coordinated omission).

The fake server here has a capacity: ``slots`` requests generate at once and each token
of each is paced ``per_token_s_per_inflight × (requests generating)`` seconds, so it
completes ``1 / (base × tokens)`` requests per second however many it runs, and
whatever arrives faster waits in its queue: service time grows with the queue.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from support.endpoints import endpoint_at
from support.sse_server import SseServer

from pytest_modelsweep.client import InFlight, stream_open_loop
from pytest_modelsweep.core.measurements import (
    Contention,
    StepOutcome,
    ThroughputStats,
    ThroughputWindow,
)
from pytest_modelsweep.core.slo import Slo
from pytest_modelsweep.workloads.arrivals import ArrivalProcess
from pytest_modelsweep.workloads.openloop import (
    Saturation,
    degenerate_reason,
    kept_up_rate,
    run_open_loop,
)
from pytest_modelsweep.workloads.slo_search import RATE_POLICY, Knob, MeasuredWindow, find_capacity
from pytest_modelsweep.workloads.throughput import (
    ThroughputResult,
    run_throughput,
    throughput_requests,
)

TOKENS = 16
BASE_S = 0.002
SLOTS = 4
CAPACITY_RPS = 1 / (BASE_S * TOKENS)  # 31.25 requests/s


def queueing_server() -> SseServer:
    return SseServer(per_token_s_per_inflight=BASE_S, slots=SLOTS)


def open_window(srv: SseServer, rate: float, requests: int, **kw: object) -> ThroughputResult:
    args: dict[str, object] = {
        "arrivals": ArrivalProcess(rate),
        "timed_requests": requests,
        "warmup_requests": 2,
        "seed": 11,
        "timeout_s": 30,
        "output_tokens": TOKENS,
    }
    args.update(kw)
    return run_open_loop(endpoint_at(srv.base_url), **args)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the runner


def test_requests_are_sent_on_schedule_whatever_is_in_flight() -> None:
    offsets = [0.05 * i for i in range(8)]
    with SseServer(chunk_delay_s=0.1) as srv:  # each request takes ~0.8 s
        requests = throughput_requests([f"prompt {i}" for i in range(8)], output_tokens=8)
        gauge = InFlight()
        run = asyncio.run(
            stream_open_loop(
                srv.v1, "m", requests, offsets, max_in_flight=64, timeout_s=10, in_flight=gauge
            )
        )
        served_at_once = srv.stats.max_in_flight
    assert all(o.record.error is None for o in run.outcomes)
    assert served_at_once >= 5 and run.peak_in_flight >= 5 and gauge.now == 0
    assert run.capped == 0
    for outcome, due, offset in zip(run.outcomes, run.scheduled, offsets):
        assert due == pytest.approx(run.started + offset)
        assert outcome.record.start == due  # latencies run from the scheduled time
        # sent on time (a busy machine may be late, but not by half a request's 0.8 s)
        assert outcome.sent_at is not None and 0 <= outcome.sent_at - due < 0.4
    assert max(run.send_lags) < 0.4


def test_the_cap_is_saturation_and_the_wait_counts_in_latency() -> None:
    with SseServer(chunk_delay_s=0.05) as srv:  # ~0.25 s per request, one at a time
        requests = throughput_requests([f"prompt {i}" for i in range(4)], output_tokens=5)
        run = asyncio.run(
            stream_open_loop(srv.v1, "m", requests, [0.0] * 4, max_in_flight=1, timeout_s=10)
        )
        assert srv.stats.max_in_flight == 1
    assert run.capped == 3
    e2e = sorted(o.record.latency for o in run.outcomes)
    assert all(o.record.start == run.started for o in run.outcomes)
    # the 4th waited for three requests before it: its latency holds the wait
    assert e2e[3] > 3 * e2e[0] * 0.8
    lags = sorted(run.send_lags)  # the first sent at once, the 4th after three requests
    assert lags[0] < 0.2 and lags[3] > 0.6
    saturation = Saturation(4.0, 4.0, 0.1, run.capped, 1)
    assert saturation.saturated
    assert saturation.reason() == (
        "saturated: 3 request(s) found the client's cap of 1 in "
        "flight reached and waited for a slot"
    )


def test_runner_refuses_bad_schedules() -> None:
    requests = throughput_requests(["a b c"], output_tokens=2)
    with pytest.raises(ValueError, match="1 requests but 2 send times"):
        asyncio.run(
            stream_open_loop(
                "http://127.0.0.1:1/v1", "m", requests, [0, 1], max_in_flight=1, timeout_s=1
            )
        )
    with pytest.raises(ValueError, match="max_in_flight must be at least 1"):
        asyncio.run(
            stream_open_loop(
                "http://127.0.0.1:1/v1", "m", requests, [0], max_in_flight=0, timeout_s=1
            )
        )


# --------------------------------------------------------------------------- saturation


def poisson_sends(rate: float, n: int, seed: int) -> list[float]:
    return ArrivalProcess(rate).offsets(n, seed)


@pytest.mark.parametrize("seed", range(20))
def test_a_server_that_keeps_up_is_not_saturated_though_its_first_request_ran_alone(
    seed: int,
) -> None:
    """As the embedded Gemma at 0.29 req/s: the window's first request meets an empty server
    (5 s), every later one shares it (about 19 s, ±4 s). The first and last ends alone put
    the completions 10% behind; the slopes see a server that kept up."""
    rng = np.random.default_rng(seed)
    sends = poisson_sends(0.29, 29, seed)
    latencies = [5.0, *list(19.0 + rng.uniform(-4.0, 4.0, size=28))]
    ends = [s + lat for s, lat in zip(sends, latencies)]
    offered = (len(sends) - 1) / (sends[-1] - sends[0])
    achieved = kept_up_rate(sends, ends)
    assert achieved is not None
    assert achieved == pytest.approx(offered, rel=0.08)  # 1,000 seeds: at most 7.4% behind
    assert not Saturation(offered, achieved, 0.1, 0, 256).saturated
    by_the_ends = (len(ends) - 1) / (max(ends) - min(ends))
    assert by_the_ends < achieved  # the head start the slopes are robust to


@pytest.mark.parametrize("seed", range(5))
def test_a_queue_that_grows_is_saturation(seed: int) -> None:
    """Each request waits 0.5 s per request before it, sent one a second: the server
    completes one every 1.5 s, two thirds of the offered rate."""
    sends = poisson_sends(1.0, 40, seed)
    ends = [s + 5.0 + 0.5 * (s - sends[0]) for s in sends]
    offered = (len(sends) - 1) / (sends[-1] - sends[0])
    achieved = kept_up_rate(sends, ends)
    assert achieved == pytest.approx(offered / 1.5, rel=0.02)
    assert Saturation(offered, achieved, 0.1, 0, 256).saturated


def test_kept_up_rate_needs_three_matching_requests() -> None:
    assert kept_up_rate([0.0, 1.0], [2.0, 3.0]) is None
    assert kept_up_rate([0.0, 0.0, 0.0], [1.0, 2.0, 3.0]) is None  # sent all at once
    with pytest.raises(ValueError, match="3 send times but 2 end times"):
        kept_up_rate([0.0, 1.0, 2.0], [1.0, 2.0])


# --------------------------------------------------------------------------- a window


def test_window_below_capacity_is_clean_and_keeps_up() -> None:
    with queueing_server() as srv:
        window = open_window(srv, CAPACITY_RPS / 4, 24)
    assert window.violations == []
    figures = window.figures
    assert figures.completed == 24 and figures.total_completion_tokens == 24 * TOKENS
    assert figures.fidelity == 1.0
    assert figures.open_loop is not None
    saturation = figures.open_loop.saturation
    assert saturation.offered_rps == pytest.approx(CAPACITY_RPS / 4, rel=0.35)
    assert not saturation.saturated and saturation.reason() is None
    assert saturation.capped == 0
    # each request's start is its scheduled time (the window's seed 11)
    offsets = ArrivalProcess(CAPACITY_RPS / 4).offsets(24, 11)
    records = window.records
    assert [r.start for r in records] == pytest.approx(
        [records[0].start + o - offsets[0] for o in offsets]
    )
    server = figures.server_metrics
    assert server is not None and server.unavailable is None
    assert server.summary.running is not None and server.summary.running.max <= SLOTS
    assert server.summary.prefix_cache_hit_rate == 0.0
    stats = window.window().to_dict()
    assert stats["open_loop"]["describe"] == f"Poisson {CAPACITY_RPS / 4:g} req/s"
    assert window.window().saturated is False
    assert len(stats["server_metrics"]["samples"]) == server.summary.samples >= 2


def test_window_checks_are_the_throughput_workloads() -> None:
    with SseServer(default_fault="short:3", cached_tokens_per_request=2) as srv:
        window = open_window(srv, 50.0, 6)
    assert "request 0 produced 3 of 16 tokens (finish_reason=stop)" in window.violations
    assert "request 0 reused 2 cached prompt tokens, expected 0" in window.violations
    assert any("the server's prefix cache reused" in v for v in window.violations)


def test_a_window_whose_requests_failed_is_degenerate_flagged_and_broken() -> None:
    """No finished request: no rate. The window says so in one line, on its record and as a
    violation (its test fails, a sweep step is broken), and its setting is flagged."""
    with SseServer(default_fault="http500") as srv:
        window = open_window(srv, 50.0, 6)
    reason = "degenerate: only 0 of 6 requests finished, so the window shows failures, not a rate"
    assert window.figures.open_loop is not None and window.figures.open_loop.degenerate == reason
    assert window.violations[-1] == reason and reason not in window.figures.violations
    recorded = ThroughputWindow.from_dict(window.window().to_dict())
    assert recorded.open_loop is not None and recorded.open_loop.degenerate == reason
    assert recorded.degenerate and not recorded.saturated
    assert ThroughputStats(repeats=(recorded,)).flags == ("degenerate",)


def test_a_client_that_could_not_send_on_schedule_is_degenerate_not_the_server() -> None:
    """The client began requests 20% behind the schedule with no cap reached: its own lag set
    the pace, so the window supports no figure; within the tolerance, or capped, it does."""
    assert degenerate_reason(32, 32, 10.0, 8.0, 0.1) == (
        "degenerate: the client began requests at 8 req/s of 10 offered (20% behind, no cap "
        "reached): its own lag, not the server, set the pace; give it a free core or a lower "
        "--request-rate"
    )
    assert degenerate_reason(32, 32, 10.0, 9.5, 0.1) is None
    assert degenerate_reason(32, 32, 10.0, None, 0.1) is None  # the cap hit: saturation's
    assert degenerate_reason(32, 16, 10.0, 10.0, 0.1) is None  # half finished: a rate


@pytest.mark.timing
def test_done_when_open_loop_p99_far_above_closed_loop_at_the_same_throughput() -> None:
    """Above capacity, the open loop shows the queue a closed loop never builds. Alone
    (``timing``): both loops' throughput is the paced server's capacity in real time."""
    with queueing_server() as srv:
        closed = run_throughput(
            endpoint_at(srv.base_url),
            concurrency=SLOTS,
            prompt_tokens=None,
            output_tokens=TOKENS,
            timed_requests=64,
            warmup_requests=2,
            seed=3,
            timeout_s=30,
        )
        window = open_window(srv, 2 * CAPACITY_RPS, 64)
    assert closed.violations == [] and window.violations == []
    # the same mean throughput: the server's capacity, both ways
    open_figures, closed_figures = window.figures, closed.figures
    assert closed_figures.requests_per_s == pytest.approx(CAPACITY_RPS, rel=0.25)
    assert open_figures.requests_per_s == pytest.approx(closed_figures.requests_per_s, rel=0.25)
    # ... and a p99 latency far above the closed loop's
    assert open_figures.e2e.p99_ms > 3 * closed_figures.e2e.p99_ms, (
        open_figures.e2e,
        closed_figures.e2e,
    )
    assert open_figures.ttft.p99_ms > 10 * closed_figures.ttft.p99_ms
    assert open_figures.open_loop is not None
    reason = open_figures.open_loop.saturation.reason()
    assert reason is not None and reason.startswith("saturated: achieved ")
    # the server's own metrics saw the queue the client built
    server = open_figures.server_metrics
    assert server is not None
    summary = server.summary
    assert summary.waiting is not None and summary.waiting.max > 0 and summary.queued
    assert summary.running is not None and summary.running.max == SLOTS
    line = summary.flag_line()
    assert line is not None and line.startswith("the server queued up to ")
    assert f"(running at most {SLOTS})" in line and "while the client had up to " in line


def test_done_when_the_rate_sweep_stops_at_saturation() -> None:
    slo = Slo(e2e_ms=500)
    windows: list[MeasuredWindow] = []
    with queueing_server() as srv:

        def measure(rate: float) -> tuple[object, MeasuredWindow]:
            window = open_window(srv, rate, 16, seed=int(rate * 100), saturation_tolerance=0.25)
            windows.append(MeasuredWindow.of(window, slo, Contention(), None))
            return windows[-1].goodput, windows[-1]

        result = find_capacity(
            measure,
            knob=Knob.rate(
                CAPACITY_RPS / 8,
                1000,
                growth=16,  # type: ignore[arg-type]
                resolution=20,
            ),
            target=0.75,
            policy=RATE_POLICY,
        )
    outcomes = [s.outcome for s in result.steps]
    assert outcomes == [StepOutcome.PASS, StepOutcome.SATURATED], result.steps
    assert result.error is None
    assert result.capacity == pytest.approx(CAPACITY_RPS / 8)
    assert result.bracket == (pytest.approx(CAPACITY_RPS / 8), pytest.approx(2 * CAPACITY_RPS))
    assert result.saturated_at == pytest.approx(2 * CAPACITY_RPS)
    assert result.stopped.startswith(f"saturated at {2 * CAPACITY_RPS:.3g} req/s (saturated: ")
    first = result.steps[0]
    assert first.interval is not None and first.interval.good == 16
    assert first.achieved_rps is not None and not math.isnan(first.achieved_rps)
    assert windows[1].achieved_rps is not None and windows[1].offered_rps is not None
    assert windows[1].achieved_rps < 0.75 * windows[1].offered_rps
