"""Conclusions only from sound data: a failed request, test or run never becomes a verdict,
a ratio, a gate row or a baseline.

Every case runs the real accuracy benches (``benches/test_accuracy.py``, with the verdict tests
their declarations add) against fake OpenAI-compatible servers attached with ``--endpoint``, and
checks what a user sees: the exit status, the one line, what the store and results file hold.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import PAIR, SHARED_DATA
from support.requirements import SHARED_DATA_HINT, need
from support.sse_server import ListingServer

ROOT = Path(__file__).resolve().parents[1]
GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"


@pytest.fixture
def accuracy_benches(pytester: pytest.Pytester) -> None:
    """The real accuracy benches (and so their verdicts) in a fresh project."""
    need(GSM8K.is_file(), f"GSM8K data not found at {GSM8K}; {SHARED_DATA_HINT}")
    pytester.makepyfile(test_accuracy=(ROOT / "benches" / "test_accuracy.py").read_text())


@pytest.fixture
def failing_reference() -> Iterator[list[str]]:
    """``--endpoint`` options: the reference answers HTTP 500 to everything, the candidate is fine."""
    with (
        ListingServer("gemma3-270m", default_fault="http500") as reference,
        ListingServer("smollm2-135m") as candidate,
    ):
        yield [
            *PAIR,
            "--endpoint",
            f"gemma3-270m={reference.base_url}",
            "--endpoint",
            f"smollm2-135m={candidate.base_url}",
        ]


@pytest.fixture
def healthy() -> Iterator[list[str]]:
    with ListingServer("gemma3-270m") as reference, ListingServer("smollm2-135m") as candidate:
        yield [
            *PAIR,
            "--endpoint",
            f"gemma3-270m={reference.base_url}",
            "--endpoint",
            f"smollm2-135m={candidate.base_url}",
        ]


def gsm8k(pytester: pytest.Pytester, endpoints: list[str], *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-m",
        "gsm8k",
        f"--gsm8k-path={GSM8K}",
        "--limit",
        "3",
        "--gsm8k-max-tokens",
        "8",
        "--store",
        "store.sqlite",
        "--results",
        "results.json",
        "--md",
        "report.md",
        *endpoints,
        *args,
    )


def results(pytester: pytest.Pytester) -> dict[str, Any]:
    return dict(json.loads((pytester.path / "results.json").read_text()))


def test_a_reference_whose_items_all_failed_is_never_judged(
    pytester: pytest.Pytester,
    accuracy_benches: None,
    failing_reference: list[str],
) -> None:
    result = gsm8k(pytester, failing_reference)
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    # the reference's own test: the failed items are counted, not scored
    result.stdout.fnmatch_lines(
        [
            "*_ test_gsm8k[[]gemma3-270m[]] _*",
            "3 of 3 gsm8k requests got no answer (first: HTTP 500 from /v1/completions*); re-run to "
            "resend them (completed items are reused)",
        ]
    )
    # the verdict: refused in one line, naming what failed, how many, the first error, the fix
    result.stdout.fnmatch_lines(
        [
            "*_ test_verdict[[]smollm2-135m-gsm8k[]] _*",
            "cannot judge smollm2-135m against gemma3-270m on gsm8k: 3 of 3 reference items failed "
            "(HTTP 500 from /v1/completions*); re-run to resend them (completed items are reused)",
        ]
    )
    assert "Traceback" not in out and "matches" not in out
    data = results(pytester)
    assert not any(m["benchmark"].startswith("verdict:") for m in data["measurements"])
    reference = next(m for m in data["measurements"] if m["model"] == "gemma3-270m")
    assert reference["outcome"] == "failed"
    assert reference["stats"]["failed"] == 3 and reference["n"] == 0
    assert [item["error"] is not None for item in reference["items"]] == [True] * 3
    failures = {f["test_id"].split("::")[1]: f for f in data["summary"]["failures"]}
    assert set(failures) == {"test_gsm8k[gemma3-270m]", "test_verdict[smollm2-135m-gsm8k]"}
    assert (
        "3 of 3 reference items failed" in failures["test_verdict[smollm2-135m-gsm8k]"]["message"]
    )
    md = (pytester.path / "report.md").read_text()
    assert "### Failed tests (2)" in md and "3 of 3 reference items failed" in md


def test_when_both_sides_failed_each_names_its_own_error(
    pytester: pytest.Pytester,
    accuracy_benches: None,
) -> None:
    with (
        ListingServer("gemma3-270m", default_fault="http500") as reference,
        ListingServer("smollm2-135m", default_fault="badjson") as candidate,
    ):
        result = gsm8k(
            pytester,
            [
                *PAIR,
                "--endpoint",
                f"gemma3-270m={reference.base_url}",
                "--endpoint",
                f"smollm2-135m={candidate.base_url}",
            ],
        )
    result.assert_outcomes(failed=3)
    (line,) = [line for line in result.stdout.lines if line.startswith("cannot judge")]
    candidate_part, reference_part = line.split("), ")
    assert candidate_part.startswith(
        "cannot judge smollm2-135m against gemma3-270m on gsm8k: 3 of 3 candidate items failed ("
    )
    assert "HTTP 500" not in candidate_part  # the reference's error is not blamed on it
    assert reference_part.startswith("3 of 3 reference items failed (HTTP 500 from /v1/completions")
    assert line.endswith("; re-run to resend them (completed items are reused)")


def test_a_failed_run_is_refused_as_baseline(
    pytester: pytest.Pytester,
    accuracy_benches: None,
    failing_reference: list[str],
) -> None:
    result = gsm8k(pytester, failing_reference, "--save-baseline", "nightly", "-k", "gemma3")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "modelsweep: --save-baseline nightly: refused, a baseline is made only from a run whose "
            "every modelsweep test passed; 1 did not (first: *test_gsm8k[[]gemma3-270m[]] failed: "
            "3 of 3 gsm8k requests got no answer*",
        ]
    )
    with sqlite3.connect(pytester.path / "store.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM baselines").fetchone() == (0,)
    assert "saved this run as baseline" not in result.stdout.str()


def test_a_healthy_run_is_saved_as_baseline_and_a_failed_one_is_not_compared_with_it(
    pytester: pytest.Pytester,
    accuracy_benches: None,
    healthy: list[str],
    failing_reference: list[str],
) -> None:
    saved = gsm8k(pytester, healthy, "-k", "gemma3", "--save-baseline", "nightly")
    saved.assert_outcomes(passed=1)
    assert saved.ret == pytest.ExitCode.OK
    saved.stdout.fnmatch_lines(["*saved this run as baseline 'nightly'*"])
    # the same model, now failing every request: the gate cannot conclude, and says why
    gated = gsm8k(
        pytester, failing_reference, "-k", "gemma3", "--baseline", "nightly", "--no-reuse"
    )
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    gated.stdout.fnmatch_lines(
        [
            "*gemma3-270m*gsm8k*CANNOT CONCLUDE*gemma3-270m gsm8k now comes from a test that failed*",
        ]
    )
    gate = results(pytester)["summary"]["gate"]
    assert [row["status"] for row in gate] == ["cannot conclude"]


def test_nothing_judged_is_not_a_pass(pytester: pytest.Pytester, accuracy_benches: None) -> None:
    result = pytester.runpytest(
        "-m", "verdict", "--store", "empty.sqlite", f"--gsm8k-path={GSM8K}", "-rs", *PAIR
    )
    result.assert_outcomes(skipped=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "modelsweep: 2 comparison test(s) judged nothing, so this run does not pass (first: "
            "*test_verdict[[]smollm2-135m-gsm8k[]]: no gsm8k items of gemma3-270m in this run or in "
            "the store*); run the reference's benchmarks first, or pass --allow-unjudged",
        ]
    )
    allowed = pytester.runpytest(
        "-m",
        "verdict",
        "--store",
        "empty.sqlite",
        f"--gsm8k-path={GSM8K}",
        "--allow-unjudged",
        *PAIR,
    )
    allowed.assert_outcomes(skipped=2)
    assert allowed.ret == pytest.ExitCode.OK


def test_a_candidate_named_alone_brings_its_reference_unless_the_store_has_a_like_run(
    pytester: pytest.Pytester,
    accuracy_benches: None,
) -> None:
    with ListingServer("gemma3-270m") as reference, ListingServer("smollm2-135m") as candidate:
        endpoints = [
            "--endpoint",
            f"gemma3-270m={reference.base_url}",
            "--endpoint",
            f"smollm2-135m={candidate.base_url}",
            "--model",
            "smollm2-135m",
        ]
        alone = gsm8k(pytester, endpoints, "-s")
        first_run = results(pytester)["run"]["run_id"]
        stored = gsm8k(pytester, endpoints, "-s")
        other_items = gsm8k(pytester, endpoints, "--limit", "2")
    assert alone.ret == stored.ret == other_items.ret == pytest.ExitCode.OK
    alone.assert_outcomes(passed=3)  # the reference's gsm8k, the candidate's, the verdict
    alone.stdout.fnmatch_lines(
        [
            "modelsweep: measuring the reference gemma3-270m's gsm8k too: the comparisons need it "
            "and the store holds no like run of it (add --model gemma3-270m to name it yourself)",
            "*smollm2-135m vs gemma3-270m on gsm8k: *",
        ]
    )
    stored.assert_outcomes(passed=2)  # the reference's test deselected: its run is stored
    stored.stdout.fnmatch_lines(
        [
            f"modelsweep: the reference gemma3-270m's gsm8k comes from the store (run {first_run})",
            "*smollm2-135m vs gemma3-270m on gsm8k: *",
        ]
    )
    other_items.assert_outcomes(passed=3)  # --limit 2 asks for other items than the stored 3
    other_items.stdout.fnmatch_lines(["modelsweep: measuring the reference gemma3-270m's gsm8k*"])


def test_fewer_records_than_the_limit_are_measured_with_a_warning(
    pytester: pytest.Pytester,
    accuracy_benches: None,
    healthy: list[str],
) -> None:
    data = pytester.mkdir("data")
    lines = GSM8K.read_text().splitlines()
    (data / "test.jsonl").write_text("\n".join(lines[:2]) + "\n")
    (data / "train.jsonl").write_text((GSM8K.parent / "train.jsonl").read_text())
    result = pytester.runpytest(
        "-m",
        "gsm8k",
        f"--gsm8k-path={data / 'test.jsonl'}",
        "--limit",
        "5",
        "--gsm8k-max-tokens",
        "8",
        "--store",
        "s.sqlite",
        "--results",
        "results.json",
        "-k",
        "gemma3 and not verdict",
        *healthy,
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "modelsweep: warning: --limit 5, but the GSM8K data has only 2 records: all 2 are measured"
        ]
    )
    measurement = results(pytester)["measurements"][0]
    assert measurement["n"] == 2 and measurement["params"]["limit"] == 2


def test_an_empty_data_file_is_an_error(
    pytester: pytest.Pytester,
    accuracy_benches: None,
    healthy: list[str],
) -> None:
    data = pytester.mkdir("data")
    (data / "test.jsonl").write_text("")
    (data / "train.jsonl").write_text((GSM8K.parent / "train.jsonl").read_text())
    result = pytester.runpytest(
        "-m",
        "gsm8k",
        f"--gsm8k-path={data / 'test.jsonl'}",
        "--limit",
        "2",
        "--store",
        "s.sqlite",
        "-k",
        "gemma3 and not verdict",
        "--results",
        "results.json",
        "--md",
        "r.md",
        *healthy,
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the GSM8K data has no records; pass a data file that has*"])
    assert "During handling" not in result.stdout.str()
    # every test errored, and still the results and the Markdown list what went wrong
    failures = results(pytester)["summary"]["failures"]
    assert [(f["when"], f["outcome"]) for f in failures] == [("setup", "error")]
    assert failures[0]["message"] == "the GSM8K data has no records; pass a data file that has"
    assert "the GSM8K data has no records" in (pytester.path / "r.md").read_text()


def test_a_repeated_endpoint_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(model_name): pass")
    result = pytester.runpytest(
        "--endpoint",
        "gemma3-270m=http://127.0.0.1:1",
        "--endpoint",
        "gemma3-270m=http://127.0.0.1:2",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--endpoint gemma3-270m= is given twice; give each model one URL*"]
    )


def test_a_ratio_is_never_drawn_from_a_throughput_test_that_failed(
    pytester: pytest.Pytester,
) -> None:
    """The reference streams 200 of 256 tokens: its test records its figures, then fails."""
    pytester.makepyfile(test_throughput=(ROOT / "benches" / "test_throughput.py").read_text())
    with (
        ListingServer("gemma3-270m", default_fault="short:200") as reference,
        ListingServer("smollm2-135m") as candidate,
    ):
        result = pytester.runpytest(
            "-k",
            "c1 and not c16",
            "--repeats",
            "2",
            "--timed-requests",
            "2",
            "--store",
            "s.sqlite",
            "--results",
            "r.json",
            *PAIR,
            "--endpoint",
            f"gemma3-270m={reference.base_url}",
            "--endpoint",
            f"smollm2-135m={candidate.base_url}",
        )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_throughput_ratio[[]smollm2-135m-c1[]] _*",
            "gemma3-270m's throughput result at concurrency 1 in this run comes from a test that "
            "failed (test_throughput.py::test_throughput[[]gemma3-270m-c1[]]): no comparison is "
            "drawn from it; fix that test's failure and re-run it",
        ]
    )
    measurements = json.loads((pytester.path / "r.json").read_text())["measurements"]
    assert [m["benchmark"] for m in measurements].count("throughput_ratio") == 0
    assert {m["model"]: m["outcome"] for m in measurements} == {
        "gemma3-270m": "failed",
        "smollm2-135m": "passed",
    }


def test_compare_and_merge_refuse_a_run_with_failed_items(
    pytester: pytest.Pytester,
    accuracy_benches: None,
    healthy: list[str],
    failing_reference: list[str],
) -> None:
    import subprocess
    import sys

    gsm8k(pytester, healthy, "-k", "gemma3").assert_outcomes(passed=1)
    good = results(pytester)["run"]["run_id"]
    gsm8k(pytester, failing_reference, "-k", "gemma3", "--no-reuse").assert_outcomes(failed=1)
    bad = results(pytester)["run"]["run_id"]
    cli = [sys.executable, "-m", "pytest_modelsweep.cli"]
    compared = subprocess.run(
        [*cli, "compare", good, bad, "--store", "store.sqlite"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
    )
    assert compared.returncode == 1, compared.stdout + compared.stderr
    assert "CANNOT CONCLUDE" in compared.stdout and " ok " not in compared.stdout
    assert "gemma3-270m gsm8k now comes from a test that failed" in compared.stdout
    merged = subprocess.run(
        [*cli, "merge", good, bad, "-o", "m.json", "--store", "store.sqlite"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
    )
    assert merged.returncode != 0
    assert (
        f"refusing to merge run {bad}: 1 of its measurements support no conclusion" in merged.stderr
    )
    assert not (pytester.path / "m.json").exists()
