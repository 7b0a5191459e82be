"""Stalls end quickly: idle and total timeouts, the per-endpoint breaker, overdue progress lines.

The breaker's rule for work counters that stand still is judged on an injected clock; the
other checks run short real timeouts against the fake server, each bounded well below the
timeout that would end the requests were the rule broken."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.paths import PAIR
from support.sse_server import SseServer

from pytest_modelsweep.client import Guard, post_requests, stream_requests
from pytest_modelsweep.client.breaker import Breaker
from pytest_modelsweep.client.counters import fetch_metrics
from pytest_modelsweep.core.errors import ModelsweepError
from pytest_modelsweep.core.records import ApiRequest
from pytest_modelsweep.serving.probe import probe_server
from pytest_modelsweep.serving.process import ServerProcess
from pytest_modelsweep.serving.server_metrics import MetricsSampler
from pytest_modelsweep.workloads.prompts import ServerTokenizer

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("gemma3-270m", "smollm2-135m")


def requests(n: int) -> list[ApiRequest]:
    return [
        ApiRequest(
            item_id=f"q{i}", path="/v1/completions", payload={"prompt": f"p{i}", "max_tokens": 4}
        )
        for i in range(n)
    ]


def test_a_post_with_no_answer_fails_after_the_idle_timeout_and_the_breaker_fails_the_rest() -> (
    None
):
    with SseServer(default_fault="hang", metrics=False) as server:  # no counters to watch
        breaker = Breaker("m1", server.base_url, threshold=3)
        guard = Guard(idle_timeout_s=0.5, breaker=breaker)
        started = time.monotonic()
        results = asyncio.run(
            post_requests(server.v1, "m", requests(6), 1, timeout_s=60, guard=guard)
        )
        elapsed = time.monotonic() - started
    assert elapsed < 30  # 3 idle timeouts of 0.5 s, then the other 3 at once (not 60 s each)
    errors = [r.error or "" for r in results]
    assert all(e.startswith("no answer for 0.5 s") for e in errors[:3]), errors
    assert breaker.reason is not None
    assert errors[3:] == [breaker.reason] * 3
    assert "m1 at http://127.0.0.1:" in errors[3] and "waited 1 s" in errors[3]
    assert len(server.stats.bodies) == 3  # the rest were never sent


def test_a_stream_fails_after_the_idle_timeout_but_not_while_bytes_keep_coming() -> None:
    with SseServer() as server:
        hung = asyncio.run(
            stream_requests(
                server.v1,
                "m",
                [ApiRequest("a", "/v1/completions", {"prompt": "x", "test_fault": "hang"})],
                1,
                timeout_s=60,
                guard=Guard(idle_timeout_s=1.0),
            )
        )
        slow = asyncio.run(
            stream_requests(
                server.v1,
                "m",
                [
                    ApiRequest(
                        "b",
                        "/v1/completions",
                        {"prompt": "x", "max_tokens": 6, "test_fault": "slow:0.2"},
                    )
                ],
                1,
                timeout_s=60,
                guard=Guard(idle_timeout_s=1.0),
            )
        )
    assert (hung[0].error or "").startswith("no byte for 1 s")
    assert slow[0].error is None and len(slow[0].token_times) == 6  # 1.2 s in all: fine


def test_the_total_timeout_still_bounds_a_trickling_stream() -> None:
    with SseServer() as server:
        records = asyncio.run(
            stream_requests(
                server.v1,
                "m",
                [
                    ApiRequest(
                        "b",
                        "/v1/completions",
                        {"prompt": "x", "max_tokens": 50, "test_fault": "slow:0.1"},
                    )
                ],
                1,
                timeout_s=1.0,
                guard=Guard(idle_timeout_s=2.0),
            )
        )
    assert (records[0].error or "").startswith("timed out after 1 s")


DEADLINE_S = 0.2


def _sampled(url: str) -> str | None:
    with MetricsSampler(url, "llamacpp", timeout_s=DEADLINE_S) as sampler:
        pass
    assert sampler.window is not None
    return sampler.window.unavailable


def _tokenized(url: str) -> list[int]:
    tokenizer = ServerTokenizer(url + "/tokenize", "llamacpp", "m", timeout_s=DEADLINE_S)
    try:
        return tokenizer.tokenize("two words")
    finally:
        tokenizer.close()


def _ready(url: str, tmp_path: Path) -> None:
    ServerProcess(
        ["sleep", "30"], ready_url=url + "/health", log_path=tmp_path / "log", timeout_s=DEADLINE_S
    ).start()


@pytest.mark.parametrize(
    "read, outcome",
    [
        (
            lambda url, _: fetch_metrics(url, timeout_s=DEADLINE_S),
            "/metrics: ReadTimeout: no whole answer within 0.2 s",
        ),
        (lambda url, _: _sampled(url), "/metrics sent no whole answer within 0.2 s"),
        (lambda url, _: Breaker("m", url, health_timeout_s=DEADLINE_S).healthy(), "False"),
        (lambda url, _: Breaker("m", url, health_timeout_s=DEADLINE_S).work_done(), "None"),
        (
            lambda url, _: probe_server(url, "m", timeout_s=DEADLINE_S),
            "/v1/models did not answer (ReadTimeout: no whole answer within 0.2 s)",
        ),
        (lambda url, _: _tokenized(url), "ReadTimeout: no whole answer within 0.2 s"),
        (_ready, "was not ready at"),
    ],
    ids=["counters", "sampler", "health", "work-counters", "probe", "tokenize", "readiness"],
)
def test_every_read_of_a_server_trickling_its_answers_ends_at_its_deadline(
    read: Callable[[str, Path], object], outcome: str, tmp_path: Path
) -> None:
    """A byte every 20 ms never trips a per-read timeout of 200 ms; the whole answer's
    deadline ends each read (or the sampler's scrape, a missing sample) in about 0.2 s."""
    with SseServer(drip_s=0.02, served_names=("m",)) as server:
        started = time.monotonic()
        try:
            said = str(read(server.base_url, tmp_path))
        except ModelsweepError as error:
            said = str(error)
        elapsed = time.monotonic() - started
    assert outcome in said
    assert elapsed < 1.5


def test_a_frozen_server_fails_every_request_in_flight_at_its_health_check() -> None:
    with SseServer(freeze=True) as server:
        breaker = Breaker("m1", server.base_url, health_timeout_s=0.5)
        guard = Guard(idle_timeout_s=600, breaker=breaker, stall_check_s=0.5)
        started = time.monotonic()
        results = asyncio.run(
            post_requests(server.v1, "m", requests(20), 16, timeout_s=600, guard=guard)
        )
        elapsed = time.monotonic() - started
        line = breaker.recheck()
    assert elapsed < 60  # the health check's 0.5 s, not the idle timeout's 600
    assert {r.error for r in results} == {breaker.reason}
    assert "m1 at http://127.0.0.1:" in (breaker.reason or "")
    assert "stalled: no byte for" in (breaker.reason or "")
    assert line is not None and "is the server still running?" in line


def test_a_busy_server_that_answers_its_health_check_is_waited_for() -> None:
    with SseServer(served_names=("m",)) as server:
        breaker = Breaker("m1", server.base_url, health_timeout_s=0.5)
        guard = Guard(idle_timeout_s=5, breaker=breaker, stall_check_s=0.2)
        slow = [
            ApiRequest(
                f"s{i}",
                "/v1/completions",
                {"prompt": "x", "max_tokens": 4, "test_fault": "slow:0.3"},
            )
            for i in range(2)
        ]
        results = asyncio.run(post_requests(server.v1, "m", slow, 2, timeout_s=60, guard=guard))
    assert [r.error for r in results] == [None, None]
    assert breaker.reason is None


def test_a_server_that_answers_health_checks_but_computes_nothing_is_stalled() -> None:
    """It lists its models and serves /metrics, but never answers a completion: its work
    counters stand still between two checks, so the requests fail long before the idle timeout."""
    with SseServer(served_names=("m",), default_fault="hang") as server:
        breaker = Breaker("m1", server.base_url, health_timeout_s=0.5, still_s=1.0)
        guard = Guard(idle_timeout_s=60, breaker=breaker, stall_check_s=0.3)
        started = time.monotonic()
        results = asyncio.run(
            post_requests(server.v1, "m", requests(3), 3, timeout_s=60, guard=guard)
        )
        elapsed = time.monotonic() - started
    assert elapsed < 30  # the counters' 1 s, not the idle timeout's 60
    assert all("work counters (/metrics) have not moved" in (r.error or "") for r in results)
    assert breaker.reason is not None


def test_a_server_whose_counters_move_is_waited_for() -> None:
    """A slow non-streamed answer: silent for seconds, but the server computes tokens."""
    with SseServer(served_names=("m",)) as server:
        breaker = Breaker("m1", server.base_url, health_timeout_s=0.5, still_s=1.0)
        guard = Guard(idle_timeout_s=60, breaker=breaker, stall_check_s=0.3)
        slow = [
            ApiRequest(
                "s0", "/v1/completions", {"prompt": "x", "max_tokens": 12, "test_fault": "slow:0.2"}
            )
        ]
        results = asyncio.run(post_requests(server.v1, "m", slow, 1, timeout_s=60, guard=guard))
    assert [r.error for r in results] == [None]
    assert breaker.reason is None


@pytest.mark.parametrize("metrics", [True, False], ids=["counters", "no-counters"])
def test_a_slow_non_streamed_answer_outlasts_the_idle_timeout_while_the_counters_move(
    metrics: bool,
) -> None:
    """2.4 s of silence against a 1 s idle timeout: a server whose counters show it computing
    is waited for; one without counters is given only the idle timeout."""
    with SseServer(served_names=("m",), metrics=metrics) as server:
        breaker = Breaker("m1", server.base_url, health_timeout_s=0.5, still_s=1.0)
        guard = Guard(idle_timeout_s=1.0, breaker=breaker, stall_check_s=0.3)
        slow = [
            ApiRequest(
                "s0", "/v1/completions", {"prompt": "x", "max_tokens": 12, "test_fault": "slow:0.2"}
            )
        ]
        started = time.monotonic()
        results = asyncio.run(post_requests(server.v1, "m", slow, 1, timeout_s=60, guard=guard))
        elapsed = time.monotonic() - started
    if metrics:
        assert [r.error for r in results] == [None] and elapsed > 2.4
    else:  # failed at the idle timeout, before the answer came
        assert (results[0].error or "").startswith("no answer for 1 s from /v1/completions")
    assert breaker.reason is None


class Clock:
    """A clock the test moves (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_counters_that_stand_still_for_still_s_are_a_stall_and_counters_that_move_are_not() -> None:
    """A silence begins (the counters are read), then each check compares them with the last
    reading: standing still for ``still_s`` (30 s by default), or for the caller's idle
    timeout where that is shorter, is a stall; a move starts the count again."""
    clock = Clock()
    with SseServer(served_names=("m",)) as server:
        breaker = Breaker("m1", server.base_url, clock=clock)
        breaker.note_work()
        clock.now = 29.0
        assert breaker.stalled(29.0) is None
        asyncio.run(post_requests(server.v1, "m", requests(1), 1, timeout_s=60))  # work done
        clock.now = 40.0
        assert breaker.stalled(40.0) is None  # moved since: still from now on
        clock.now = 69.0
        assert breaker.stalled(69.0) is None and breaker.reason is None
        clock.now = 71.0
        reason = breaker.stalled(71.0)
        assert reason is not None and breaker.reason is not None
        assert reason.endswith(
            "work counters (/metrics) have not moved in 31 s although it answers GET /v1/models"
        )
        shorter = Breaker("m1", server.base_url, clock=clock)
        shorter.note_work()
        clock.now += 10.0
        assert shorter.stalled(10.0, idle_s=11.0) is None
        clock.now += 1.0
        assert shorter.stalled(11.0, idle_s=11.0) is not None


def test_an_open_breaker_closes_when_the_server_answers_again() -> None:
    with SseServer(served_names=("m",)) as server:
        breaker = Breaker("m1", server.base_url)
        breaker.trip("m1 at x stalled")
        assert breaker.recheck() is None and breaker.reason is None


def test_overdue_requests_are_reported() -> None:
    seen: list[tuple[int, float]] = []
    with SseServer(default_fault="hang") as server:
        guard = Guard(
            idle_timeout_s=1.3, on_wait=lambda n, s: seen.append((n, s)), report_every_s=0.5
        )
        asyncio.run(post_requests(server.v1, "m", requests(2), 2, timeout_s=60, guard=guard))
    assert seen and seen[-1][0] == 2 and seen[-1][1] >= 0.5


def write_gsm8k(folder: Path) -> Path:
    folder.mkdir()
    line = {"question": "What is 2 + 2?", "answer": "2 + 2 = 4\n#### 4"}
    for name in ("test.jsonl", "train.jsonl"):
        (folder / name).write_text("\n".join(json.dumps(line) for _ in range(10)) + "\n")
    return folder / "test.jsonl"


def run_gsm8k(pytester: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_accuracy=(ROOT / "benches" / "test_accuracy.py").read_text())
    data = write_gsm8k(pytester.path / "gsm8k")
    return pytester.runpytest(
        "-m",
        "gsm8k",
        "--limit",
        "3",
        "--gsm8k-path",
        str(data),
        "--modelsweep-dir",
        "work",
        "-p",
        "no:cacheprovider",
        "-s",
        *PAIR,
        *[f"--endpoint={m}={url}" for m in MODELS],
        *args,
    )


def test_a_server_that_stops_answering_ends_a_gsm8k_run_in_seconds(
    pytester: pytest.Pytester,
) -> None:
    with SseServer(served_names=MODELS, freeze=True) as server:
        started = time.monotonic()
        result = run_gsm8k(pytester, server.base_url, "--idle-timeout", "8")
        elapsed = time.monotonic() - started
    assert elapsed < 90, result.stdout.str()  # not the request timeout's 600 s
    # the first test's requests fail at the health check (2 s of silence, then 5 s); the
    # second model's attach probe (its first evaluate call) finds the server gone (10 s); the
    # candidate's verdict then fails at once, its test having recorded nothing
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*http://127.0.0.1:*/v1/models did not answer*"])
    result.stdout.fnmatch_lines(
        [
            (
                "*3 of 3 gsm8k requests got no answer (first: gemma3-270m at http://127.0.0.1:*"
                "stalled: no byte for 2 s and no answer to GET /v1/models in 5 s)*"
            )
        ]
    )


def test_a_server_that_never_answers_a_completion_trips_the_breaker_per_test(
    pytester: pytest.Pytester,
) -> None:
    with SseServer(served_names=MODELS, default_fault="hang") as server:
        started = time.monotonic()
        result = run_gsm8k(
            pytester, server.base_url, "--idle-timeout", "1", "--request-timeout", "120"
        )
        elapsed = time.monotonic() - started
    assert elapsed < 60, result.stdout.str()  # not the request timeout's 120 s
    result.assert_outcomes(failed=3)  # both models' tests, and the verdict refusing their items
    # the answers are not streamed: the idle second is one in which no counter moved either
    result.stdout.fnmatch_lines(
        [
            "*3 of 3 gsm8k requests got no answer (first: gemma3-270m at http://127.0.0.1:* stalled: "
            "no byte for * s, and its work counters (/metrics) have not moved in * s although it "
            "answers GET /v1/models*"
        ]
    )


def test_bad_timeouts_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(modelsweep_run): pass")
    result = pytester.runpytest("--idle-timeout", "0", "-p", "no:cacheprovider")
    assert result.ret != 0
    assert (
        "--idle-timeout: expected a positive number of seconds"
        in result.stdout.str() + result.stderr.str()
    )
