"""Running a test worker, with every thread and process it started, at the lowest priority,
and letting it go again.

While the timing tests run on the foreground workers, the others' tests run *confined* (the
room's ``confined`` kind, ``tests/room.py``): every thread under ``SCHED_IDLE``, which runs
only on a CPU that no other thread wants and gives it up as soon as one wakes (the kernel
counts a CPU that runs only such threads as idle when it places a waking thread), and at
nice 19. The timing tests then go first on every CPU, and the confined work takes only the
time they leave (they mostly wait on paced servers). The policy and niceness are per thread
on Linux and inherited by what a thread starts, so both are set on every thread of the
worker and of its descendants. A descendant that starts a session (the plugin starts its
servers so) is in a scheduling group of its own where the kernel groups by session
(``sched_autogroup_enabled``), and that group's weight is a nice-0 process's whatever its
threads' niceness: the group's niceness is set too. What the confined tests start later is
caught by a thread that applies all this again every :data:`REAPPLY_S` seconds; that thread
also lets a confined test still running when the timing tests are done go (``until``), so
that it does not crawl beside the work that follows them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

LOWEST_PRIORITY = 19
REAPPLY_S = 0.2


def autogroup(pid: int) -> str:
    """``pid``'s scheduling group by session (``/autogroup-N``), or "" where there is none."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/autogroup").read_text().split()[0]
    return ""


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (``/proc/PID/task/TID/children``)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                with contextlib.suppress(OSError):
                    todo += [int(child) for child in (task / "children").read_text().split()]
    return found


def set_share(pid: int, policy: int, niceness: int) -> None:
    """Put every thread of ``pid`` and of its descendants under the scheduling ``policy`` at
    ``niceness``; a thread that has ended is skipped, and a niceness or policy this user may
    not go back to is kept; a descendant in another session's group gets ``niceness`` for
    that group."""
    own_group = autogroup(pid)
    for process in descendants(pid):
        group = autogroup(process)
        if group and group != own_group:
            with contextlib.suppress(OSError):
                Path(f"/proc/{process}/autogroup").write_text(str(niceness))
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{process}/task").iterdir():
                tid = int(task.name)
                with contextlib.suppress(OSError):
                    if os.sched_getscheduler(tid) != policy:
                        os.sched_setscheduler(tid, policy, os.sched_param(0))
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, tid, niceness)


class Share:
    """This process's share of the machine: as started, or confined to the time that no other
    thread wants."""

    def __init__(self) -> None:
        self.policy = os.sched_getscheduler(0)
        self.niceness = os.getpriority(os.PRIO_PROCESS, 0)
        self.confined = False
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None

    @property
    def can_confine(self) -> bool:
        """Only on two CPUs or more: on one, every timing test's wakeup would meet confined
        work on its CPU."""
        return len(os.sched_getaffinity(0)) >= 2

    def confine(self, until: Callable[[], bool] = lambda: False) -> None:
        """Confine this process to ``SCHED_IDLE`` at nice 19 until :meth:`release`, or until
        ``until()`` is true (asked every :data:`REAPPLY_S` seconds)."""
        if self.confined:
            return
        self.confined = True
        set_share(os.getpid(), os.SCHED_IDLE, LOWEST_PRIORITY)
        self._stop.clear()
        self._keeper = threading.Thread(target=self._keep_confined, args=(until,), daemon=True,
                                        name="cpu-share")
        self._keeper.start()

    def _keep_confined(self, until: Callable[[], bool]) -> None:
        while not self._stop.wait(REAPPLY_S):
            if until():
                set_share(os.getpid(), self.policy, self.niceness)
                self.confined = False
                return
            set_share(os.getpid(), os.SCHED_IDLE, LOWEST_PRIORITY)

    def release(self) -> None:
        if not self.confined:
            return
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join()
        set_share(os.getpid(), self.policy, self.niceness)
        self.confined = False


SHARE = Share()
"""This process's share of the machine (one per test worker)."""
