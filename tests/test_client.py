"""The benchmark client against a real loopback SSE server with faults."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from support.sse_server import SseServer

from pytest_modelsweep.client import (
    parse_completion,
    post_requests,
    run_post_requests,
    run_stream_requests,
    stream_requests,
    stream_requests_detailed,
)
from pytest_modelsweep.core.records import (
    ApiPath,
    ApiRequest,
    Completion,
    RequestRecord,
)


@pytest.fixture(scope="module")
def server() -> Iterator[SseServer]:
    with SseServer() as srv:
        yield srv


@pytest.fixture
def fresh_server() -> Iterator[SseServer]:
    with SseServer(chunk_delay_s=0.002) as srv:
        yield srv


def completion(i: int, fault: str = "", max_tokens: int = 8, **extra: Any) -> ApiRequest:
    payload: dict[str, Any] = {"prompt": f"prompt number {i}", "max_tokens": max_tokens}
    if fault:
        payload["test_fault"] = fault
    payload.update(extra)
    return ApiRequest(item_id=str(i), path="/v1/completions", payload=payload)


def assert_good(record: RequestRecord, tokens: int = 8) -> None:
    assert record.error is None
    assert record.completion_tokens == tokens
    assert record.finish_reason == "length"
    assert record.text == "".join(f" w{i}" for i in range(tokens))
    assert_monotone(record)


def assert_monotone(record: RequestRecord) -> None:
    times = [record.start, *record.token_times, record.end]
    assert times == sorted(times)
    if record.token_times:
        assert record.first_token == record.token_times[0]


def test_good_stream_records_everything(server: SseServer) -> None:
    records = run_stream_requests(server.v1, "m", [completion(0)], 1, timeout_s=10)
    (record,) = records
    assert_good(record)
    assert record.prompt_tokens == 3  # "prompt number 0": three words in the fake tokenizer
    assert len(record.token_times) == 8
    assert record.ttft is not None and 0 < record.ttft <= record.latency


def test_payload_gets_model_stream_and_usage_option(server: SseServer) -> None:
    request = completion(0, stream_options={"continuous_usage_stats": False}, temperature=0)
    server.reset()
    run_stream_requests(server.v1, "served-name", [request], 1, timeout_s=10)
    (body,) = server.stats.bodies
    assert body["model"] == "served-name"
    assert body["stream"] is True
    assert body["stream_options"] == {"continuous_usage_stats": False, "include_usage": True}
    assert body["prompt"] == "prompt number 0" and body["temperature"] == 0
    assert "stream" not in request.payload  # the request itself is left alone


FAULTS = [
    ("cut:4", "stream ended before [DONE] after 4 chunks (connection closed)"),
    ("nonjson:2", "non-JSON SSE data line: '{not json at all'"),
    (
        "http500",
        'HTTP 500 from /v1/completions: {"error":{"code":500,"message":"model exploded\\nsecond line"}}',
    ),
    ("nodone", "stream ended before [DONE] after 9 chunks"),
    ("error:1", "server error in stream after 2 chunks: out of memory"),
    ("hang", "timed out after 1.5 s (0 chunks received)"),
]


@pytest.mark.parametrize(("fault", "reason"), FAULTS, ids=[f for f, _ in FAULTS])
def test_fault_gives_exact_reason_and_the_batch_goes_on(
    server: SseServer, fault: str, reason: str
) -> None:
    requests = [completion(i, fault if i == 2 else "") for i in range(6)]
    records = run_stream_requests(server.v1, "m", requests, 2, timeout_s=1.5)
    assert records[2].error == reason
    assert_monotone(records[2])
    for i, record in enumerate(records):
        if i != 2:
            assert_good(record)


def test_fewer_tokens_than_asked_is_recorded_not_an_error(server: SseServer) -> None:
    records = run_stream_requests(server.v1, "m", [completion(0, "short:3")], 1, timeout_s=10)
    assert records[0].error is None
    assert records[0].completion_tokens == 3
    assert records[0].finish_reason == "stop"


def test_slow_chunks_within_the_timeout_succeed(server: SseServer) -> None:
    records = run_stream_requests(
        server.v1, "m", [completion(0, "slow:0.02"), completion(1)], 2, timeout_s=10
    )
    assert_good(records[0])
    gaps = [b - a for a, b in zip(records[0].token_times, records[0].token_times[1:])]
    assert min(gaps) > 0.01
    assert_good(records[1])


def test_slow_chunks_past_the_timeout_time_out(server: SseServer) -> None:
    records = run_stream_requests(
        server.v1, "m", [completion(0, "slow:0.1"), completion(1)], 2, timeout_s=0.35
    )
    assert re.fullmatch(
        r"timed out after 0\.35 s \([0-4] chunks received\)", records[0].error or ""
    )
    assert 0.35 <= records[0].latency < 5.0
    assert_good(records[1])


def test_chunk_with_several_tokens_counts_once(server: SseServer) -> None:
    (record,) = run_stream_requests(server.v1, "m", [completion(0, "batch:3")], 1, timeout_s=10)
    assert record.error is None
    assert record.completion_tokens == 8
    assert len(record.token_times) == 3  # 3 + 3 + 2 tokens
    assert record.text == "".join(f" w{i}" for i in range(8))


@pytest.mark.parametrize("framing", ["crlf", "length", "trickle", "close"])
def test_other_framings_parse(server: SseServer, framing: str) -> None:
    server.reset()
    requests = [completion(i, framing) for i in range(3)]
    records = run_stream_requests(server.v1, "m", requests, 1, timeout_s=10)
    for record in records:
        assert_good(record)
    # keep-alive: one connection unless the server said Connection: close
    assert server.stats.connections == (3 if framing == "close" else 1)


def test_reused_connection_closed_by_the_server_is_retried_once() -> None:
    with SseServer() as srv:
        requests = [completion(0, "dropnext"), completion(1), completion(2)]
        records = run_stream_requests(srv.v1, "m", requests, 1, timeout_s=10)
        stats = srv.stats
    for record in records:
        assert_good(record)
    assert stats.dropped == 1  # request 1 went out twice: on the dead connection, then anew
    assert stats.connections == 2
    assert len(stats.bodies) == 3


def test_chat_completions_stream(server: SseServer) -> None:
    request = ApiRequest(
        "chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi there"}]}
    )
    (record,) = run_stream_requests(server.v1, "m", [request], 1, timeout_s=10)
    assert record.error is None
    assert record.text == "".join(f" w{i}" for i in range(16))
    assert record.completion_tokens == 16 and len(record.token_times) == 16


@pytest.mark.parametrize("concurrency", [1, 3, 8])
def test_exactly_n_in_flight(fresh_server: SseServer, concurrency: int) -> None:
    requests = [completion(i, max_tokens=10) for i in range(4 * concurrency + 1)]
    records = run_stream_requests(fresh_server.v1, "m", requests, concurrency, timeout_s=20)
    for record in records:
        assert_good(record, 10)
    stats = fresh_server.stats
    assert stats.max_in_flight == concurrency
    assert stats.max_open_connections == concurrency
    assert stats.connections == concurrency  # one keep-alive connection per worker
    # the client's own view: never more than N requests open at one instant
    events = sorted([(r.start, 1) for r in records] + [(r.end, -1) for r in records])
    open_now = peak = 0
    for _, step in events:
        open_now += step
        peak = max(peak, open_now)
    assert peak <= concurrency


def test_more_workers_than_requests(server: SseServer) -> None:
    records = run_stream_requests(server.v1, "m", [completion(0), completion(1)], 16, timeout_s=10)
    assert [r.error for r in records] == [None, None]


def test_records_in_input_order_and_callback_per_record(server: SseServer) -> None:
    seen: list[tuple[str, RequestRecord]] = []
    requests = [completion(i, max_tokens=1 + (5 - i)) for i in range(6)]
    records = run_stream_requests(
        server.v1,
        "m",
        requests,
        3,
        timeout_s=10,
        on_record=lambda q, r: seen.append((q.item_id, r)),
    )
    assert [r.completion_tokens for r in records] == [6, 5, 4, 3, 2, 1]
    assert sorted(item for item, _ in seen) == [str(i) for i in range(6)]
    assert all(record is records[int(item)] for item, record in seen)


def test_callback_error_propagates(server: SseServer) -> None:
    def boom(request: ApiRequest, record: RequestRecord) -> None:
        raise RuntimeError("store is full")

    with pytest.raises(RuntimeError, match="store is full"):
        run_stream_requests(
            server.v1, "m", [completion(0), completion(1)], 2, timeout_s=10, on_record=boom
        )


def test_detailed_outcomes_carry_cache_and_chunks() -> None:
    with SseServer(cached_tokens_per_request=2) as srv:
        outcomes = asyncio.run(
            stream_requests_detailed(srv.v1, "m", [completion(0)], 1, timeout_s=10)
        )
    (outcome,) = outcomes
    assert outcome.cached_tokens == 2
    assert outcome.chunks == 10  # 8 tokens, the usage chunk, [DONE]
    assert outcome.request.item_id == "0"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_connection_refused_is_an_error_record() -> None:
    port = free_port()
    records = run_stream_requests(
        f"http://127.0.0.1:{port}/v1", "m", [completion(0)], 1, timeout_s=5
    )
    assert (records[0].error or "").startswith(f"cannot connect to 127.0.0.1:{port}: ")


def test_async_api_runs_inside_a_loop(server: SseServer) -> None:
    async def main() -> list[RequestRecord]:
        return await stream_requests(server.v1, "m", [completion(0)], 1, timeout_s=10)

    assert_good(asyncio.run(main())[0])


def test_bad_concurrency() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        run_stream_requests("http://127.0.0.1:1/v1", "m", [completion(0)], 0, timeout_s=1)


# --------------------------------------------------------------------------- post_requests


def test_post_requests_in_input_order_with_callback(server: SseServer) -> None:
    requests = [completion(i, max_tokens=i + 1) for i in range(5)]
    seen: list[str] = []
    results = run_post_requests(
        server.v1, "m", requests, 2, timeout_s=10, on_result=lambda q, c: seen.append(q.item_id)
    )
    assert len(results) == 5
    for i, result in enumerate(results):
        assert result.error is None and result.text == "".join(f" w{k}" for k in range(i + 1))
        assert result.completion_tokens == i + 1
        assert (result.finish_reason, result.tool_calls) == ("length", None)
    assert sorted(seen) == ["0", "1", "2", "3", "4"]


POST_FAULTS = [
    (
        "http500",
        'HTTP 500 from /v1/completions: {"error":{"code":500,"message":"model exploded\\nsecond line"}}',
    ),
    ("badjson", "non-JSON response from /v1/completions: '<html>oops</html>'"),
    ("hang", "timed out after 1.5 s"),
]


@pytest.mark.parametrize(("fault", "reason"), POST_FAULTS, ids=[f for f, _ in POST_FAULTS])
def test_post_fault_is_an_error_and_others_go_on(
    server: SseServer, fault: str, reason: str
) -> None:
    requests = [completion(i, fault if i == 1 else "") for i in range(4)]
    results = run_post_requests(server.v1, "m", requests, 2, timeout_s=1.5)
    assert results[1] == Completion(error=reason, error_kind="request")
    assert all(r.error is None and r.text is not None for i, r in enumerate(results) if i != 1)


def test_post_sends_no_stream_flag(server: SseServer) -> None:
    server.reset()

    async def main() -> None:
        await post_requests(server.v1, "named", [completion(0)], 1, timeout_s=10)

    asyncio.run(main())
    (body,) = server.stats.bodies
    assert body["model"] == "named" and "stream" not in body


def test_post_connection_refused() -> None:
    port = free_port()
    (result,) = run_post_requests(
        f"http://127.0.0.1:{port}/v1", "m", [completion(0)], 1, timeout_s=5
    )
    assert result.text is None and result.error_kind == "request"
    assert (result.error or "").startswith("request to /v1/completions failed: ConnectError")


# --------------------------------------------------------------------------- parse_completion

CHAT: ApiPath = "/v1/chat/completions"
USAGE = {"prompt_tokens": 12, "completion_tokens": 3}


def test_parse_a_completions_answer() -> None:
    body = {"choices": [{"index": 0, "text": " 42", "finish_reason": "stop"}], "usage": USAGE}
    assert parse_completion("/v1/completions", body) == Completion(
        text=" 42", finish_reason="stop", prompt_tokens=12, completion_tokens=3
    )


def test_parse_a_chat_answer_with_tool_calls() -> None:
    calls = [
        {"id": "c0", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
        {
            "type": "function",
            "function": {"name": 7, "arguments": {"a": 1}},
        },  # kept, with None where odd
        "not an object",
    ]
    body = {
        "choices": [
            {
                "message": {"role": "assistant", "content": None, "tool_calls": calls},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": USAGE,
    }
    assert parse_completion(CHAT, body) == Completion(
        text=None,
        tool_calls=[
            {"id": "c0", "name": "f", "arguments": '{"a": 1}'},
            {"id": None, "name": None, "arguments": None},
            {"id": None, "name": None, "arguments": None},
        ],
        finish_reason="tool_calls",
        prompt_tokens=12,
        completion_tokens=3,
    )


def test_parse_keeps_an_empty_text_and_an_empty_tool_call_list_apart_from_none() -> None:
    empty = parse_completion(CHAT, {"choices": [{"message": {"content": "", "tool_calls": []}}]})
    assert (empty.text, empty.tool_calls, empty.error) == ("", [], None)
    absent = parse_completion(CHAT, {"choices": [{"message": {"tool_calls": {"not": "a list"}}}]})
    assert (absent.text, absent.tool_calls, absent.error) == (None, None, None)


def test_parse_reads_only_integer_usage_counts() -> None:
    body = {"choices": [{"text": "x"}], "usage": {"prompt_tokens": True, "completion_tokens": "3"}}
    assert parse_completion("/v1/completions", body) == Completion(text="x")
    assert parse_completion(
        "/v1/completions", {"choices": [{"text": "x"}], "usage": [1]}
    ) == Completion(text="x")


MALFORMED = [
    ("/v1/completions", ["a list"], "response is list, not a JSON object", None, None),
    ("/v1/completions", "text", "response is str, not a JSON object", None, None),
    (CHAT, {"error": {"message": "boom"}, "usage": USAGE}, "response has no choices", None, 3),
    (CHAT, {"choices": []}, "response has no choices", None, None),
    (CHAT, {"choices": {"0": {}}}, "response has no choices", None, None),
    (CHAT, {"choices": ["hi"], "usage": USAGE}, "choices[0] is not an object", None, 3),
    (
        CHAT,
        {"choices": [{"text": "hi", "finish_reason": "stop"}]},
        "choices[0].message is not an object",
        "stop",
        None,
    ),
    (CHAT, {"choices": [{"message": "hi"}]}, "choices[0].message is not an object", None, None),
    (
        CHAT,
        {"choices": [{"message": {"content": 18}, "finish_reason": "stop"}]},
        "choices[0].message.content is int, not a string",
        "stop",
        None,
    ),
    (
        CHAT,
        {"choices": [{"message": {"content": ["a"]}}]},
        "choices[0].message.content is list, not a string",
        None,
        None,
    ),
    (
        "/v1/completions",
        {"choices": [{"message": {"content": "hi"}}]},
        "choices[0].text is NoneType, not a string",
        None,
        None,
    ),
    (
        "/v1/completions",
        {"choices": [{"text": 18}], "usage": USAGE},
        "choices[0].text is int, not a string",
        None,
        3,
    ),
]


@pytest.mark.parametrize(
    ("path", "body", "error", "finish", "tokens"),
    MALFORMED,
    ids=[error for _, _, error, _, _ in MALFORMED],
)
def test_parse_a_malformed_envelope_is_an_error(
    path: Any, body: Any, error: str, finish: str | None, tokens: int | None
) -> None:
    """No usable answer: one line saying what is wrong, and what could still be read."""
    parsed = parse_completion(path, body)
    assert parsed == Completion(
        finish_reason=finish,
        prompt_tokens=12 if tokens else None,
        completion_tokens=tokens,
        error=error,
        error_kind="response",
    )
    assert "\n" not in error


def test_parse_a_null_chat_content_is_no_error() -> None:
    """Null content is a valid chat answer (tool calls, or nothing); the scorer decides what it means."""
    parsed = parse_completion(
        CHAT, {"choices": [{"message": {"role": "assistant", "content": None}}]}
    )
    assert parsed == Completion()
