"""A confined worker (tests/cpu_share.py), in a forked process: it, what it starts later, and
the scheduling group of a session it starts go to SCHED_IDLE at nice 19, and back (when
released, or by itself once its condition holds); and, confined, it refuses to make a run
the timing modules share (tests/shared_runs.py)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cpu_share import LOWEST_PRIORITY, REAPPLY_S, SHARE, Share, autogroup
from shared_runs import once_per_session

CONTEXT = multiprocessing.get_context("fork")


def share_of(pid: int) -> tuple[int, int, str]:
    """Its scheduling policy, niceness and scheduling group's line (``/autogroup-N nice K``,
    or "")."""
    group = Path(f"/proc/{pid}/autogroup")
    line = group.read_text().strip() if group.exists() else ""
    return os.sched_getscheduler(pid), os.getpriority(os.PRIO_PROCESS, pid), line


def confine_and_release(out: multiprocessing.Queue[object]) -> None:
    share = Share()
    share.confine()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             start_new_session=True)  # started after confine(), in a session
    time.sleep(REAPPLY_S * 4)
    confined = share_of(os.getpid()), share_of(child.pid)
    share.release()
    released = share_of(os.getpid()), share_of(child.pid)
    child.kill()
    child.wait()
    out.put((share.policy, share.niceness, confined, released,
             autogroup(os.getpid()) != autogroup(child.pid)))


def test_a_confined_worker_and_the_session_it_starts_go_idle_and_back() -> None:
    if os.sched_getscheduler(0) != os.SCHED_OTHER or os.getpriority(os.PRIO_PROCESS, 0) != 0:
        pytest.skip("needs the default policy and a niceness of 0 to go back to")
    out: multiprocessing.Queue[object] = CONTEXT.Queue()
    process = CONTEXT.Process(target=confine_and_release, args=(out,))
    process.start()
    policy, niceness, confined, released, own_group = out.get(timeout=30)  # type: ignore[misc]
    process.join(10)
    idle = (os.SCHED_IDLE, LOWEST_PRIORITY)
    worker, child = confined
    assert worker[:2] == idle and child[:2] == idle
    if own_group:  # the kernel groups by session: the child's group is at nice 19 as well
        assert child[2].endswith(f"nice {LOWEST_PRIORITY}")
    worker, child = released
    assert worker[:2] == (policy, niceness) == (os.SCHED_OTHER, 0) and child[:2] == (policy, 0)
    if own_group:
        assert child[2].endswith(f"nice {niceness}")


def confine_until_a_flag(flag: Path, out: multiprocessing.Queue[object]) -> None:
    share = Share()
    share.confine(until=flag.exists)
    time.sleep(REAPPLY_S * 4)
    before = share_of(os.getpid()), share.confined
    flag.touch()
    time.sleep(REAPPLY_S * 4)
    out.put((share.policy, share.niceness, before,
             (share_of(os.getpid()), share.confined)))


def test_a_confinement_ends_by_itself_once_its_condition_holds(tmp_path: Path) -> None:
    if os.sched_getscheduler(0) != os.SCHED_OTHER or os.getpriority(os.PRIO_PROCESS, 0) != 0:
        pytest.skip("needs the default policy and a niceness of 0 to go back to")
    out: multiprocessing.Queue[object] = CONTEXT.Queue()
    process = CONTEXT.Process(target=confine_until_a_flag, args=(tmp_path / "done", out))
    process.start()
    policy, niceness, before, after = out.get(timeout=30)  # type: ignore[misc]
    process.join(10)
    assert before[0][:2] == (os.SCHED_IDLE, LOWEST_PRIORITY) and before[1] is True
    assert after[0][:2] == (policy, niceness) == (os.SCHED_OTHER, 0) and after[1] is False


def make_a_shared_run_confined(tmp_path_factory: pytest.TempPathFactory,
                               out: multiprocessing.Queue[object]) -> None:
    SHARE.confine()
    try:
        once_per_session(tmp_path_factory, "made_while_confined", lambda _: "made")
        out.put("made")
    except RuntimeError as refused:
        out.put(str(refused))
    finally:
        SHARE.release()


def test_a_confined_worker_refuses_to_make_a_shared_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs to confine a worker to one")
    out: multiprocessing.Queue[object] = CONTEXT.Queue()
    process = CONTEXT.Process(target=make_a_shared_run_confined, args=(tmp_path_factory, out))
    process.start()
    said = out.get(timeout=30)
    process.join(10)
    assert said == ("the shared run made_while_confined would be made on a confined worker, "
                    "starved by the timing tests: add the module that asks for it to "
                    "TIMING_MODULES (tests/conftest.py)")
