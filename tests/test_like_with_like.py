"""Only like is compared with like: every comparison refuses measurements whose requests were
sent otherwise, in one line naming the first difference (judging.pairing.check_same_requests).

Each case runs the real public-API benchmarks (a user's accuracy benchmark, a user's
throughput shape) or the real capacity bench against the fake servers of tests/support/sse_server.py,
in two runs into one store whose settings differ, and reads the refusal where a user meets
it: the verdict or ratio test's failure, the gate's table, ``modelsweep compare`` and
``modelsweep merge``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.arithmetic import SWEEP, ArithmeticServer
from support.arithmetic import options as api_options
from support.capacity_runs import CANDIDATE, REFERENCE, Servers
from support.capacity_runs import run as run_capacity
from support.sse_server import ListingServer

from pytest_modelsweep.cli import main

pytest_plugins = ("pytester",)

# A user's accuracy benchmark whose request settings come from the environment, so that
# two runs of one file can send the same items with other settings.
MY_EVAL = """
import os
import pytest
from pytest_modelsweep import EvalItem, Evaluate, Score

SETTINGS = {"max_tokens": int(os.environ.get("MAX_TOKENS", "8")),
            "temperature": float(os.environ.get("TEMPERATURE", "0"))}
ITEMS = [EvalItem(f"q{i:02d}", messages=[{"role": "user", "content": f"What is {i} + {2 * i}?"}],
                  answer=str(3 * i), **SETTINGS) for i in range(45)]

def first_number(completion, item):
    return Score((completion.text or "").strip().split(" ")[0] == item.answer)

@pytest.mark.modelsweep_benchmark("my_eval")
def test_my_eval(evaluate: Evaluate) -> None:
    evaluate("my_eval", ITEMS, first_number, concurrency=4)
"""

# A user's throughput shape whose output length and prompt file come from the environment.
MY_SHAPE = """
import os
from pathlib import Path

import pytest
from pytest_modelsweep import MeasureThroughput, load_prompts

PROMPTS = load_prompts(Path(__file__).with_name(os.environ.get("PROMPT_FILE", "a.txt")))

@pytest.mark.modelsweep_benchmark("my_shape", kind="throughput")
@pytest.mark.parametrize("concurrency", [2], ids=lambda c: f"c{c}")
def test_my_shape(measure_throughput: MeasureThroughput, concurrency: int) -> None:
    measure_throughput("my_shape", PROMPTS, concurrency=concurrency,
                       output_tokens=int(os.environ.get("OUTPUT_TOKENS", "16")))
"""


@pytest.fixture
def arithmetic() -> Iterator[tuple[ArithmeticServer, ArithmeticServer]]:
    with (
        ArithmeticServer("ref-served") as reference,
        ArithmeticServer("cand-served", wrong=(1, 3, 5)) as candidate,
    ):
        yield reference, candidate


@pytest.fixture
def streaming() -> Iterator[tuple[ListingServer, ListingServer]]:
    with (
        ListingServer("ref-served", chunk_delay_s=0.002) as reference,
        ListingServer("cand-served", chunk_delay_s=0.002) as candidate,
    ):
        yield reference, candidate


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "mine.toml").write_text(SWEEP)
    pytester.makepyfile(test_my_eval=MY_EVAL, test_my_shape=MY_SHAPE)
    (pytester.path / "a.txt").write_text("summarise the incident report\ndraft a refund reply\n")
    (pytester.path / "b.txt").write_text("translate the release notes\nlist the open tickets\n")
    return pytester


def run(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    servers: tuple[ListingServer, ListingServer],
    env: dict[str, str],
    *args: str,
) -> pytest.RunResult:
    """One run of the project in a subprocess (the store is shared across runs)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return project.runpytest(
        *api_options(servers, "--contended-cores=64", "--contended-steal=1", *args)
    )


def recorded(project: pytest.Pytester, results: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads((project.path / results).read_text())["measurements"]
    return found


def one_line(result: pytest.RunResult, start: str) -> str:
    """The output line that starts with ``start`` (the refusal pytest prints)."""
    (line,) = [line for line in result.stdout.lines if line.startswith(start)]
    return line


def test_an_accuracy_verdict_refuses_sides_sampled_otherwise(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    arithmetic: tuple[ArithmeticServer, ArithmeticServer],
) -> None:
    # the reference answered with one token at temperature 1.5; the candidate with 512
    reference = run(
        project,
        monkeypatch,
        arithmetic,
        {"MAX_TOKENS": "1", "TEMPERATURE": "1.5"},
        "-m",
        "my_eval",
        "--model=ref",
        "--results=ref.json",
    )
    assert reference.ret == pytest.ExitCode.OK
    (stored,) = recorded(project, "ref.json")
    assert stored["params"]["sampling"] == {"max_tokens": 1, "temperature": 1.5}
    candidate = run(
        project,
        monkeypatch,
        arithmetic,
        {"MAX_TOKENS": "512", "TEMPERATURE": "0"},
        "-m",
        "my_eval",
        "--model=cand",
        "--results=cand.json",
    )
    candidate.assert_outcomes(passed=1, failed=1)
    expected = (
        "refusing to pair cand with ref on my_eval: item q00's max_tokens differs "
        "(cand: 512, ref: 1); measure both with the same request settings"
    )
    assert one_line(candidate, "refusing to pair") == expected
    assert all(not m["benchmark"].startswith("verdict:") for m in recorded(project, "cand.json"))
    assert "Traceback" not in candidate.stdout.str()


def test_a_throughput_ratio_refuses_another_output_length_and_prompt_file(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    streaming: tuple[ListingServer, ListingServer],
) -> None:
    run(
        project,
        monkeypatch,
        streaming,
        {"OUTPUT_TOKENS": "16", "PROMPT_FILE": "a.txt"},
        "-m",
        "my_shape",
        "--model=ref",
    ).assert_outcomes(passed=1, skipped=1)
    candidate = run(
        project,
        monkeypatch,
        streaming,
        {"OUTPUT_TOKENS": "32", "PROMPT_FILE": "b.txt"},
        "-m",
        "my_shape",
        "--model=cand",
        "--results=cand.json",
    )
    candidate.assert_outcomes(passed=1, failed=1)
    assert one_line(candidate, "refusing to pair") == (
        "refusing to pair cand with ref on my_shape: output_tokens differs (cand: 32, ref: 16); "
        "measure both with the same request settings"
    )
    assert all(m["benchmark"] != "throughput_ratio" for m in recorded(project, "cand.json"))


def test_a_throughput_ratio_refuses_another_prompt_file_of_the_same_length(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    streaming: tuple[ListingServer, ListingServer],
) -> None:
    run(
        project,
        monkeypatch,
        streaming,
        {"OUTPUT_TOKENS": "16", "PROMPT_FILE": "a.txt"},
        "-m",
        "my_shape",
        "--model=ref",
        "--results=ref.json",
    ).assert_outcomes(passed=1, skipped=1)
    candidate = run(
        project,
        monkeypatch,
        streaming,
        {"OUTPUT_TOKENS": "16", "PROMPT_FILE": "b.txt"},
        "-m",
        "my_shape",
        "--model=cand",
        "--results=cand.json",
    )
    candidate.assert_outcomes(passed=1, failed=1)
    digests = {
        m["model"]: m["params"]["prompts_hash"]
        for name in ("ref.json", "cand.json")
        for m in recorded(project, name)
        if m["benchmark"] == "my_shape"
    }
    assert digests["ref"] != digests["cand"]
    assert one_line(candidate, "refusing to pair") == (
        f"refusing to pair cand with ref on my_shape: prompt source differs (cand: your prompts "
        f"(hash {digests['cand']}), ref: your prompts (hash {digests['ref']})); measure "
        "both with the same request settings"
    )


def test_a_capacity_ratio_refuses_searches_under_another_slo_or_target(
    pytester: pytest.Pytester,
) -> None:
    # both paced alike, each a llama-server of one slot (its /props say so), so that each
    # search decides c1 alone; the refusal is drawn before any figure is read, so a token
    # every millisecond or so (asyncio's timer), well within either SLO, keeps the searches short
    with (
        ListingServer(
            REFERENCE, per_token_s_per_inflight=0.001, slots=1, build_info="b1-fake"
        ) as reference,
        ListingServer(
            CANDIDATE, per_token_s_per_inflight=0.001, slots=1, build_info="b1-fake"
        ) as candidate,
    ):
        servers = Servers(reference, candidate)
        run_capacity(
            pytester,
            *servers.args,
            "--slo=tpot=6ms",
            "--slo-attainment=0.5",
            f"--model={REFERENCE}",
            "-m",
            "capacity and not verdict",
        ).assert_outcomes(passed=1)
        slo = run_capacity(
            pytester,
            *servers.args,
            "--slo=tpot=7ms",
            "--slo-attainment=0.5",
            f"--model={CANDIDATE}",
        )
        target = run_capacity(
            pytester,
            *servers.args,
            "--slo=tpot=6ms",
            "--slo-attainment=0.6",
            f"--model={CANDIDATE}",
        )
    slo.assert_outcomes(passed=1, failed=1)
    assert one_line(slo, "refusing to pair") == (
        f"refusing to pair {CANDIDATE} with {REFERENCE} on capacity: slo differs ({CANDIDATE}: "
        f'{{"tpot_ms": 7.0}}, {REFERENCE}: {{"tpot_ms": 6.0}}); measure both with the same '
        "request settings"
    )
    target.assert_outcomes(passed=1, failed=1)
    assert one_line(target, "refusing to pair") == (
        f"refusing to pair {CANDIDATE} with {REFERENCE} on capacity: attainment_target differs "
        f"({CANDIDATE}: 0.6, {REFERENCE}: 0.5); measure both with the same request settings"
    )


@pytest.fixture
def two_runs_of_ref(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    arithmetic: tuple[ArithmeticServer, ArithmeticServer],
) -> pytest.RunResult:
    """The reference's accuracy saved as baseline ``b`` with 8 tokens an answer, then a run
    with 16 against it."""
    run(
        project,
        monkeypatch,
        arithmetic,
        {"MAX_TOKENS": "8"},
        "-m",
        "my_eval",
        "--model=ref",
        "--results=first.json",
        "--save-baseline=b",
    ).assert_outcomes(passed=1, skipped=1)
    return run(
        project,
        monkeypatch,
        arithmetic,
        {"MAX_TOKENS": "16"},
        "-m",
        "my_eval",
        "--model=ref",
        "--results=second.json",
        "--baseline=b",
    )


NOT_COMPARABLE = (
    "refusing to pair ref now with ref in the baseline on my_eval: item q00's "
    "max_tokens differs (ref now: 16, ref in the baseline: 8); measure both with "
    "the same request settings"
)


def test_the_gate_calls_a_run_with_other_request_settings_not_comparable(
    two_runs_of_ref: pytest.RunResult,
) -> None:
    assert two_runs_of_ref.ret == pytest.ExitCode.TESTS_FAILED
    (row,) = [line for line in two_runs_of_ref.stdout.lines if "NOT COMPARABLE" in line]
    assert row.split()[:2] == ["ref", "my_eval"] and row.endswith(NOT_COMPARABLE)


def test_compare_calls_two_runs_with_other_request_settings_not_comparable(
    project: pytest.Pytester,
    two_runs_of_ref: pytest.RunResult,
    capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()
    first, second = (str(project.path / name) for name in ("first.json", "second.json"))
    assert main(["compare", first, second, "--store", str(project.path / "store.sqlite")]) == 1
    lines = capsys.readouterr().out.splitlines()
    (row,) = [line for line in lines if line.startswith("ref ")]
    assert "NOT COMPARABLE" in row and row.endswith(NOT_COMPARABLE)
    assert lines[-1] == "1 regressed, not comparable or inconclusive of 1"


def test_merge_refuses_runs_of_one_benchmark_with_other_settings(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    arithmetic: tuple[ArithmeticServer, ArithmeticServer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the reference on 40 items on one machine, the candidate on 45 on another
    run(
        project,
        monkeypatch,
        arithmetic,
        {"MAX_TOKENS": "8"},
        "-m",
        "my_eval and not verdict",
        "--model=ref",
        "--limit=40",
        "--results=r40.json",
    ).assert_outcomes(passed=1)
    run(
        project,
        monkeypatch,
        arithmetic,
        {"MAX_TOKENS": "8"},
        "-m",
        "my_eval and not verdict",
        "--model=cand",
        "--limit=45",
        "--results=r45.json",
    ).assert_outcomes(passed=1)
    capsys.readouterr()
    runs = {
        name: json.loads((project.path / name).read_text())["run"]["run_id"]
        for name in ("r40.json", "r45.json")
    }
    merged = project.path / "merged.json"
    assert (
        main(
            [
                "merge",
                str(project.path / "r40.json"),
                str(project.path / "r45.json"),
                "-o",
                str(merged),
            ]
        )
        == 2
    )
    out, err = capsys.readouterr()
    assert out == "" and not merged.exists()
    assert err == (
        f"modelsweep: error: refusing to pair cand in run {runs['r45.json']} with ref "
        f"in run {runs['r40.json']} on my_eval: limit differs (cand in run "
        f"{runs['r45.json']}: 45, ref in run {runs['r40.json']}: 40); measure both "
        "with the same request settings\n"
    )
