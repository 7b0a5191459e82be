"""Baseline gating: an unchanged re-run passes, a worse one fails the session with a table."""

from __future__ import annotations

import json
import math
import re
from argparse import ArgumentTypeError
from typing import Any

import pytest

from pytest_modelsweep.core.measurements import Measurement, ThroughputStats
from pytest_modelsweep.core.options import Thresholds, parse_thresholds
from pytest_modelsweep.judging.gate import compare_with_baseline

pytest_plugins = ("pytester",)

# Each model "measures" GSM8K items and a throughput figure from environment variables, so
# that one test file can be re-run with better or worse results against a stored baseline.
BENCH = """
import os, pytest
from pytest_modelsweep.core.records import ItemRecord

PROV = {"server_name": "s", "server_version": "1", "image_digest": None,
        "server_settings": {"total_slots": 16}}

@pytest.mark.gsm8k
def test_gsm8k(model_name, record_measurement):
    correct = int(os.environ["CORRECT"])
    items = [ItemRecord(item_id=f"q{i:03d}", prompt_hash="p", correct=i < correct,
                        response="", data_hash="d").to_dict() for i in range(200)]
    record_measurement("gsm8k", correct / 200, "accuracy", 200, items=items,
                       params={"limit": 200, "max_tokens": int(os.environ.get("MAX_TOKENS", 2048))})

@pytest.mark.throughput
def test_throughput(model_name, record_measurement):
    values = [float(v) for v in os.environ["TOKENS_PER_S"].split(",")]
    record_measurement("throughput", sum(values) / len(values), "tokens/s", 64,
                       params={"concurrency": 4}, stats={"repeat_values": values})
"""


def run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, correct: int, tps: str, *args: str
) -> pytest.RunResult:
    monkeypatch.setenv("CORRECT", str(correct))
    monkeypatch.setenv("TOKENS_PER_S", tps)
    return pytester.runpytest("--modelsweep-dir", "work", "--model", "smollm2-135m", *args)


def test_unchanged_rerun_passes_and_worse_rerun_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(BENCH)
    first = run(pytester, monkeypatch, 100, "100,101,99", "--save-baseline", "main")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["*saved this run as baseline 'main'*"])

    same = run(pytester, monkeypatch, 100, "100,102,98", "--baseline", "main")
    assert same.ret == pytest.ExitCode.OK
    same.stdout.fnmatch_lines(["*modelsweep baseline main: no regression*"])

    # worse answers to the same requests (another MAX_TOKENS would be another setting, not
    # comparable: test_like_with_like.py)
    worse = run(pytester, monkeypatch, 70, "80,81,79", "--baseline", "main")
    worse.assert_outcomes(passed=2)  # every test passed; the gate fails the session
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines(
        [
            "*modelsweep baseline main: 2 regressed or not comparable*",
            "*model*benchmark*setting*baseline*now*change*interval*status*",
            "*smollm2-135m*gsm8k*limit=200*50.0%*35.0%*-15.0pp*REGRESSED*n=200, discordant=30*",
            "*smollm2-135m*throughput*concurrency=4*100.0*80.0*-20.0%*REGRESSED*",
        ]
    )
    assert "Traceback" not in worse.stdout.str()


def test_an_accuracy_change_on_fewer_than_ten_items_is_judged_by_the_exact_sign_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(BENCH)
    run(pytester, monkeypatch, 100, "100,101,99", "--save-baseline", "main").assert_outcomes(
        passed=2
    )
    # 5 items worse: no interval holds, and 5 to 0 is p = 2/32 = 0.0625: no alarm, never "ok"
    fewer = run(pytester, monkeypatch, 95, "100,102,98", "--baseline", "main")
    assert fewer.ret == pytest.ExitCode.OK
    fewer.stdout.fnmatch_lines(
        [
            "*smollm2-135m*gsm8k*limit=200*50.0%*47.5%*-2.5pp*no interval*n=200, discordant=5; "
            "only 5 of 200 items scored differently*exact sign test: 5 items worse, 0 better, "
            "p=0.0625*"
        ]
    )
    # 8 items worse: p = 2/256, a regression the exact test finds where no interval holds
    worse = run(pytester, monkeypatch, 92, "100,102,98", "--baseline", "main")
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines(
        [
            "*smollm2-135m*gsm8k*limit=200*50.0%*46.0%*-4.0pp*REGRESSED*discordant=8; only 8 of "
            "200*exact sign test: 8 items worse, 0 better, p=0.00781*"
        ]
    )


def test_small_drop_within_threshold_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(BENCH)
    run(pytester, monkeypatch, 100, "100,101,99", "--save-baseline", "b").assert_outcomes(passed=2)
    result = run(
        pytester,
        monkeypatch,
        99,
        "95,96,94",
        "--baseline",
        "b",
        "--fail-on-regression",
        "accuracy:1pp,throughput:10%",
    )
    assert result.ret == pytest.ExitCode.OK


def test_unknown_baseline_fails_with_the_fix(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A usage error before any test runs (not a gate line after them all)."""
    pytester.makepyfile(BENCH)
    result = run(pytester, monkeypatch, 100, "100", "--baseline", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --baseline 'nope': no such baseline in work/store.sqlite "
            "(none saved yet) and no results file there; save one with "
            "--save-baseline NAME"
        ]
    )
    assert "passed" not in result.stdout.str() and "no regression" not in result.stdout.str()


def test_bad_threshold_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--fail-on-regression", "accuracy:1%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*expected e.g. accuracy:1pp,throughput:10%*'accuracy:1%' is not that*"]
    )


def test_parse_thresholds() -> None:
    assert parse_thresholds("accuracy:2.5pp,throughput:5%") == Thresholds(0.025, 0.05)
    assert parse_thresholds("throughput:20%") == Thresholds(0.01, 0.20)
    with pytest.raises(ArgumentTypeError):
        parse_thresholds("latency:5%")


def test_a_changed_server_is_not_comparable() -> None:
    def m(version: str) -> Measurement:
        return Measurement(
            "a",
            "throughput",
            100.0,
            "tokens/s",
            8,
            stats=ThroughputStats(repeat_values=(100.0, 100.0)),
            provenance={"server_name": "vllm", "server_version": version},
        )

    [row] = compare_with_baseline([m("0.31")], [m("0.30")], Thresholds())
    assert row.status == "not comparable" and row.failed
    assert "server_version differs (a now: '0.31', a in the baseline: '0.30')" in row.note


def test_smoke_is_not_gated_throughput_is() -> None:
    def m(benchmark: str, value: float) -> Measurement:
        return Measurement("a", benchmark, value, "tokens/s", 1, params={"max_tokens": 32})

    # one smoke generation at half the speed: a single timing, no interval, not a regression;
    # a throughput figure of one repeat has no interval either: listed, not judged, not failed
    rows = compare_with_baseline(
        [m("smoke", 50.0), m("throughput", 50.0)],
        [m("smoke", 100.0), m("throughput", 100.0)],
        Thresholds(),
    )
    assert [(row.benchmark, row.status) for row in rows] == [("throughput", "no interval")]
    assert not rows[0].failed and "one repeat now" in rows[0].note


PROV = {"server_name": "llama.cpp", "server_version": "1"}


def tm(
    values: list[float],
    concurrency: int = 4,
    benchmark: str = "throughput",
    provenance: dict[str, Any] = PROV,
) -> Measurement:
    """A throughput setting's measurement with these repeats (the gate reads nothing else)."""
    return Measurement(
        "a",
        benchmark,
        sum(values) / len(values),
        "tokens/s",
        8 * len(values),
        params={
            "concurrency": concurrency,
            "prompt_tokens": None,
            "output_tokens": 256,
            "timed_requests": 8,
            "repeats": len(values),
        },
        stats=ThroughputStats(repeat_values=tuple(values)),
        provenance=provenance,
        outcome="passed",
    )


def test_throughput_regresses_only_when_the_whole_interval_is_beyond_the_threshold() -> None:
    base = [100.0, 101.0, 99.0]
    [slower] = compare_with_baseline([tm([80.0, 81.0, 79.0])], [tm(base)], Thresholds())
    assert slower.status == "regressed" and slower.high < -0.10 and slower.failed
    # 12% slower on average, but the interval reaches above -10%: not judged a regression
    [noisy] = compare_with_baseline([tm([80.0, 95.0, 89.0])], [tm(base)], Thresholds())
    assert noisy.change < -0.10 and noisy.high > -0.10 and noisy.status == "ok"
    [faster] = compare_with_baseline([tm([130.0, 131.0, 129.0])], [tm(base)], Thresholds())
    assert faster.status == "improved" and faster.low > 0.10


def test_holm_levels_across_a_models_throughput_rows() -> None:
    base = [tm([100.0, 101.0, 99.0], c) for c in (1, 4, 16)]
    now = [tm([80.0, 81.0, 79.0], 1), tm([100.0, 102.0, 98.0], 4), tm([101.0, 99.0, 100.0], 16)]
    rows = compare_with_baseline(now, base, Thresholds())
    assert [r.status for r in rows] == ["regressed", "ok", "ok"]
    # the first step is at 1 - 0.10/3, the next at 1 - 0.10/2 where stepping stops
    assert math.isclose(rows[0].confidence, 1 - 0.10 / 3)
    assert all(math.isclose(r.confidence, 1 - 0.10 / 2) for r in rows[1:])
    assert "Holm step 1 of 3" in rows[0].note


def test_a_baseline_of_several_runs_widens_the_interval_by_their_spread() -> None:
    now = tm([90.0, 91.0, 89.0])
    [single] = compare_with_baseline([now], [tm([100.0, 101.0, 99.0])], Thresholds())
    history = [tm([100.0, 101.0, 99.0]), tm([88.0, 89.0, 87.0]), tm([112.0, 111.0, 113.0])]
    [several] = compare_with_baseline([now], history, Thresholds())
    assert "over 3 baseline runs" in several.note
    assert several.high - several.low > 3 * (single.high - single.low)
    assert several.status == "ok"


def test_a_baseline_run_of_another_server_is_left_out_of_the_history() -> None:
    other = tm([50.0, 51.0, 49.0], provenance={"server_name": "llama.cpp", "server_version": "0"})
    [row] = compare_with_baseline(
        [tm([100.0, 99.0, 101.0])], [other, tm([100.0, 101.0, 99.0])], Thresholds()
    )
    assert row.status == "ok" and "1 older baseline run(s) left out" in row.note


# --------------------------------------------------------------------------- the gate says what it gated
# A new user's project (tests/support/user_projects.py): their own benchmark, run against the fake server.

from support.pytest_runs import run_pytest  # noqa: E402
from support.sse_server import SseServer  # noqa: E402
from support.user_projects import (  # noqa: E402
    MODELS,
    SHAPE,
    assert_no_traceback,
    eval_bench,
    options,
    project,
)


def user_run(
    pytester: pytest.Pytester, server: SseServer, *args: str, own_process: bool = False
) -> pytest.RunResult:
    """In process; ``own_process`` for a run that kills itself."""
    return run_pytest(
        pytester, *options(server.base_url, "--modelsweep-dir=work", *args), own_process=own_process
    )


def test_save_baseline_from_a_verdict_only_run_is_refused(pytester: pytest.Pytester) -> None:
    """Verdicts are not gated: a baseline of them would gate nothing, and later runs would
    show every row new, "no regression", rc 0."""
    project(pytester, test_mine=eval_bench())
    with SseServer(served_names=MODELS) as server:
        user_run(pytester, server, "-k", "not verdict").assert_outcomes(passed=3)
        result = user_run(pytester, server, "-m", "verdict", "--save-baseline=main")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "modelsweep: --save-baseline main: refused, this run holds no measurement the gate "
            "compares (accuracy or throughput; it measured verdict:my_eval); save a run of the "
            "benchmarks themselves"
        ]
    )
    assert "saved this run" not in result.stdout.str()
    assert_no_traceback(result)


KILLED_FIRST = """
import os, signal

def test_killed(model_name):
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_interrupted_runs_results_without_measurements_is_no_baseline(
    pytester: pytest.Pytester,
) -> None:
    """A run killed before its first measurement leaves a journal of 0 measurements: given to
    --baseline it is a usage error before any test runs, not a gate of nothing."""
    project(pytester, test_killed=KILLED_FIRST)
    with SseServer(served_names=MODELS) as server:
        killed = user_run(pytester, server, "--results=killed.json", own_process=True)
        assert killed.ret < 0  # SIGKILL
        assert (pytester.path / "killed.json.partial.jsonl").is_file()
        (pytester.path / "test_killed.py").unlink()
        pytester.makepyfile(test_mine=eval_bench())
        result = user_run(pytester, server, "--baseline=killed.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        "ERROR: --baseline 'killed.json': the results file killed.json holds no measurement the "
        "gate compares (0 measurements, none of accuracy or throughput: an interrupted or "
        "comparison-only run); give a baseline saved from a run of the benchmarks"
    )
    assert server.stats.bodies == []


@pytest.mark.parametrize("allow", [False, True], ids=["fails", "allowed"])
def test_a_gate_that_compared_nothing_says_so(pytester: pytest.Pytester, allow: bool) -> None:
    """The baseline measured the reference only, this run the candidate only: every row is
    new, so nothing was gated; that fails unless --allow-ungated."""
    project(pytester, test_mine=eval_bench())
    with SseServer(served_names=MODELS) as server:
        user_run(
            pytester, server, "--model=ref", "-k", "not verdict", "--save-baseline=main"
        ).assert_outcomes(passed=1)
        result = user_run(
            pytester,
            server,
            "--model=cand",
            "-k",
            "not verdict",
            "--baseline=main",
            *(["--allow-ungated"] if allow else []),
        )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*= modelsweep baseline main: compared nothing =*",
            "*cand*my_eval*new*no baseline for this setting*",
        ]
    )
    line = (
        "modelsweep: --baseline main: compared nothing: none of this run's 1 gated "
        "measurements has one of the same model, benchmark and setting in the baseline "
        "(first: cand my_eval subset=False); run the baseline's benchmarks (same models and "
        "settings), or pass --allow-ungated"
    )
    if allow:
        assert result.ret == pytest.ExitCode.OK and line not in result.stdout.lines
    else:
        assert result.ret == pytest.ExitCode.TESTS_FAILED and line in result.stdout.lines
        assert "no regression" not in result.stdout.str()


def test_gate_rows_of_a_users_throughput_benchmark_are_in_tokens_per_s(
    pytester: pytest.Pytester,
) -> None:
    """Each unit in its own unit: tokens/s as tokens/s (once 781630.6%), the change in %."""
    project(pytester, test_shape=SHAPE)
    args = (
        "--model=ref",
        "-k",
        "not ratio",
        "--repeats=2",
        "--contended-cores=64",
        "--contended-steal=1",
        "--unstable-cv=10",
    )
    with SseServer(served_names=MODELS) as server:
        user_run(
            pytester, server, *args, "--save-baseline=main", "--results=first.json"
        ).assert_outcomes(passed=1)
        result = user_run(pytester, server, *args, "--baseline=main", "--results=second.json")
    first, second = (
        json.loads((pytester.path / name).read_text())["measurements"][0]
        for name in ("first.json", "second.json")
    )
    row = next(
        line for line in result.stdout.lines if line.startswith("ref ") and "my_shape" in line
    )
    # baseline and now in tokens/s, the change (a ratio of geometric means) and its interval in %
    shown = re.escape(f"{first['value']:.1f}") + r"\s+" + re.escape(f"{second['value']:.1f}")
    assert re.search(shown + r"\s+[+-]\d+\.\d%\s+\[[+-]\d+\.\d%, [+-]\d+\.\d%\]", row), row
    assert f"{100 * first['value']:.1f}%" not in row
    assert_no_traceback(result)
