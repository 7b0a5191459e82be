"""The contention meter on a ``/proc`` the tests write, the repeats' noise figures, server
pids; a real CPU hog beside the real throughput bench (tests/support/throughput_bench_run.py) and the
gate it calls contended (``timing``)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.throughput_bench_run import gate_rows, run_bench, stats_of

from pytest_modelsweep.core.measurements import Contention
from pytest_modelsweep.serving.process import ServerProcess, free_port, server_pids_at
from pytest_modelsweep.workloads.contention import (
    ContentionMeter,
    CpuSnapshot,
    coefficient_of_variation,
    contention,
    snapshot,
)

pytest_plugins = ("pytester", "support.throughput_bench_run")  # the fixture steady

linux = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
FIELDS = {
    "window_s",
    "other_cpu_cores",
    "server_cpu_cores",
    "client_cpu_cores",
    "steal_share",
    "load1_end",
    "contended",
}


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


class FakeProc:
    """A ``/proc`` the meter reads (``proc=``): the machine's jiffies, and each process's
    parent and CPU jiffies, as the test sets them."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def machine(self, busy: int, total: int, steal: int = 0) -> None:
        idle = total - busy - steal
        (self.root / "stat").write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0\n")

    def process(self, pid: int, parent: int, jiffies: int) -> None:
        (self.root / str(pid)).mkdir(exist_ok=True)
        (self.root / str(pid) / "stat").write_text(
            f"{pid} (p) S {parent} {'0 ' * 9}{jiffies} 0 0 0 20 0\n"
        )


SERVER, WORKER, STRANGER = 4_000_001, 4_000_002, 4_000_003
"""A server, its worker process (a child) and a process of someone else's."""


def one_second(
    tmp_path: Path,
    server_pids: list[int] | None,
    *,
    worker: int,
    stranger: int,
    client: int,
    **limits: float,
) -> Contention:
    """The record of a window of one second at 100 Hz on two CPUs, in which the server's
    worker, a stranger and our own process used ``worker``, ``stranger`` and ``client``
    jiffies (the server's own process none); the machine's busy time is theirs."""
    proc = FakeProc(tmp_path)

    def read(used: dict[int, int], busy: int, total: int) -> CpuSnapshot:
        proc.machine(busy=busy, total=total)
        for pid, parent in ((SERVER, 1), (WORKER, SERVER), (STRANGER, 1), (os.getpid(), 1)):
            proc.process(pid, parent, used.get(pid, 0))
        return snapshot(server_pids, proc.root)

    start = read({}, 1_000, 10_000)
    end = read(
        {WORKER: worker, STRANGER: stranger, os.getpid(): client},
        1_000 + worker + stranger + client,
        10_200,
    )
    return contention(replace(start, wall=0.0), replace(end, wall=1.0), hz=100, **limits)


def test_a_cpu_hog_is_contention_and_a_quiet_window_is_lower(tmp_path: Path) -> None:
    busy = one_second(tmp_path, None, worker=0, stranger=100, client=0)
    quiet = one_second(tmp_path, None, worker=0, stranger=10, client=0)
    assert set(busy.to_dict()) == FIELDS and set(quiet.to_dict()) == FIELDS
    assert busy.contended is True and busy.other_cpu_cores == pytest.approx(1.0)
    assert quiet.contended is False and quiet.other_cpu_cores == pytest.approx(0.1)
    assert busy.server_cpu_cores is None  # no server of ours
    assert busy.window_s == 1.0 and busy.steal_share == 0.0


def test_our_own_busy_loop_is_the_client_not_others(tmp_path: Path) -> None:
    ours = one_second(tmp_path, None, worker=0, stranger=0, client=100)
    assert ours.client_cpu_cores == pytest.approx(1.0)
    assert ours.other_cpu_cores == 0.0 and ours.contended is False


def test_the_servers_processes_and_their_children_are_the_server_not_others(
    tmp_path: Path,
) -> None:
    as_other = one_second(tmp_path, None, worker=100, stranger=0, client=0)
    as_server = one_second(tmp_path, [SERVER], worker=100, stranger=0, client=0)
    assert as_other.contended is True and as_other.server_cpu_cores is None
    assert as_other.other_cpu_cores == pytest.approx(1.0)
    # the child's CPU, found below the pid
    assert as_server.server_cpu_cores == pytest.approx(1.0)
    assert as_server.other_cpu_cores == 0.0 and as_server.contended is False


def test_the_contended_limit_is_others_cores(tmp_path: Path) -> None:
    hogged = {"worker": 0, "stranger": 100, "client": 0}
    assert one_second(tmp_path, None, **hogged).contended is True  # default limit 0.25 cores
    assert one_second(tmp_path, None, **hogged, max_other_cores=1.5).contended is False
    assert one_second(tmp_path, None, **hogged, max_other_cores=0.99).contended is True


def test_the_meter_reads_its_window_from_proc(tmp_path: Path) -> None:
    """Entered and left, the meter reads ``/proc`` at both ends: the server's tree is the
    server's, our own process the client's, the rest others'."""
    proc = FakeProc(tmp_path)
    me = os.getpid()

    def used(worker: int, stranger: int, client: int) -> None:
        proc.machine(busy=1_000 + worker + stranger + client, total=100_000)
        for pid, parent, jiffies in (
            (SERVER, 1, 0),
            (WORKER, SERVER, worker),
            (STRANGER, 1, stranger),
            (me, 1, client),
        ):
            proc.process(pid, parent, jiffies)

    used(0, 0, 0)
    with ContentionMeter([SERVER], proc=proc.root) as meter:
        used(2_000, 1_000, 500)
    result = meter.result
    assert set(result.to_dict()) == FIELDS and result.contended is True
    assert result.server_cpu_cores and result.client_cpu_cores and result.other_cpu_cores
    # per wall second of the same window: in the ratio of their jiffies
    assert result.server_cpu_cores / result.client_cpu_cores == pytest.approx(4.0)
    assert result.other_cpu_cores / result.client_cpu_cores == pytest.approx(2.0)


def test_without_proc_every_figure_is_unknown(tmp_path: Path) -> None:
    with ContentionMeter([1], proc=tmp_path) as meter:
        pass
    assert meter.result.contended is None
    assert {k for k, v in meter.result.to_dict().items() if v is not None} <= {
        "window_s",
        "load1_end",
    }


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
        ready_url=f"http://127.0.0.1:{port}/",
        log_path=tmp_path / "log",
        timeout_s=20,
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
@pytest.mark.timing
def test_a_cpu_hog_beside_the_bench_marks_its_windows_and_the_gate_row_contended(
    pytester: pytest.Pytester,
    steady: str,
) -> None:
    """The real bench's meter finds a real process burning a core beside its windows, and the
    gate calls the setting contended rather than regressed against a baseline taken
    without it."""
    run_bench(
        pytester, steady, "--repeats", "2", "--store", "s.sqlite", "--save-baseline", "aa"
    ).assert_outcomes(passed=1)
    # the hog is no child of this process: this process serves the attached fake endpoint,
    # and the meter counts the server's descendants as the server's
    started = subprocess.run(
        [
            "sh",
            "-c",
            f"{shlex.quote(sys.executable)} -c 'while True: pass' >/dev/null 2>&1 & echo $!",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    hog = int(started.stdout)
    try:
        result = run_bench(
            pytester, steady, "--repeats", "2", "--store", "s.sqlite", "--baseline", "aa"
        )
    finally:
        os.kill(hog, signal.SIGKILL)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    stats = stats_of(pytester)
    assert stats["contended"] is True and stats["contended_windows"] >= 1
    assert max(r["contention"]["other_cpu_cores"] for r in stats["repeats"]) >= 0.5
    result.stdout.fnmatch_lines(["*repeat */2, *contended: yes (others *.** cores, steal *%)*"])
    (row,) = gate_rows(pytester)
    assert row["status"] == "contended"
    assert row["note"].startswith("contended — re-run on a quiet machine")
