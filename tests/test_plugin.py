"""The plugin seen from pytest: options, ids, ordering, errors, results, xdist hand-over."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest
from support.paths import PAIR, TWO_WORKERS, write_sweep
from support.stores import raw_sql

RunPytest = Callable[..., pytest.RunResult]  # the run_both_ways fixture (conftest.py)

pytest_plugins = ("pytester",)

RECORDING_TEST = """
import os
import pytest

@pytest.mark.parametrize("concurrency", [1, 4], ids=lambda c: f"c{c}")
def test_bench(model_name, concurrency, record_measurement):
    record_measurement("fake-bench", 10.0 * concurrency, "tokens/s", 3,
                       params={"concurrency": concurrency,
                               "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")})

def test_fails_after_recording(model_name, record_measurement):
    record_measurement("kept", 1.5, "ratio", 1)
    assert False, "the check after the measurement failed"

def test_plain():
    pass
"""


def results_of(pytester: pytest.Pytester, name: str = "results.json") -> dict:
    return json.loads((pytester.path / name).read_text())


def test_help_shows_the_option_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*LLM serving benchmarks (pytest-modelsweep)*"])
    for option in (
        "--model=NAME",
        "--reference=NAME",
        "--sweep=PATH",
        "--endpoint=NAME=URL",
        "--results=PATH",
    ):
        result.stdout.fnmatch_lines([f"*{option}*"])


def test_ids_start_with_the_model_and_models_run_together(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(RECORDING_TEST)
    result = pytester.runpytest("--collect-only", "-q")
    lines = [line for line in result.stdout.lines if "::" in line]
    assert lines == [
        "test_ids_start_with_the_model_and_models_run_together.py::test_bench[gemma3-270m-c1]",
        "test_ids_start_with_the_model_and_models_run_together.py::test_bench[gemma3-270m-c4]",
        "test_ids_start_with_the_model_and_models_run_together.py::test_fails_after_recording[gemma3-270m]",
        "test_ids_start_with_the_model_and_models_run_together.py::test_bench[smollm2-135m-c1]",
        "test_ids_start_with_the_model_and_models_run_together.py::test_bench[smollm2-135m-c4]",
        "test_ids_start_with_the_model_and_models_run_together.py::test_fails_after_recording[smollm2-135m]",
        "test_ids_start_with_the_model_and_models_run_together.py::test_bench[qwen2.5-coder-0.5b-c1]",
        "test_ids_start_with_the_model_and_models_run_together.py::test_bench[qwen2.5-coder-0.5b-c4]",
        "test_ids_start_with_the_model_and_models_run_together.py::test_fails_after_recording[qwen2.5-coder-0.5b]",
        "test_ids_start_with_the_model_and_models_run_together.py::test_plain",
    ]


def test_model_option_selects_that_model_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(RECORDING_TEST)
    result = pytester.runpytest("--collect-only", "-q", "--model", "smollm2-135m")
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids and all("gemma3-270m" not in line for line in ids)
    assert sum("smollm2-135m" in line for line in ids) == 3


def test_unknown_model_is_a_usage_error_listing_known_names(
    pytester: pytest.Pytester, run_both_ways: RunPytest
) -> None:
    pytester.makepyfile(RECORDING_TEST)
    result = run_both_ways("--model", "qwen9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*unknown model 'qwen9' in sweep 'embedded'*known models: gemma3-270m, smollm2-135m, "
            "qwen2.5-coder-0.5b"
        ]
    )


def test_malformed_sweep_is_a_usage_error_naming_the_key(
    pytester: pytest.Pytester, run_both_ways: RunPytest
) -> None:
    pytester.makepyfile(RECORDING_TEST)
    sweep = pytester.path / "bad.toml"
    sweep.write_text(
        '[sweep]\nname="x"\nreference="a"\n[serving]\nbackend="tgi"\n'
        '[models.a]\nsource="embedded:x"\nlicense="mit"\nprompting="chat"\n'
    )
    result = run_both_ways("--sweep", str(sweep))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*{sweep}: serving.backend: expected one of 'llamacpp'*got 'tgi'"]
    )


def test_measurements_reach_the_results_file_even_from_failed_tests(
    pytester: pytest.Pytester, run_both_ways: RunPytest
) -> None:
    pytester.makepyfile(RECORDING_TEST)
    result = run_both_ways("--results", "results.json", *PAIR)
    result.assert_outcomes(passed=5, failed=2)
    data = results_of(pytester)
    assert data["schema"] == "pytest-modelsweep/results/3"
    assert data["run"]["sweep_name"] == "embedded"
    assert data["run"]["machine"]["cpu_count"] >= 1
    by_test = {m["test_id"].split("::")[1]: m for m in data["measurements"]}
    assert by_test["test_bench[smollm2-135m-c4]"]["value"] == 40.0
    assert by_test["test_bench[smollm2-135m-c4]"]["model"] == "smollm2-135m"
    kept = by_test["test_fails_after_recording[gemma3-270m]"]
    assert kept["outcome"] == "failed" and kept["value"] == 1.5
    assert not (pytester.path / "results.json.partial.jsonl").exists()
    result.stdout.fnmatch_lines(["*modelsweep measurements*", "*smollm2-135m*fake-bench*40*"])


def test_a_figure_its_record_would_drop_is_kept_or_refused_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    """An accuracy run's own figures are kept among its ``figures``; a throughput record holds
    no figure of the user's own, so recording one fails that test in one line (never dropped)."""
    pytester.makepyfile(
        """
        def test_own(model_name, record_measurement):
            record_measurement("gsm8k", 0.5, "accuracy", 2, stats={"n": 2, "mine": 0.25})
        def test_dropped(model_name, record_measurement):
            record_measurement("mine", 40.0, "tokens/s", 1, stats={"ended": 1.0})
        """
    )
    result = pytester.runpytest("--model", "smollm2-135m", "--results", "results.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*record_measurement('mine', unit 'tokens/s'): the ThroughputStats of this kind of "
            "measurement holds no 'ended'; record such figures in params, or under a unit of "
            "your own"
        ]
    )
    (kept,) = results_of(pytester)["measurements"]
    assert kept["stats"]["figures"] == {"mine": 0.25} and kept["stats"]["n"] == 2


def test_a_value_that_is_not_a_number_fails_its_test_alone_with_one_line(
    pytester: pytest.Pytester,
) -> None:
    """NaN in the store's value column read as a broken store, which then failed every later
    test; now the test that recorded it fails, and the others record and store as before."""
    pytester.makepyfile(
        """
        def test_nan(model_name, record_measurement):
            record_measurement("mine", float("nan"), "ratio", 1)
        def test_inf(model_name, record_measurement):
            record_measurement("mine", float("-inf"), "ratio", 1)
        def test_ok(model_name, record_measurement):
            record_measurement("mine", 2.5, "ratio", 1)
        """
    )
    result = pytester.runpytest(
        "--model", "smollm2-135m", "--results", "results.json", "--store", "s.sqlite"
    )
    result.assert_outcomes(passed=1, failed=2)
    for shown in ("nan", "-inf"):
        result.stdout.fnmatch_lines(
            [
                f"*record_measurement('mine'): its value is {shown}, not a "
                "finite number; record what was measured, or fail the "
                "test where nothing was"
            ]
        )
    assert "Traceback" not in result.stdout.str() and "cannot write" not in result.stdout.str()
    assert [
        (m["test_id"].split("::")[1], m["value"]) for m in results_of(pytester)["measurements"]
    ] == [("test_ok[smollm2-135m]", 2.5)]
    ((stored,),) = raw_sql(str(pytester.path / "s.sqlite"), "SELECT value FROM measurements")[0]
    assert stored == 2.5


def test_workers_hand_measurements_to_the_controller(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(RECORDING_TEST)
    result = pytester.runpytest_subprocess(*TWO_WORKERS, "--results", "results.json", *PAIR)
    result.assert_outcomes(passed=5, failed=2)
    data = results_of(pytester)
    assert len(data["measurements"]) == 6
    workers: dict[str, set[str]] = {}
    for m in data["measurements"]:
        if m["benchmark"] == "fake-bench":
            workers.setdefault(m["model"], set()).add(m["params"]["worker"])
    # every model's tests ran on exactly one worker (the loadgroup regression guard)
    assert {model: len(ws) for model, ws in workers.items()} == {
        "gemma3-270m": 1,
        "smollm2-135m": 1,
    }
    assert all(w.startswith("gw") for ws in workers.values() for w in ws)


def test_many_models_stay_on_one_worker_each(pytester: pytest.Pytester) -> None:
    models = [f"m{i}" for i in range(6)]
    sweep = write_sweep(pytester.path / "many.toml", models)
    pytester.makepyfile(
        """
        import os, pytest
        @pytest.mark.parametrize("i", range(5))
        def test_a(model_name, i, record_measurement):
            record_measurement("w", 0, "", 1, params={"worker": os.environ["PYTEST_XDIST_WORKER"]})
        def test_b(model_name, record_measurement):
            record_measurement("w", 0, "", 1, params={"worker": os.environ["PYTEST_XDIST_WORKER"]})
        """
    )
    result = pytester.runpytest_subprocess(
        *TWO_WORKERS, "--sweep", str(sweep), "--results", "results.json"
    )
    result.assert_outcomes(passed=36)
    workers: dict[str, set[str]] = {}
    for m in results_of(pytester)["measurements"]:
        workers.setdefault(m["model"], set()).add(m["params"]["worker"])
    assert sorted(workers) == models
    assert all(len(ws) == 1 for ws in workers.values()), workers
    assert len(set().union(*workers.values())) == 2  # both workers were used


def test_unreachable_endpoint_fails_that_test_with_one_line(
    pytester: pytest.Pytester, run_both_ways: RunPytest
) -> None:
    pytester.makepyfile(
        """
        def test_uses_server(endpoint):
            pass
        def test_other(model_name):
            pass
        """
    )
    result = run_both_ways(
        "--model", "smollm2-135m", "--endpoint", "smollm2-135m=http://127.0.0.1:9"
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*http://127.0.0.1:9/v1/models did not answer (ConnectError*check that the server is "
            "running and the URL (scheme, host, port) is right"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    # the setup failure is shown once: no chained "During handling..." copy, no fixture dump
    assert "During handling" not in result.stdout.str()
    body = [
        line
        for line in result.stdout.lines
        if "did not answer (ConnectError" in line and not line.startswith("ERROR ")
    ]
    assert len(body) == 1  # (the short summary repeats it under CI=true, as pytest does there)


def test_bad_endpoint_option_is_a_usage_error(
    pytester: pytest.Pytester, run_both_ways: RunPytest
) -> None:
    pytester.makepyfile("def test_x(model_name): pass")
    result = run_both_ways("--endpoint", "localhost:8000")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--endpoint 'localhost:8000': expected NAME=URL*"])


def test_bad_numeric_options(pytester: pytest.Pytester, run_both_ways: RunPytest) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = run_both_ways("--repeats", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--repeats: expected a positive integer*"])


@pytest.mark.parametrize("pause", ["", "sleep 0.3; "], ids=["ends-at-once", "reads-first"])
def test_an_ssh_worker_host_not_reached_is_one_usage_error_line(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    pause: str,
) -> None:
    """``--tx ssh=HOST`` whose ssh fails (status 255: here a stand-in ssh on PATH) is one line
    naming the host and the check, not an INTERNALERROR."""
    fake = pytester.mkdir("bin") / "ssh"
    # ended at once, execnet's write may find its pipe closed; paused, execnet reads its 255
    fake.write_text(f'#!/bin/sh\n{pause}echo "ssh: Could not resolve hostname $1" >&2\nexit 255\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--tx", "ssh=nosuchhost.invalid", "-d")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert [line for line in result.stderr.lines if line.startswith("ERROR:")] == [
        "ERROR: xdist could not reach nosuchhost.invalid over ssh (ssh ended before the worker "
        "started: an unknown host, no route or a refused login): check the --tx spec and that "
        "`ssh nosuchhost.invalid python3 -c pass` works"
    ]


def test_holm_with_xdist_is_a_usage_error_naming_the_two_step_way(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--holm", *TWO_WORKERS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--holm compares every candidate at once*run `pytest benches -m verdict --holm` without -n*"
        ]
    )


def test_a_capacity_ratio_test_marked_with_no_one_search_errors_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    """``judge_capacity_ratio`` compares the search its test is marked with: one of
    ``capacity`` (concurrent requests) and ``rate_capacity`` (requests/s), never none or both."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.verdict
        def test_none(candidate_name, judge_capacity_ratio):
            judge_capacity_ratio()

        @pytest.mark.verdict
        @pytest.mark.capacity
        @pytest.mark.rate_capacity
        def test_both(candidate_name, judge_capacity_ratio):
            judge_capacity_ratio()
        """
    )
    result = pytester.runpytest(*PAIR)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            f"test_{name}[[]smollm2-135m[]] judges a capacity ratio, so it is marked with exactly "
            "one of @pytest.mark.capacity or @pytest.mark.rate_capacity (the search it compares); "
            f"it has {count}"
            for name, count in (("none", 0), ("both", 2))
        ]
    )
    assert "Traceback" not in result.stdout.str()
