"""The throughput workload: exact-length unique prompts, statistics, checks; real llama-server.

The integration tests at the end start the real embedded SmolLM2-135M server with
the plugin's own launcher (which builds llama-server on first use).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import zlib
from collections.abc import Iterator

import pytest
from support.direct_calls import Recorded, attached, bench_settings
from support.endpoints import (
    endpoint_at,
)
from support.sse_server import SseServer, fake_token_ids

from pytest_modelsweep.client import (
    StreamOutcome,
    run_post_requests,
    run_stream_requests,
    stream_requests_detailed,
)
from pytest_modelsweep.client.counters import fetch_metrics, find_counter
from pytest_modelsweep.core.errors import EndpointError, MeasurementError
from pytest_modelsweep.core.records import ApiRequest, RequestRecord
from pytest_modelsweep.serving.endpoint import Endpoint
from pytest_modelsweep.workloads import throughput
from pytest_modelsweep.workloads.prompts import (
    SHORT_PROMPT_TOKENS,
    WORDS,
    ServerTokenizer,
    exact_length_prompt_ids,
    first_tokens_sent,
    make_tokenizer,
)
from pytest_modelsweep.workloads.setting import measure_setting
from pytest_modelsweep.workloads.throughput import (
    itls,
    latency_ms,
    run_throughput,
    summarize,
    throughput_requests,
    tpot,
)

SMOLLM2_NAME = "smollm2-135m"


# --------------------------------------------------------------------------- prompts


def test_exact_length_and_distinct_first_tokens() -> None:
    prompts = exact_length_prompt_ids(fake_token_ids, 200, 24, seed=7)
    assert len(prompts) == 200
    for text, ids in prompts:
        assert ids == fake_token_ids(text)
        assert len(ids) == 24
    firsts = [ids[0] for _, ids in prompts]
    assert len(set(firsts)) == 200
    assert len({text for text, _ in prompts}) == 200


def test_prompts_are_seeded() -> None:
    a = exact_length_prompt_ids(fake_token_ids, 5, 30, seed=1)
    assert a == exact_length_prompt_ids(fake_token_ids, 5, 30, seed=1)
    assert a != exact_length_prompt_ids(fake_token_ids, 5, 30, seed=2)


def test_excluded_first_tokens_are_never_used() -> None:
    first = exact_length_prompt_ids(fake_token_ids, 50, 16, seed=3)
    taken = {ids[0] for _, ids in first}
    again = exact_length_prompt_ids(fake_token_ids, 50, 16, seed=3, exclude_first_tokens=taken)
    assert not taken & {ids[0] for _, ids in again}


def multi_token_words(text: str) -> list[int]:
    """A tokenizer with 1-3 tokens per word (3-character pieces), like subword BPE."""
    ids = []
    for word in text.split():
        ids += [hash(word[i : i + 3]) % 50000 for i in range(0, len(word), 3)]
    return ids


@pytest.mark.parametrize("length", [5, 64, 1024, 3072])
def test_exact_length_with_subword_tokens(length: int) -> None:
    calls = 0

    def counting(text: str) -> list[int]:
        nonlocal calls
        calls += 1
        return multi_token_words(text)

    prompts = exact_length_prompt_ids(counting, 10, length, seed=11)
    assert all(len(multi_token_words(text)) == length for text, _ in prompts)
    assert len({ids[0] for _, ids in prompts}) == 10
    assert calls < 10 * 40  # interpolation search, not a word-by-word walk


def test_impossible_length_runs_out_of_leads() -> None:
    def two_per_word(text: str) -> list[int]:
        return [i for w in text.split() for i in (len(w), zlib.crc32(w.encode()))]

    with pytest.raises(MeasurementError, match=r"ran out of lead words after 0 of 1 prompts"):
        exact_length_prompt_ids(two_per_word, 1, 7, seed=0)


def test_too_short_a_length_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 4 tokens"):
        exact_length_prompt_ids(fake_token_ids, 1, 3, seed=0)


def test_word_pool_is_plain_lowercase_words() -> None:
    assert len(set(WORDS)) >= 900
    assert all(w.isalpha() and w.islower() for w in WORDS)


def test_throughput_requests_payload() -> None:
    (request,) = throughput_requests(["hello there"], output_tokens=32, id_prefix="x")
    assert request.item_id == "x-0"
    assert request.path == "/v1/completions"
    assert request.payload == {
        "prompt": "hello there",
        "max_tokens": 32,
        "min_tokens": 32,
        "ignore_eos": True,
        "temperature": 0,
    }


# --------------------------------------------------------------------------- tokenizer


@pytest.fixture(scope="module")
def fake() -> Iterator[SseServer]:
    with SseServer() as srv:
        yield srv


def test_tokenizer_over_llamacpp_tokenize(fake: SseServer) -> None:
    tok = make_tokenizer(endpoint_at(fake.base_url))
    assert tok("a b c") == fake_token_ids("a b c")
    assert tok.added_special_tokens == 0
    tok.close()


def test_tokenizer_measures_bos() -> None:
    with SseServer(bos=1) as srv:
        tok = make_tokenizer(endpoint_at(srv.base_url))
        assert len(tok("a b c")) == 3
        assert tok.added_special_tokens == 1
        tok.close()


def test_openai_kind_finds_the_tokenize_shape(fake: SseServer) -> None:
    tok = make_tokenizer(endpoint_at(fake.base_url, kind="openai"))
    assert tok("x y") == fake_token_ids("x y")  # vLLM's shape got HTTP 400, llama.cpp's works
    tok.close()


def test_tokenizer_error_names_the_url(fake: SseServer) -> None:
    tok = ServerTokenizer(fake.base_url + "/nope", "vllm", "m")
    with pytest.raises(
        EndpointError, match=r"cannot tokenize through .*/nope \(HTTP 404: not found\)"
    ):
        tok("x")
    tok.close()


# --------------------------------------------------------------------------- statistics


def record(
    start: float, times: list[float], end: float, tokens: int, **kw: object
) -> RequestRecord:
    return RequestRecord(
        start=start,
        end=end,
        first_token=times[0] if times else None,
        token_times=times,
        prompt_tokens=kw.pop("prompt_tokens", 24),  # type: ignore[arg-type]
        completion_tokens=tokens,
        finish_reason=kw.pop("finish_reason", "length"),  # type: ignore[arg-type]
        error=kw.pop("error", None),  # type: ignore[arg-type]
    )


def test_tpot_and_itl_follow_vllm() -> None:
    r = record(10.0, [10.5, 10.6, 10.8, 11.1], 11.1, 4)
    assert tpot(r) == pytest.approx((1.1 - 0.5) / 3)
    assert itls(r) == pytest.approx([0.1, 0.2, 0.3])
    # a chunk carrying two tokens: one ITL gap fewer, TPOT still per token
    r2 = record(0.0, [1.0, 2.0], 2.0, 3)
    assert tpot(r2) == pytest.approx(0.5)
    assert itls(r2) == pytest.approx([1.0])
    assert tpot(record(0.0, [1.0], 1.0, 1)) is None


def test_latency_percentiles_in_ms() -> None:
    stats = latency_ms([i / 1e3 for i in range(1, 101)])
    assert stats.mean_ms == pytest.approx(50.5)
    assert stats.p50_ms == pytest.approx(50.5)
    assert stats.p90_ms == pytest.approx(90.1)
    assert stats.p99_ms == pytest.approx(99.01)
    assert stats.n == 100
    assert math.isnan(latency_ms([]).mean_ms) and latency_ms([]).n == 0


def outcomes_of(records: list[RequestRecord], cached: int | None = 0) -> list[StreamOutcome]:
    return [
        StreamOutcome(ApiRequest(str(i), "/v1/completions", {}), r, cached, 0)
        for i, r in enumerate(records)
    ]


def counters(generated: float, cached: float = 0, prompt: float = 0) -> dict[str, float]:
    return {
        "llamacpp:tokens_predicted_total": generated,
        "llamacpp:prompt_tokens_cached_total": cached,
        "llamacpp:prompt_tokens_total": prompt,
    }


def clean_records(n: int = 4, tokens: int = 8) -> list[RequestRecord]:
    return [
        record(float(i), [i + 0.5 + k * 0.1 for k in range(tokens)], i + 0.4 + tokens * 0.1, tokens)
        for i in range(n)
    ]


def test_summary_of_a_clean_window() -> None:
    result = summarize(
        outcomes_of(clean_records()),
        concurrency=2,
        prompt_tokens=24,
        output_tokens=8,
        server_kind="llamacpp",
        counters_before=counters(100, 5, 10),
        counters_after=counters(132, 5, 106),
    )
    assert result.violations == []
    window = result.figures
    assert window.total_completion_tokens == 32
    assert window.duration_s == pytest.approx(3 + 1.2)
    assert result.output_tokens_per_s == window.output_tokens_per_s == pytest.approx(32 / 4.2)
    assert window.requests_per_s == pytest.approx(4 / 4.2)
    assert window.fidelity == 1.0
    assert window.ttft.mean_ms == pytest.approx(500)
    assert window.tpot.mean_ms == pytest.approx(100)
    assert window.itl.p50_ms == pytest.approx(100) and window.itl.n == 4 * 7
    assert window.e2e.mean_ms == pytest.approx(1200)
    assert window.server_prompt_tokens == 96 and window.total_prompt_tokens == 96
    assert result.window() == window  # no contention measured: the default


def violations_of(records: list[RequestRecord], **kw: object) -> list[str]:
    args: dict[str, object] = {
        "concurrency": 2,
        "prompt_tokens": 24,
        "output_tokens": 8,
        "server_kind": "llamacpp",
        "counters_before": counters(0),
        "counters_after": counters(sum(r.completion_tokens or 0 for r in records)),
    }
    args.update(kw)
    outcomes = args.pop("outcomes", None) or outcomes_of(records)
    return summarize(outcomes, **args).violations  # type: ignore[arg-type]


def test_violation_short_answer() -> None:
    records = clean_records()
    records[3] = record(3.0, [3.5, 3.6], 3.6, 2, finish_reason="stop")
    assert violations_of(records) == ["request 3 produced 2 of 8 tokens (finish_reason=stop)"]


def test_violation_prompt_length_with_and_without_bos() -> None:
    records = clean_records()
    records[1].prompt_tokens = 25
    assert violations_of(records) == ["request 1 sent 25 prompt tokens, expected 24"]
    for r in records:
        r.prompt_tokens = 25
    records[2].prompt_tokens = 24
    assert violations_of(records, bos_tokens=1) == [
        "request 2 sent 24 prompt tokens, expected 25 (24 + 1 BOS the server adds)"
    ]


def test_violation_request_error_and_no_usage() -> None:
    records = clean_records()
    records[0] = record(0.0, [0.5], 0.7, None, error="HTTP 500 from /v1/completions: boom")  # type: ignore[arg-type]
    records[2].completion_tokens = None
    assert violations_of(records, counters_after=counters(16)) == [
        "request 0 failed: HTTP 500 from /v1/completions: boom",
        "request 2 reported no usage (the server ignored stream_options.include_usage)",
    ]


def test_violation_fidelity() -> None:
    records = clean_records()
    assert violations_of(records, counters_after=counters(40)) == [
        "fidelity 0.8000 outside 0.99-1.01: we counted 32 completion tokens, "
        "the server's llamacpp:tokens_predicted_total moved by 40"
    ]
    assert violations_of(records, counters_after=counters(0)) == [
        "the server's llamacpp:tokens_predicted_total did not move (delta 0) while we counted 32 "
        "completion tokens"
    ]
    assert violations_of(records, counters_after=counters(32.3)) == []  # within 1 %


def test_violation_prefix_reuse() -> None:
    records = clean_records(2)
    outcomes = outcomes_of(records, cached=0)
    outcomes[1].cached_tokens = 7
    assert violations_of(records, outcomes=outcomes, counters_after=counters(16, cached=7)) == [
        "request 1 reused 7 cached prompt tokens, expected 0",
        "the server's prefix cache reused 7 prompt tokens in the window, expected 0 "
        "(unique prompts, no template)",
    ]


def test_violation_warmup_error() -> None:
    warm = outcomes_of(
        [record(0.0, [], 0.1, None, error="stream ended before [DONE] after 3 chunks")]
    )  # type: ignore[arg-type]
    assert violations_of(clean_records(), warmup=warm) == [
        "warm-up request 0 failed: stream ended before [DONE] after 3 chunks"
    ]


# --------------------------------------------------------------------------- run_throughput (loopback)


def run_small(srv: SseServer, **kw: object) -> object:
    args: dict[str, object] = {
        "concurrency": 3,
        "prompt_tokens": None,
        "output_tokens": 8,
        "timed_requests": 9,
        "warmup_requests": 1,
        "seed": 5,
        "timeout_s": 10,
    }
    args.update(kw)
    return run_throughput(endpoint_at(srv.base_url), **args)  # type: ignore[arg-type]


def test_run_throughput_clean_against_loopback() -> None:
    with SseServer(chunk_delay_s=0.001) as srv:
        result = run_small(srv)
        bodies = list(srv.stats.bodies)
        max_in_flight = srv.stats.max_in_flight
        again = run_small(srv)  # a second run on the same server: no first token reused
        later = srv.stats.bodies[len(bodies) :]
    assert result.violations == [], result.violations  # type: ignore[attr-defined]
    window = result.figures  # type: ignore[attr-defined]
    assert window.fidelity == 1.0
    assert window.completed == 9 and window.total_completion_tokens == 72
    assert max_in_flight == 3
    assert len(bodies) == 3 + 9  # warm-up is at least the concurrency
    firsts = [fake_token_ids(b["prompt"])[0] for b in bodies + later]
    assert len(set(firsts)) == len(firsts) == 24
    assert all(len(fake_token_ids(b["prompt"])) == SHORT_PROMPT_TOKENS for b in bodies)
    assert again.violations == []  # type: ignore[attr-defined]


def test_run_throughput_reports_each_violation() -> None:
    with SseServer(default_fault="short:5", counter_scale=1.5, cached_tokens_per_request=2) as srv:
        result = run_small(srv, prompt_tokens=40)
    violations = result.violations  # type: ignore[attr-defined]
    assert "request 0 produced 5 of 8 tokens (finish_reason=stop)" in violations
    assert "request 0 reused 2 cached prompt tokens, expected 0" in violations
    # warm-up 3 x 5 tokens booked as int(15 * 1.5) = 22, then int(60 * 1.5) = 90
    assert (
        "fidelity 0.6618 outside 0.99-1.01: we counted 45 completion tokens, "
        "the server's llamacpp:tokens_predicted_total moved by 68"
    ) in violations
    assert (
        "the server's prefix cache reused 18 prompt tokens in the window, expected 0 "
        "(unique prompts, no template)"
    ) in violations
    assert len(violations) == 9 + 9 + 2
    assert any(v.startswith("request 8 produced 5 of 8 tokens") for v in violations)


def test_run_throughput_with_bos() -> None:
    with SseServer(bos=1) as srv:
        result = run_small(srv, prompt_tokens=32)
    assert result.figures.bos_tokens == 1  # type: ignore[attr-defined]
    assert result.violations == []  # type: ignore[attr-defined]
    assert all(r.prompt_tokens == 33 for r in result.records)  # type: ignore[attr-defined]


def test_run_throughput_without_metrics_names_the_flag() -> None:
    with (
        SseServer(metrics=False) as srv,
        pytest.raises(EndpointError, match="llama-server needs --metrics"),
    ):
        run_small(srv)


# --------------------------------------------------------------------------- real llama-server


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    """The real embedded SmolLM2 server, started by the plugin's own launcher (4 slots, 1 thread)."""
    from dataclasses import replace

    from pytest_modelsweep.core.sweep import load_sweep
    from pytest_modelsweep.serving.llamacpp import launch_llamacpp

    sweep = load_sweep("embedded")
    serving = replace(sweep.serving, max_num_seqs=4, threads=1)
    endpoint, process = launch_llamacpp(
        sweep.model(SMOLLM2_NAME), serving, tmp_path_factory.mktemp("llama"), print
    )
    try:
        yield endpoint
    finally:
        process.stop()


def _stream(ep: Endpoint, requests: list[ApiRequest], n: int) -> list[StreamOutcome]:
    return asyncio.run(stream_requests_detailed(ep.v1, ep.served_name, requests, n, timeout_s=120))


@pytest.mark.integration
@pytest.mark.parametrize(("length", "count"), [(64, 4), (1024, 2)])
def test_real_exact_length_prompts(llama: Endpoint, length: int, count: int) -> None:
    tok = make_tokenizer(llama)
    sent = first_tokens_sent(llama.base_url)
    prompts = exact_length_prompt_ids(
        tok, count, length, seed=100 + length, exclude_first_tokens=sent
    )
    sent.update(ids[0] for _, ids in prompts)
    bos = tok.added_special_tokens
    tok.close()
    assert bos == 0  # SmolLM2's tokenizer adds no BOS to a completion prompt
    before = fetch_metrics(llama.base_url)
    requests = throughput_requests(
        [t for t, _ in prompts], output_tokens=1, id_prefix=f"len{length}"
    )
    outcomes = _stream(llama, requests, 2)
    for outcome in outcomes:
        assert outcome.record.error is None
        assert outcome.record.prompt_tokens == length + bos
        assert outcome.record.completion_tokens == 1
        assert outcome.cached_tokens == 0
    after = fetch_metrics(llama.base_url)
    assert find_counter("llamacpp", "cached", after) == find_counter("llamacpp", "cached", before)


@pytest.mark.integration
def test_real_throughput_c4(llama: Endpoint) -> None:
    result = run_throughput(
        llama,
        concurrency=4,
        prompt_tokens=None,
        output_tokens=32,
        timed_requests=8,
        warmup_requests=4,
        seed=2024,
        timeout_s=120,
    )
    window = result.figures
    print(
        f"\nllama-server SmolLM2-135M c=4, 32 tokens: {window.output_tokens_per_s:.1f} tok/s, "
        f"{window.requests_per_s:.2f} req/s, fidelity {window.fidelity:.4f} "
        f"({window.total_completion_tokens} vs {window.server_generated_tokens:g}), "
        f"TTFT p50 {window.ttft.p50_ms:.0f} ms, TPOT p50 {window.tpot.p50_ms:.1f} ms, "
        f"ITL p50 {window.itl.p50_ms:.1f} ms, cached {window.server_cached_tokens:g}, "
        f"shared-chunk tokens {window.tokens_in_shared_chunks}"
    )
    assert result.violations == []
    assert all(r.completion_tokens == 32 for r in result.records)
    assert 0.99 <= window.fidelity <= 1.01
    assert window.server_cached_tokens == 0 and window.reported_cached_tokens == 0
    assert window.total_prompt_tokens == 8 * SHORT_PROMPT_TOKENS


@pytest.mark.integration
def test_real_client_keep_alive_errors_chat_and_post(llama: Endpoint) -> None:
    # llama.cpp closes the connection after each streamed response (and any keep-alive
    # connection after 100 requests): the client notices and reconnects, never failing
    many = [
        ApiRequest(str(i), "/v1/completions", {"prompt": "Hi", "max_tokens": 1}) for i in range(103)
    ]
    records = run_stream_requests(llama.v1, llama.served_name, many, 1, timeout_s=60)
    assert [r.error for r in records] == [None] * 103
    assert all(r.completion_tokens == 1 for r in records)

    bad = ApiRequest("bad", "/v1/completions", {"prompt": "Hi", "max_tokens": "many"})
    chat = ApiRequest(
        "chat",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 8, "temperature": 0},
    )
    records = run_stream_requests(
        llama.v1, llama.served_name, [many[0], bad, chat], 2, timeout_s=60
    )
    assert records[0].error is None
    assert (records[1].error or "").startswith('HTTP 400 from /v1/completions: {"error":')
    assert records[2].error is None and records[2].text and records[2].completion_tokens
    assert records[2].prompt_tokens and records[2].prompt_tokens > 3  # the chat template's tokens

    results = run_post_requests(llama.v1, llama.served_name, [many[0], bad], 2, timeout_s=60)
    assert results[0].error is None and results[0].text is not None
    assert results[0].completion_tokens == 1
    assert results[1].text is None and (results[1].error or "").startswith(
        "HTTP 400 from /v1/completions"
    )


def test_the_meter_wraps_the_timed_requests_only() -> None:
    """Entered after the warm-up and left before the counters are read again: the server
    saw exactly the warm-up when it was entered and every request when it was left."""
    seen: list[tuple[str, int]] = []

    with SseServer(chunk_delay_s=0.001) as srv:

        class Meter:
            def __enter__(self) -> None:
                seen.append(("enter", len(srv.stats.bodies)))

            def __exit__(self, *exc: object) -> None:
                seen.append(("exit", len(srv.stats.bodies)))

        result = run_small(srv, meter=Meter())
    assert result.violations == []  # type: ignore[attr-defined]
    assert seen == [("enter", 3), ("exit", 3 + 9)]


# --------------------------------------------------------------------------- user prompts


USER_TEXTS = [
    "summarise the quarterly report in two lines",
    "translate hello to French",
    "list three prime numbers",
]


def test_user_prompts_get_distinct_leads_and_their_own_lengths() -> None:
    with SseServer(chunk_delay_s=0.001) as srv:
        result = run_small(srv, user_prompts=USER_TEXTS)
        bodies = list(srv.stats.bodies)
    assert result.violations == [], result.violations  # type: ignore[attr-defined]
    prompts = [b["prompt"] for b in bodies]
    assert len(prompts) == 3 + 9
    # every text is sent in turn, each behind a lead word of its own (three requests in flight
    # reach the server in any order)
    assert sorted(p.split(": ", 1)[1] for p in prompts) == sorted(USER_TEXTS * 4)
    firsts = [fake_token_ids(p)[0] for p in prompts]
    assert len(set(firsts)) == 12
    # each request is checked against its own text's length, as the server counts it
    records = result.records  # type: ignore[attr-defined]
    lengths = sorted(len(fake_token_ids(p)) for p in prompts[3:])
    assert sorted(r.prompt_tokens for r in records) == lengths


def test_user_prompts_are_checked_against_their_own_lengths() -> None:
    # the server reports 2 more prompt tokens than the text has: each request is named
    with SseServer(bos=2) as srv:
        endpoint = endpoint_at(srv.base_url)
        tokenizer = ServerTokenizer(endpoint.tokenize_url, "llamacpp", "m")
        tokenizer.added_special_tokens = 0  # as if the server claimed to add no BOS, then added two
        result = run_throughput(
            endpoint,
            concurrency=2,
            prompt_tokens=None,
            output_tokens=4,
            timed_requests=2,
            warmup_requests=1,
            seed=1,
            timeout_s=10,
            tokenizer=tokenizer,
            user_prompts=USER_TEXTS,
        )
    # after the 2 warm-up requests, timed request i sends text 2 + i; both may arrive in any order
    timed = {b["prompt"].split(": ", 1)[1]: b["prompt"] for b in srv.stats.bodies[2:]}
    lengths = [len(fake_token_ids(timed[USER_TEXTS[(2 + i) % 3]])) for i in range(2)]
    assert result.violations == [
        f"request {i} sent {n + 2} prompt tokens, expected {n}" for i, n in enumerate(lengths)
    ]


def test_shared_prefixes_are_allowed_only_when_asked() -> None:
    with SseServer(cached_tokens_per_request=3) as srv:
        unique = run_small(srv, user_prompts=USER_TEXTS)
        shared = run_small(srv, user_prompts=USER_TEXTS, unique_prefixes=False)
        bodies = [b["prompt"] for b in srv.stats.bodies]
    assert any("cached prompt tokens, expected 0" in v for v in unique.violations)  # type: ignore[attr-defined]
    assert shared.violations == []  # type: ignore[attr-defined]
    # sent as given; three requests in flight at once reach the server in any order
    assert sorted(bodies[-12:]) == sorted(USER_TEXTS * 4)


def test_a_settings_requests_that_wait_are_told_to_its_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Requests that get no byte for the report interval (30 s; 0.5 s here) are told in the
    bench's progress lines, a line each interval, named by model and window."""
    monkeypatch.setattr(throughput, "OVERDUE_REPORT_S", 0.5)
    lines: list[str] = []
    with SseServer(default_fault="hang") as srv:
        settings = bench_settings(idle_timeout_s=1.3, timed_requests=2)
        with contextlib.suppress(MeasurementError):
            measure_setting(
                attached(srv.base_url, "m"),
                settings,
                Recorded(),
                "throughput",
                2,
                None,
                lines.append,
            )
    waiting = [line for line in lines if "request(s) waiting" in line]
    assert waiting and all(
        re.fullmatch(r"m c2-p\d+-o256: [12] request\(s\) waiting \d+ s", line) for line in waiting
    ), lines
