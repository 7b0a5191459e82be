"""Baseline gating: an unchanged re-run passes, a worse one fails the session with a table."""

from __future__ import annotations

import math
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


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, correct: int,
        tps: str, *args: str) -> pytest.RunResult:
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
    worse.stdout.fnmatch_lines([
        "*modelsweep baseline main: 2 regressed or not comparable*",
        "*model*benchmark*setting*baseline*now*change*interval*status*",
        "*smollm2-135m*gsm8k*limit=200*50.0%*35.0%*-15.0pp*REGRESSED*n=200, discordant=30*",
        "*smollm2-135m*throughput*concurrency=4*100.0*80.0*-20.0%*REGRESSED*",
    ])
    assert "Traceback" not in worse.stdout.str()


def test_an_accuracy_change_on_fewer_than_ten_items_is_judged_by_the_exact_sign_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(BENCH)
    run(pytester, monkeypatch, 100, "100,101,99", "--save-baseline", "main").assert_outcomes(
        passed=2)
    # 5 items worse: no interval holds, and 5 to 0 is p = 2/32 = 0.0625: no alarm, never "ok"
    fewer = run(pytester, monkeypatch, 95, "100,102,98", "--baseline", "main")
    assert fewer.ret == pytest.ExitCode.OK
    fewer.stdout.fnmatch_lines([
        "*smollm2-135m*gsm8k*limit=200*50.0%*47.5%*-2.5pp*no interval*n=200, discordant=5; "
        "only 5 of 200 items scored differently*exact sign test: 5 items worse, 0 better, "
        "p=0.0625*"])
    # 8 items worse: p = 2/256, a regression the exact test finds where no interval holds
    worse = run(pytester, monkeypatch, 92, "100,102,98", "--baseline", "main")
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines([
        "*smollm2-135m*gsm8k*limit=200*50.0%*46.0%*-4.0pp*REGRESSED*discordant=8; only 8 of "
        "200*exact sign test: 8 items worse, 0 better, p=0.00781*"])


def test_small_drop_within_threshold_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(BENCH)
    run(pytester, monkeypatch, 100, "100,101,99", "--save-baseline", "b").assert_outcomes(passed=2)
    result = run(pytester, monkeypatch, 99, "95,96,94", "--baseline", "b",
                 "--fail-on-regression", "accuracy:1pp,throughput:10%")
    assert result.ret == pytest.ExitCode.OK


def test_unknown_baseline_fails_with_the_fix(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(BENCH)
    result = run(pytester, monkeypatch, 100, "100", "--baseline", "nope")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*--baseline 'nope': no such baseline*save one with --save-baseline NAME*"])


def test_bad_threshold_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--fail-on-regression", "accuracy:1%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*expected e.g. accuracy:1pp,throughput:10%*'accuracy:1%' is not that*"])


def test_parse_thresholds() -> None:
    assert parse_thresholds("accuracy:2.5pp,throughput:5%") == Thresholds(0.025, 0.05)
    assert parse_thresholds("throughput:20%") == Thresholds(0.01, 0.20)
    with pytest.raises(ArgumentTypeError):
        parse_thresholds("latency:5%")


def test_a_changed_server_is_not_comparable() -> None:
    def m(version: str) -> Measurement:
        return Measurement("a", "throughput", 100.0, "tokens/s", 8,
                           stats=ThroughputStats(repeat_values=(100.0, 100.0)),
                           provenance={"server_name": "vllm", "server_version": version})

    [row] = compare_with_baseline([m("0.31")], [m("0.30")], Thresholds())
    assert row.status == "not comparable" and row.failed
    assert "server_version differs (a now: '0.31', a in the baseline: '0.30')" in row.note


def test_smoke_is_not_gated_throughput_is() -> None:
    def m(benchmark: str, value: float) -> Measurement:
        return Measurement("a", benchmark, value, "tokens/s", 1, params={"max_tokens": 32})

    # one smoke generation at half the speed: a single timing, no interval, not a regression;
    # a throughput figure of one repeat has no interval either: listed, not judged, not failed
    rows = compare_with_baseline([m("smoke", 50.0), m("throughput", 50.0)],
                                 [m("smoke", 100.0), m("throughput", 100.0)], Thresholds())
    assert [(row.benchmark, row.status) for row in rows] == [("throughput", "no interval")]
    assert not rows[0].failed and "one repeat now" in rows[0].note


PROV = {"server_name": "llama.cpp", "server_version": "1"}


def tm(values: list[float], concurrency: int = 4, benchmark: str = "throughput",
       provenance: dict[str, Any] = PROV) -> Measurement:
    """A throughput setting's measurement with these repeats (the gate reads nothing else)."""
    return Measurement(
        "a", benchmark, sum(values) / len(values), "tokens/s", 8 * len(values),
        params={"concurrency": concurrency, "prompt_tokens": None, "output_tokens": 256,
                "timed_requests": 8, "repeats": len(values)},
        stats=ThroughputStats(repeat_values=tuple(values)), provenance=provenance,
        outcome="passed")


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
    [row] = compare_with_baseline([tm([100.0, 99.0, 101.0])], [other, tm([100.0, 101.0, 99.0])],
                                  Thresholds())
    assert row.status == "ok" and "1 older baseline run(s) left out" in row.note
