"""A throughput benchmark over your own prompts, with the public API only, against fake servers.

The pytester project imports nothing but ``pytest`` and ``pytest_modelsweep``'s public names;
two fake streaming servers (tests/support/sse_server.py; one token per word, llama.cpp-like counters)
serve a reference and a candidate attached with ``--endpoint``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.arithmetic import SWEEP  # the same sweep: ref (completion), cand (chat)
from support.arithmetic import options as api_options
from support.direct_calls import Recorded, attached, bench_settings
from support.paths import TWO_WORKERS
from support.sse_server import ListingServer, fake_token_ids

from pytest_modelsweep.api.prompts import checked_prompts, load_prompts, prompts_digest
from pytest_modelsweep.core.errors import DataError
from pytest_modelsweep.core.stats.repeats import RepeatPolicy
from pytest_modelsweep.workloads.setting import measure_throughput

pytest_plugins = ("pytester",)


PROMPTS = """\
# my service's typical requests
summarise the incident report for the on-call channel
translate the release notes into plain English
draft a reply to a customer asking about refunds
"""

MY_SHAPE = """
from pathlib import Path

import pytest
from pytest_modelsweep import MeasureThroughput, load_prompts

PROMPTS = load_prompts(Path(__file__).with_name("prompts.txt"))

@pytest.mark.modelsweep_benchmark("my_shape", kind="throughput")
@pytest.mark.parametrize("concurrency", [1, 3], ids=lambda c: f"c{c}")
def test_my_shape(measure_throughput: MeasureThroughput, concurrency: int) -> None:
    measure_throughput("my_shape", PROMPTS, concurrency=concurrency, output_tokens=6)

def test_plain() -> None:
    pass
"""


@pytest.fixture
def servers() -> Iterator[tuple[ListingServer, ListingServer]]:
    """The reference's server and a candidate's a tenth as fast (chunk delays): the windows
    are six tokens long, so a stall of the machine moves one by a third or more (CV 30% seen
    in CI), and a ratio of 0.25 was then not surely below 1 from 3 repeats; 0.1 is."""
    with (
        ListingServer("ref-served", chunk_delay_s=0.002) as reference,
        ListingServer("cand-served", chunk_delay_s=0.02) as candidate,
    ):
        yield reference, candidate


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "mine.toml").write_text(SWEEP)
    (pytester.path / "prompts.txt").write_text(PROMPTS)
    pytester.makepyfile(test_my_shape=MY_SHAPE)
    return pytester


def options(servers: tuple[ListingServer, ListingServer], *args: str) -> list[str]:
    """The public-API test's options, with three repeats of each throughput window."""
    return api_options(
        servers,
        "--repeats=3",
        "--contended-cores=64",
        "--contended-steal=1",
        "--results=results.json",
        *args,
    )


def recorded(project: pytest.Pytester) -> list[dict[str, Any]]:
    measurements: list[dict[str, Any]] = json.loads((project.path / "results.json").read_text())[
        "measurements"
    ]
    return measurements


@pytest.mark.timing  # the "worse" verdict reads the two servers' real pace (a busy CPU moved a
# reference repeat from 863 to 179 tokens/s and the ratio's interval then covered 1)
@pytest.mark.parametrize("workers", [False, True], ids=["plain", "n2"])
def test_a_users_prompts_are_measured_checked_and_compared(
    project: pytest.Pytester,
    servers: tuple[ListingServer, ListingServer],
    workers: bool,
) -> None:
    args = options(servers, "-m", "my_shape", "-v")
    result = (
        project.runpytest_subprocess(*args, *TWO_WORKERS, timeout=120)
        if workers
        else project.runpytest(*args)
    )
    # 2 models x 2 concurrencies pass; the tenth-as-fast candidate's 2 ratios are worse (fail)
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(["*cand ÷ ref, my_shape c3: 0.*x, worse (95% interval*"])
    shape = [m for m in recorded(project) if m["benchmark"] == "my_shape"]
    assert sorted((m["model"], m["params"]["concurrency"]) for m in shape) == [
        ("cand", 1),
        ("cand", 3),
        ("ref", 1),
        ("ref", 3),
    ]
    texts = load_prompts(project.path / "prompts.txt")
    for m in shape:
        assert m["unit"] == "tokens/s" and m["outcome"] == "passed"
        assert m["params"]["user_prompts"] == 3 and m["params"]["unique_prefixes"] is True
        assert m["params"]["output_tokens"] == 6
        assert len(m["stats"]["repeat_values"]) == 3
        assert all(r["violations"] == [] for r in m["stats"]["repeats"])
        assert all(r["completion_tokens"] == 6 for r in m["requests"])
    # every prompt the servers saw is a user's text behind a lead word, no first token twice
    for server in servers:
        prompts = [b["prompt"] for b in server.stats.bodies]
        assert {p.split(": ", 1)[1] for p in prompts} == set(texts)
        firsts = [fake_token_ids(p)[0] for p in prompts]
        assert len(firsts) == len(set(firsts))
    ratios = {
        m["params"]["concurrency"]: m
        for m in recorded(project)
        if m["benchmark"] == "throughput_ratio"
    }
    assert set(ratios) == {1, 3}
    for concurrency, ratio in ratios.items():
        assert ratio["model"] == "cand" and ratio["params"]["benchmark"] == "my_shape"
        assert ratio["params"]["verdict"] == "worse"
        cand, ref = (
            next(
                m
                for m in shape
                if m["model"] == model and m["params"]["concurrency"] == concurrency
            )
            for model in ("cand", "ref")
        )
        assert ratio["value"] == pytest.approx(cand["value"] / ref["value"], rel=0.05)


def test_the_reports_list_the_users_shape_as_throughput(
    project: pytest.Pytester,
    servers: tuple[ListingServer, ListingServer],
) -> None:
    project.runpytest(*options(servers, "-m", "my_shape", "--md=report.md")).assert_outcomes(
        passed=4, failed=2
    )
    markdown = (project.path / "report.md").read_text()
    values = {
        (m["model"], m["params"]["concurrency"]): m["value"]
        for m in recorded(project)
        if m["benchmark"] == "my_shape"
    }
    assert "### my\\_shape throughput" in markdown  # its own table, titled as throughput
    texts = load_prompts(project.path / "prompts.txt")
    own = [m for m in recorded(project) if m["benchmark"] == "my_shape"]
    mean_length = round(sum(len(fake_token_ids(t)) + 1 for t in texts) / len(texts))
    assert all(
        m["stats"]["repeats"][0]["prompt_tokens"] in (mean_length - 1, mean_length, mean_length + 1)
        for m in own
    )
    assert "own (≈" in markdown and "own: the benchmark's 3 prompt texts" in markdown
    for value in values.values():
        assert f"{value:,.1f}" in markdown


def test_a_throughput_benchmark_without_concurrency_is_one_collection_error(
    pytester: pytest.Pytester,
    servers: tuple[ListingServer, ListingServer],
) -> None:
    (pytester.path / "mine.toml").write_text(SWEEP)
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.modelsweep_benchmark("my_shape", kind="throughput")
def test_bad(measure_throughput):
    measure_throughput("my_shape", ["hello there"], concurrency=2)
"""
    )
    result = pytester.runpytest(*options(servers))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*parametrize it by concurrency*"])


def test_a_bad_kind_is_one_collection_error(
    pytester: pytest.Pytester,
    servers: tuple[ListingServer, ListingServer],
) -> None:
    (pytester.path / "mine.toml").write_text(SWEEP)
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.modelsweep_benchmark("my_shape", kind="latency")
def test_bad(model_name):
    pass
"""
    )
    result = pytester.runpytest(*options(servers))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(['*kind="accuracy" (the default) or kind="throughput"*'])


def test_prompt_files_are_read_or_refused_in_one_line(tmp_path: Path) -> None:
    text = tmp_path / "p.txt"
    text.write_text("# a comment\n\nfirst prompt\n  second prompt  \n")
    assert load_prompts(text) == ["first prompt", "second prompt"]
    lines = tmp_path / "p.jsonl"
    lines.write_text('{"prompt": "one"}\n\n{"prompt": "two # not a comment"}\n')
    assert load_prompts(lines) == ["one", "two # not a comment"]
    cases = {
        "missing.txt": None,
        "empty.txt": "# only a comment\n",
        "bad.jsonl": '{"prompt": "ok"}\nnot json\n',
        "nofield.jsonl": '{"text": "x"}\n',
    }
    messages = []
    for name, content in cases.items():
        if content is not None:
            (tmp_path / name).write_text(content)
        with pytest.raises(DataError) as error:
            load_prompts(tmp_path / name)
        messages.append(str(error.value))
    assert all("\n" not in m for m in messages)
    assert "not found" in messages[0] and "has no prompts" in messages[1]
    assert "bad.jsonl:2: not JSON" in messages[2]
    assert 'nofield.jsonl:1: expected a non-empty "prompt" string' in messages[3]
    with pytest.raises(DataError, match="not one string"):
        checked_prompts("b", "one prompt")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="prompt 1 must be a non-empty string"):
        checked_prompts("b", ["ok", ""])


def test_a_concurrency_other_than_the_parameter_is_one_line(
    pytester: pytest.Pytester,
    servers: tuple[ListingServer, ListingServer],
) -> None:
    (pytester.path / "mine.toml").write_text(SWEEP)
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.modelsweep_benchmark("my_shape", kind="throughput")
@pytest.mark.parametrize("concurrency", [2])
def test_bad(measure_throughput, concurrency):
    measure_throughput("my_shape", ["hello there"], concurrency=3)
"""
    )
    result = pytester.runpytest(*options(servers, "--model=ref"))  # (refused before sending)
    result.stdout.fnmatch_lines(
        [
            (
                "*test_bad?ref-2? measures concurrency 3 but is parametrized "
                "with 2: pass concurrency=concurrency*"
            )
        ]
    )
    assert servers[0].stats.bodies == []  # refused before anything was sent


def test_interleave_refuses_a_users_shape_in_one_line(
    project: pytest.Pytester,
    servers: tuple[ListingServer, ListingServer],
) -> None:
    result = project.runpytest(*options(servers, "-m", "my_shape", "--interleave"))
    result.stdout.fnmatch_lines(
        [
            (
                "*--interleave measures the built-in throughput shapes only, "
                "not your own 'my_shape': run its ratio without --interleave*"
            )
        ]
    )


# --------------------------------------------------------------------------- measure_throughput, called

TEXTS = [line for line in PROMPTS.splitlines() if not line.startswith("#")]


@pytest.mark.parametrize("rate", [None, 50.0], ids=["closed", "open"])
def test_measure_throughput_records_the_prompts_as_one_setting(rate: float | None) -> None:
    recorded = Recorded()
    settings = bench_settings(repeats=RepeatPolicy(2, 0.05, 10), contended_cores=64.0)
    with ListingServer("m") as server:
        measure_throughput(
            lambda: attached(server.base_url, "m"),
            settings,
            recorded,
            "my_shape",
            TEXTS,
            concurrency=2,
            output_tokens=6,
            params={"team": "search"},
            rate=rate,
        )
    (measurement,) = recorded
    assert (measurement.model, measurement.benchmark, measurement.unit) == (
        "m",
        "my_shape",
        "tokens/s",
    )
    open_loop = {"request_rate": 50.0, "burstiness": 1.0, "max_in_flight": 2} if rate else {}
    assert measurement.params == {
        "concurrency": 2,
        "prompt_tokens": None,
        "output_tokens": 6,
        "timed_requests": settings.open_loop_timed_requests if rate else 4,
        "repeats": 2,
        "user_prompts": 3,
        "prompts_hash": prompts_digest(TEXTS),
        "unique_prefixes": True,
        **open_loop,
        "team": "search",
    }
    assert len(measurement.stats.repeat_values) == 2
    assert all(r["completion_tokens"] == 6 for r in measurement.requests)
    # every prompt the server saw is one of the texts behind a lead word
    assert {b["prompt"].split(": ", 1)[1] for b in server.stats.bodies} == set(TEXTS)


@pytest.mark.parametrize(
    ("prompts", "options", "line"),
    [
        ("one prompt", {}, "my_shape: prompts must be a list of strings, not one string"),
        ([], {}, "my_shape: no prompts to send"),
        (TEXTS, {"concurrency": 0}, "my_shape: concurrency must be a positive integer, got 0"),
        (
            TEXTS,
            {"output_tokens": True},
            "my_shape: output_tokens must be a positive integer, got True",
        ),
        (
            TEXTS,
            {"rate": 0},
            "my_shape: rate (requests per second) must be a positive number, got 0",
        ),
        (
            TEXTS,
            {"rate": float("inf")},
            "my_shape: rate (requests per second) must be a positive number, got inf",
        ),
        (
            TEXTS,
            {"rate": 2, "burstiness": -1.0},
            "my_shape: burstiness must be a positive number, got -1.0",
        ),
    ],
    ids=["one-string", "none", "concurrency", "output-tokens", "rate", "rate-inf", "burstiness"],
)
def test_measure_throughput_refuses_bad_input_in_one_line_before_a_server_is_asked_for(
    prompts: Any, options: dict[str, Any], line: str
) -> None:
    def no_server() -> Any:
        raise AssertionError("a server was asked for")

    with pytest.raises(DataError) as info:
        measure_throughput(
            no_server,
            bench_settings(),
            Recorded(),
            "my_shape",
            prompts,
            **{"concurrency": 2, **options},
        )
    assert str(info.value) == line
