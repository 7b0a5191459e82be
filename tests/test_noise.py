"""Noise made visible through the real throughput bench against fake servers: CV and the
unstable flag, contention per window, --repeats auto, a progress line per repeat. (A CPU hog
beside the bench, which no other test may run beside, is tests/test_contention.py's.)"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scipy.stats import t as student_t
from support.sse_server import DelaySchedule, ListingServer
from support.throughput_bench_run import MODEL, gate_rows, run_bench, stats_of

from pytest_modelsweep.workloads.contention import ContentionMeter

pytest_plugins = ("pytester", "support.throughput_bench_run")  # the fixture steady

WINDOW_FIELDS = {
    "window_s",
    "other_cpu_cores",
    "server_cpu_cores",
    "client_cpu_cores",
    "steal_share",
    "load1_end",
    "contended",
}
linux = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")


SPEEDS = (0.0, 0.0, 0.0, 0.004, 0.004, 0.004)
"""A speed that changes from one repeat to the next: at concurrency 1 with two timed
requests a repeat sends three requests (one warm-up); unpaced, then 4 ms a token, in turn.
A busy machine slows the unpaced repeats too, but never to the paced ones' pace."""


@pytest.fixture
def drifting() -> Iterator[str]:
    with ListingServer(MODEL, schedule=DelaySchedule(SPEEDS)) as server:
        yield server.base_url


@linux
def test_every_measurement_records_its_noise_and_every_window_its_contention(
    pytester: pytest.Pytester,
    steady: str,
) -> None:
    result = run_bench(pytester, steady, "--repeats", "2")
    result.assert_outcomes(passed=1)
    stats = stats_of(pytester)
    values = stats["repeat_values"]
    assert len(values) == len(stats["repeats"]) == 2
    mean = sum(values) / 2
    sd = (sum((v - mean) ** 2 for v in values) / 1) ** 0.5
    assert stats["cv"] == pytest.approx(sd / mean)
    assert stats["unstable_cv_limit"] == 0.10
    assert stats["unstable"] is (stats["cv"] > 0.10)
    assert stats["repeats_rule"] == "fixed" and stats["interval_rule"] == "log-t"
    windows = [r["contention"] for r in stats["repeats"]]
    for w, r in zip(windows, stats["repeats"]):
        assert set(w) == WINDOW_FIELDS
        # attached, on this host: the process listening on its port (this test's) is metered
        assert w["server_cpu_cores"] is not None
        assert w["client_cpu_cores"] > 0 and w["other_cpu_cores"] >= 0
        assert w["window_s"] == pytest.approx(r["duration_s"], rel=0.5, abs=0.05)
        assert isinstance(w["contended"], bool)
    assert stats["contended_windows"] == sum(w["contended"] for w in windows)
    assert stats["contended"] is (stats["contended_windows"] > 0)
    result.stdout.fnmatch_lines(
        [
            f"*throughput {MODEL} c1: repeat 1/2, *.* tokens/s, CV so far n/a, contended: *",
            f"*throughput {MODEL} c1: repeat 2/2, *.* tokens/s, CV so far *.*%, contended: *",
        ]
    )


def test_one_repeat_has_no_cv_and_is_not_unstable(pytester: pytest.Pytester, steady: str) -> None:
    run_bench(pytester, steady, "--repeats", "1").assert_outcomes(passed=1)
    stats = stats_of(pytester)
    assert stats["cv"] is None and stats["unstable"] is False


def test_a_server_whose_speed_varies_is_unstable(pytester: pytest.Pytester, drifting: str) -> None:
    result = run_bench(pytester, drifting, "--repeats", "2")
    result.assert_outcomes(passed=1)
    stats = stats_of(pytester)
    fast, slow = stats["repeat_values"]
    assert fast > 2 * slow
    assert stats["cv"] > 0.3 and stats["unstable"] is True
    # a limit set by the user decides instead of the default 10%
    run_bench(pytester, drifting, "--repeats", "2", "--unstable-cv", "0.99")
    loose = stats_of(pytester)
    assert loose["unstable_cv_limit"] == 0.99 and loose["unstable"] is (loose["cv"] > 0.99)


def test_repeats_auto_stops_at_the_maximum_when_the_interval_stays_wide(
    pytester: pytest.Pytester,
    drifting: str,
) -> None:
    result = run_bench(pytester, drifting, "--repeats", "auto", "--repeats-max", "4")
    result.assert_outcomes(passed=1)
    stats = stats_of(pytester)
    assert len(stats["repeat_values"]) == len(stats["repeats"]) == 4
    assert stats["repeats_rule"] == "auto: two-stage, 4 first, half-width ≤ 5% or 4 repeats"
    assert stats["interval_rule"] == "log-t-two-stage"
    result.stdout.fnmatch_lines(
        [f"*{MODEL} c1: repeat 3/≤4 (auto), *", f"*{MODEL} c1: repeat 4/4 (auto), *"]
    )
    assert "repeat 5/" not in result.stdout.str()


def test_repeats_auto_stops_after_its_first_stage_once_that_meets_the_target(
    pytester: pytest.Pytester,
    steady: str,
) -> None:
    result = run_bench(pytester, steady, "--repeats", "auto", "--repeats-target", "0.99")
    result.assert_outcomes(passed=1)
    stats = stats_of(pytester)
    values = stats["repeat_values"]
    assert len(values) == 4  # the first stage; a 99% target is met with it
    assert stats["repeats_rule"] == "auto: two-stage, 4 first, half-width ≤ 99% or 10 repeats"
    # the recorded interval is the two-stage one: the first stage's spread, 3 df
    logs = [math.log(v) for v in values]
    half = student_t.ppf(0.975, 3) * statistics.stdev(logs) / 2
    low, high = stats["interval"]
    assert math.log(high) - math.log(low) == pytest.approx(2 * half, rel=1e-9)
    result.stdout.fnmatch_lines([f"*{MODEL} c1: repeat 4/4 (auto), *"])


def test_a_long_repeat_prints_a_line_every_tick() -> None:
    from pytest_modelsweep.workloads import setting as bench

    lines: list[str] = []
    meter = ContentionMeter(None)
    with bench.ticker(lines.append, "throughput m c16: repeat 1", meter, every_s=0.05):
        time.sleep(0.15)  # the warm-up
        with meter:
            time.sleep(0.3)
    assert len(lines) >= 3
    assert all(line.startswith("throughput m c16: repeat 1: running ") for line in lines)
    assert lines[0].endswith(" s, warming up")
    assert " s, others' CPU in the timed window so far: " in lines[-1]
    assert lines[-1].endswith(" cores")
    count = len(lines)
    time.sleep(0.25)
    assert len(lines) == count  # the ticker stopped with the repeat


def test_the_gate_calls_an_unstable_setting_unstable_not_regressed(
    pytester: pytest.Pytester,
    steady: str,
    drifting: str,
) -> None:
    # (a busy CI machine, or a hypervisor's steal, must not turn these windows "contended":
    # only instability counts; a real steal of 7% once did)
    quiet = ("--contended-cores", "64", "--contended-steal", "1")
    saved = run_bench(
        pytester, steady, "--repeats", "2", "--store", "s.sqlite", "--save-baseline", "aa", *quiet
    )
    saved.assert_outcomes(passed=1)
    # the same model on a server whose speed jumps between repeats: far slower on average,
    # but its repeats disagree, so the gate says re-run instead of regressed (and passes)
    gated = run_bench(
        pytester, drifting, "--repeats", "2", "--store", "s.sqlite", "--baseline", "aa", *quiet
    )
    gated.assert_outcomes(passed=1)
    assert gated.ret == pytest.ExitCode.OK
    (row,) = gate_rows(pytester)
    assert row["status"] == "unstable" and row["note"].startswith("unstable — re-run")
    gated.stdout.fnmatch_lines(["*throughput*unstable*unstable — re-run: the repeats of*"])
    # a user who wants noisy rows to fail CI says so
    strict = run_bench(
        pytester,
        drifting,
        "--repeats",
        "2",
        "--store",
        "s.sqlite",
        "--baseline",
        "aa",
        "--fail-on-noisy",
        *quiet,
    )
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    assert gate_rows(pytester)[0]["status"] == "unstable"
