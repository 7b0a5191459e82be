"""Reading the server's own counters from Prometheus text."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from support.sse_server import SseServer

from pytest_modelsweep.client.counters import (
    counter_names,
    fetch_metrics,
    find_counter,
    parse_prometheus,
)
from pytest_modelsweep.core.errors import EndpointError

VLLM_TEXT = """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-4B"} 1200.0
vllm:generation_tokens_total{engine="1",model_name="Qwen/Qwen3-4B"} 34.0
vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-4B"} 5000.0
vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-4B"} 16.0
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-4B"} 5000.0
vllm:e2e_request_latency_seconds_bucket{le="0.3",model_name="a b{c}"} 3.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="a b{c}"} 7.0
vllm:kv_cache_usage_perc{engine="0"} NaN
vllm:num_requests_running 2 1700000000000
"""

LLAMACPP_TEXT = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 6
llamacpp:prompt_tokens_cached_total 4
llamacpp:tokens_predicted_total 10
llamacpp:requests_processing 0
"""


def test_parse_sums_label_sets_and_skips_comments() -> None:
    metrics = parse_prometheus(VLLM_TEXT)
    assert metrics["vllm:generation_tokens_total"] == 1234.0
    assert metrics["vllm:prompt_tokens_total"] == 5000.0
    assert metrics["vllm:e2e_request_latency_seconds_bucket"] == 10.0  # a brace inside a label
    assert metrics["vllm:num_requests_running"] == 2.0  # the timestamp is not the value
    assert "vllm:kv_cache_usage_perc" not in metrics  # NaN is no sample
    assert not any(name.startswith("#") for name in metrics)


def test_parse_ignores_garbage_lines() -> None:
    assert parse_prometheus('\n\nnot_a_sample\nx{a="1"}\ny notanumber\nz 3\n') == {"z": 3.0}


def test_llamacpp_counters() -> None:
    metrics = parse_prometheus(LLAMACPP_TEXT)
    assert find_counter("llamacpp", "generated", metrics)[1] == 10
    assert find_counter("llamacpp", "prompt", metrics)[1] == 6
    assert find_counter("llamacpp", "cached", metrics)[1] == 4


def test_vllm_counters() -> None:
    metrics = parse_prometheus(VLLM_TEXT)
    assert find_counter("vllm", "generated", metrics)[1] == 1234
    assert find_counter("vllm", "prompt", metrics)[1] == 5000
    assert find_counter("vllm", "cached", metrics)[1] == 16


def test_names_without_total_suffix_and_older_vllm() -> None:
    metrics = {"vllm:generation_tokens": 5.0, "vllm:gpu_prefix_cache_hits_total": 2.0}
    assert find_counter("vllm", "generated", metrics) == ("vllm:generation_tokens", 5.0)
    assert find_counter("vllm", "cached", metrics)[1] == 2.0


def test_openai_kind_tries_every_known_name() -> None:
    assert find_counter("openai", "generated", parse_prometheus(LLAMACPP_TEXT))[1] == 10
    assert find_counter("openai", "generated", parse_prometheus(VLLM_TEXT))[1] == 1234
    assert "llamacpp:tokens_predicted_total" in counter_names("openai", "generated")


def test_missing_counter_names_what_to_do() -> None:
    with pytest.raises(
        EndpointError, match=r"no generated-tokens counter \(vllm:generation_tokens_total\)"
    ):
        find_counter("vllm", "generated", parse_prometheus(LLAMACPP_TEXT))


@pytest.fixture(scope="module")
def server() -> Iterator[SseServer]:
    with SseServer() as srv:
        yield srv


def test_fetch_metrics(server: SseServer) -> None:
    metrics = fetch_metrics(server.base_url + "/")
    assert find_counter("llamacpp", "generated", metrics)[1] == 0


def test_fetch_metrics_disabled_names_the_flag() -> None:
    with SseServer(metrics=False) as srv, pytest.raises(EndpointError) as info:
        fetch_metrics(srv.base_url)
    message = str(info.value)
    assert f"{srv.base_url}/metrics answered HTTP 501" in message
    assert "llama-server needs --metrics" in message


def test_fetch_metrics_no_server_names_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(EndpointError, match=rf"http://127\.0\.0\.1:{port}/metrics: ConnectError"):
        fetch_metrics(f"http://127.0.0.1:{port}", timeout_s=2)
