"""The contention meter against real processes, the repeats' noise figures, server pids; a CPU
hog beside the real throughput bench (tests/throughput_bench_run.py) and the gate it calls
contended."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from throughput_bench_run import gate_rows, run_bench, stats_of

from pytest_modelsweep.core.measurements import Contention
from pytest_modelsweep.serving.process import ServerProcess, free_port, server_pids_at
from pytest_modelsweep.workloads.contention import (
    ContentionMeter,
    CpuSnapshot,
    coefficient_of_variation,
    contention,
)

pytest_plugins = ("pytester", "throughput_bench_run")  # the fixture steady

linux = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
WINDOW_S = 1.2
FIELDS = {"window_s", "other_cpu_cores", "server_cpu_cores", "client_cpu_cores",
          "steal_share", "load1_end", "contended"}


def test_steal_within_the_counters_resolution_does_not_flag_a_window() -> None:
    """Each CPU's steal counter moves in whole jiffies, so two readings may differ by one per
    CPU more than was stolen: a short window's few jiffies are no proof; beyond them, steal
    above 5% of the window's CPU time flags it, and the recorded share is the one read."""
    def at(wall: float, total: int, steal: int) -> CpuSnapshot:
        return CpuSnapshot(wall=wall, busy=0, total=total, steal=steal, server=None, client=0)

    start = at(0.0, 1_000, 10)
    # 0.2 s on two CPUs at 100 Hz: 40 jiffies
    coarse = contention(start, at(0.2, 1_040, 13), hz=100)
    assert coarse.steal_share == pytest.approx(3 / 40) and coarse.contended is False
    stolen = contention(start, at(0.2, 1_040, 15), hz=100)
    assert stolen.steal_share == pytest.approx(5 / 40) and stolen.contended is True
    # 10 s on two CPUs: 2,000 jiffies, 6% stolen
    long = contention(start, at(10.0, 3_000, 130), hz=100)
    assert long.steal_share == pytest.approx(0.06) and long.contended is True
    assert contention(start, at(10.0, 3_000, 100), hz=100).contended is False


def window(server_pids: list[int] | None = None, work: Any = None) -> Contention:
    with ContentionMeter(server_pids) as meter:
        if work is None:
            time.sleep(WINDOW_S)
        else:
            work(WINDOW_S)
    return meter.result


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.fixture
def hog() -> Iterator[subprocess.Popen[bytes]]:
    """A process that burns one core until it is killed."""
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.3)
    yield process
    process.kill()
    process.wait()


@pytest.fixture
def hog_parent() -> Iterator[subprocess.Popen[bytes]]:
    """A sleeping process whose child burns one core (the server's worker process)."""
    code = ("import subprocess, sys; "
            "subprocess.run([sys.executable, '-c', 'while True: pass'])")
    process = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    time.sleep(0.5)
    yield process
    import os
    import signal

    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@linux
def test_a_cpu_hog_is_contention_and_a_quiet_window_is_lower(
    hog: subprocess.Popen[bytes],
) -> None:
    busy = window()
    hog.kill()
    hog.wait()
    quiet = window()
    assert set(busy.to_dict()) == FIELDS and set(quiet.to_dict()) == FIELDS
    assert busy.contended is True
    assert busy.other_cpu_cores is not None and busy.other_cpu_cores >= 0.5
    assert quiet.other_cpu_cores is not None and quiet.other_cpu_cores < busy.other_cpu_cores
    assert busy.server_cpu_cores is None  # no server of ours
    assert busy.window_s == pytest.approx(WINDOW_S, abs=0.3)
    assert busy.steal_share is not None and 0 <= busy.steal_share <= 1
    assert busy.load1_end is not None


@linux
def test_our_own_busy_loop_is_the_client_not_others(hog: subprocess.Popen[bytes]) -> None:
    hogged = window()
    hog.kill()
    hog.wait()
    def spin_in_a_thread(seconds: float) -> None:
        thread = threading.Thread(target=spin, args=(seconds,))
        thread.start()
        thread.join()

    ours = window(work=spin_in_a_thread)
    assert ours.client_cpu_cores is not None and ours.client_cpu_cores >= 0.5
    assert hogged.client_cpu_cores is not None and hogged.client_cpu_cores < ours.client_cpu_cores
    assert ours.other_cpu_cores is not None and hogged.other_cpu_cores is not None
    assert ours.other_cpu_cores < hogged.other_cpu_cores


@linux
def test_the_servers_processes_and_their_children_are_the_server_not_others(
    hog_parent: subprocess.Popen[bytes],
) -> None:
    as_other = window()
    as_server = window([hog_parent.pid])
    assert as_other.contended is True and as_other.server_cpu_cores is None
    # the child's CPU, found below the pid
    assert as_server.server_cpu_cores is not None and as_server.server_cpu_cores >= 0.5
    assert as_server.other_cpu_cores is not None and as_other.other_cpu_cores is not None
    assert as_server.other_cpu_cores < as_other.other_cpu_cores


def test_without_proc_every_figure_is_unknown(tmp_path: Path) -> None:
    with ContentionMeter([1], proc=tmp_path) as meter:
        pass
    assert meter.result.contended is None
    assert {k for k, v in meter.result.to_dict().items() if v is not None} <= {"window_s",
                                                                              "load1_end"}


def test_the_contended_limit_is_others_cores(hog: subprocess.Popen[bytes]) -> None:
    with ContentionMeter(None, max_other_cores=50.0) as meter:
        time.sleep(0.5)
    steal = meter.result.steal_share
    assert meter.result.contended is False or (steal is not None and steal > 0.05)


def test_coefficient_of_variation() -> None:
    assert coefficient_of_variation([100.0]) is None
    assert coefficient_of_variation([]) is None
    assert coefficient_of_variation([0.0, 0.0]) is None
    assert coefficient_of_variation([1.0, 2.0, 3.0]) == pytest.approx(0.5)
    assert coefficient_of_variation([200.0, 200.0]) == 0.0


def test_a_launched_server_names_its_pid_until_it_stops(tmp_path: Path) -> None:
    port = free_port()
    process = ServerProcess(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        ready_url=f"http://127.0.0.1:{port}/", log_path=tmp_path / "log", timeout_s=20,
    )
    assert server_pids_at(f"http://127.0.0.1:{port}") == []
    process.start()
    try:
        assert server_pids_at(f"http://127.0.0.1:{port}/") == [process.pid]
        assert server_pids_at(f"http://127.0.0.1:{free_port()}") == []
    finally:
        process.stop()
    assert server_pids_at(f"http://127.0.0.1:{port}") == []


@linux
def test_a_cpu_hog_beside_the_run_marks_its_windows_contended(
    pytester: pytest.Pytester, steady: str,
) -> None:
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        result = run_bench(pytester, steady, "--repeats", "2")
    finally:
        hog.kill()
        hog.wait()
    result.assert_outcomes(passed=1)
    stats = stats_of(pytester)
    assert stats["contended"] is True and stats["contended_windows"] >= 1
    assert max(r["contention"]["other_cpu_cores"] for r in stats["repeats"]) >= 0.5
    result.stdout.fnmatch_lines(["*repeat */2, *contended: yes (others *.** cores, steal *%)*"])


@linux
def test_the_gate_calls_a_contended_setting_contended_not_regressed(
    pytester: pytest.Pytester, steady: str,
) -> None:
    run_bench(pytester, steady, "--repeats", "2", "--store", "s.sqlite",
              "--save-baseline", "aa").assert_outcomes(passed=1)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        gated = run_bench(pytester, steady, "--repeats", "2", "--store", "s.sqlite",
                          "--baseline", "aa")
    finally:
        hog.kill()
        hog.wait()
    assert gated.ret == pytest.ExitCode.OK
    (row,) = gate_rows(pytester)
    assert row["status"] == "contended"
    assert row["note"].startswith("contended — re-run on a quiet machine")
