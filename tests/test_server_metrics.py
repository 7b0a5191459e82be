"""The /metrics sampler: series, per-window summary, absent metrics, flags, its own cost.

Against the loopback server's ``/metrics`` in llama-server's and vLLM's names, while real
streamed requests run; a server with slots queues the rest, as llama-server defers them.
"""

from __future__ import annotations

import itertools
import threading

import pytest
from support.sse_server import SseServer

from pytest_modelsweep.client import run_stream_requests
from pytest_modelsweep.client.counters import parse_prometheus
from pytest_modelsweep.serving.server_metrics import (
    MetricsSampler,
    ServerMetricsWindow,
    quantity_names,
    sampled_names,
)
from pytest_modelsweep.workloads.throughput import throughput_requests

INTERVAL = 0.05


def sampled_while_streaming(
    srv: SseServer, kind: str, requests: int, concurrency: int, during: object = None
) -> ServerMetricsWindow:
    """Stream ``requests`` with ``concurrency`` in flight while a sampler runs (told how
    many are in flight: the closed loop's ``concurrency`` until fewer remain)."""
    in_flight = [0]
    lock = threading.Lock()

    def count(_request: object, _record: object) -> None:
        with lock:
            in_flight[0] -= 1

    reqs = throughput_requests(
        [f"prompt number {i} here" for i in range(requests)], output_tokens=10
    )
    sampler = MetricsSampler(
        srv.base_url,
        kind,
        interval_s=INTERVAL,
        in_flight=lambda: min(max(in_flight[0], 0), concurrency),
    )
    with sampler:
        in_flight[0] = requests
        if callable(during):
            threading.Timer(0.15, during).start()
        records = run_stream_requests(srv.v1, "m", reqs, concurrency, timeout_s=30, on_record=count)
    assert all(r.error is None for r in records)
    assert sampler.window is not None
    return sampler.window


def test_llamacpp_queue_is_seen_and_flagged() -> None:
    with SseServer(slots=1, chunk_delay_s=0.02) as srv:  # one slot: the others are deferred
        window = sampled_while_streaming(srv, "llamacpp", requests=3, concurrency=3)
        prompt_tokens = srv.stats.prompt_tokens
    summary = window.summary
    assert window.unavailable is None and window.errors == ()
    assert summary.samples == len(window.samples) >= 5
    assert summary.running is not None and summary.running.max == 1
    assert summary.waiting is not None and summary.waiting.max == 2 and summary.queued
    assert 0 < summary.running.mean <= 1
    assert summary.preemptions is None and not summary.preempted
    assert summary.kv_cache_usage is None
    assert summary.absent == {
        "kv_cache_usage": "llamacpp:kv_cache_usage_ratio not exposed",
        "preemptions": "a llamacpp server has no such metric",
    }
    assert summary.sources["waiting"] == "llamacpp:requests_deferred"
    # the window's prompt tokens were all looked up, none found: a hit rate of 0
    assert summary.prefix_cache_queries == prompt_tokens
    assert summary.prefix_cache_hits == 0 and summary.prefix_cache_hit_rate == 0.0
    assert summary.flagged
    assert summary.flag_line() == (
        "the server queued up to 2 requests (running at most 1) "
        "while the client had up to 3 in flight"
    )
    # the series: ascending times on the interval's grid, the client's count with each
    times = [s.t for s in window.samples]
    assert times == sorted(times)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps and sum(gaps) / len(gaps) == pytest.approx(INTERVAL, rel=0.5)
    assert all(s.client_in_flight is not None for s in window.samples)
    record = window.to_dict()
    assert ServerMetricsWindow.from_dict(record) == window  # the typed record round-trips
    assert record["samples"][0]["values"]["llamacpp:requests_processing"] == 0
    cost = window.cost
    assert cost.scrapes == summary.samples and cost.failed_scrapes == 0
    assert cost.cpu_cores is not None and cost.cpu_cores < 0.05  # the bench measures < 1%


def test_vllm_names_kv_usage_preemptions_and_prefix_hits() -> None:
    with SseServer(
        metrics_style="vllm", slots=2, chunk_delay_s=0.02, cached_tokens_per_request=3
    ) as srv:

        def preempt() -> None:
            srv.stats.preemptions += 2

        window = sampled_while_streaming(srv, "vllm", requests=4, concurrency=2, during=preempt)
        computed, cached = srv.stats.prompt_tokens, srv.stats.cached_tokens
    summary = window.summary
    assert summary.absent == {}
    assert summary.sources["running"] == "vllm:num_requests_running"
    assert summary.sources["preemptions"] == "vllm:num_preemptions_total"
    assert summary.running is not None and summary.running.max == 2
    assert summary.waiting is not None and summary.waiting.max == 0 and not summary.queued
    assert summary.kv_cache_usage is not None and summary.kv_cache_usage.max == 1.0
    assert summary.preemptions == 2 and summary.preempted and summary.flagged
    assert (
        summary.flag_line() == "the server preempted 2 times while the client had up to 2 in flight"
    )
    assert summary.prefix_cache_hits == cached == 12
    assert summary.prefix_cache_hit_rate == pytest.approx(cached / (computed + cached))


def test_an_unknown_server_is_read_under_every_known_name() -> None:
    with SseServer(chunk_delay_s=0.01) as srv:
        window = sampled_while_streaming(srv, "openai", requests=2, concurrency=2)
    summary = window.summary
    assert summary.sources["running"] == "llamacpp:requests_processing"
    assert summary.sources["prefix_cache_queries"] == (
        "llamacpp:prompt_tokens_cached_total + llamacpp:prompt_tokens_total"
    )
    assert "vllm:num_requests_running" in quantity_names("openai", "running")
    assert summary.absent["preemptions"] == "vllm:num_preemptions_total not exposed"


def test_a_server_without_metrics_is_said_so_not_zero() -> None:
    with SseServer(metrics=False) as srv:
        sampler = MetricsSampler(srv.base_url, "llamacpp", interval_s=INTERVAL)
        with sampler:
            pass
    window = sampler.window
    assert window is not None and window.samples == ()
    assert window.unavailable == (
        f"no server metrics: {srv.base_url}/metrics answered HTTP 501 (metrics disabled); "
        "llama-server needs --metrics to serve them (vLLM serves /metrics by default)"
    )
    assert window.summary.running is None and window.summary.waiting is None
    assert set(window.summary.absent) >= {"running", "waiting", "kv_cache_usage"}
    assert not window.summary.flagged and window.summary.flag_line() is None


def test_a_dead_server_is_said_so() -> None:
    srv = SseServer().start()
    url = srv.base_url
    srv.stop()
    with MetricsSampler(url, "vllm", timeout_s=1) as sampler:
        pass
    assert sampler.window is not None
    assert sampler.window.unavailable is not None
    assert sampler.window.unavailable.startswith(
        f"no server metrics: cannot read the server's metrics from {url}/metrics: "
    )


def test_only_the_sampled_names_are_parsed() -> None:
    text = (
        'vllm:num_requests_running{engine="0"} 3\n'
        'vllm:e2e_request_latency_seconds_bucket{le="0.3"} 7\n'
        'vllm:num_preemptions_total{engine="0"} 2\n'
        'vllm:num_preemptions_created{engine="0"} 1.7e9\n'
    )
    only = sampled_names("vllm")
    assert "vllm:num_preemptions" in only  # both spellings of a counter match
    parsed = parse_prometheus(text, only)
    assert parsed["vllm:num_requests_running"] == 3 and parsed["vllm:num_preemptions_total"] == 2
    assert "vllm:e2e_request_latency_seconds_bucket" not in parsed
    assert parse_prometheus(text)["vllm:e2e_request_latency_seconds_bucket"] == 7
    with pytest.raises(ValueError, match="sampling interval must be > 0"):
        MetricsSampler("http://127.0.0.1:1", "vllm", interval_s=0)
