"""How xdist hands the project's test files to its workers (``-n``).

A file's tests go to one worker (its module fixtures are made once), in the order the files
were collected. The timing and lone files (``foreground_only``) come first and go to the
foreground workers: the first :data:`FOREGROUND_WORKERS`, and never all of them where there
are two or more. The others, the confined workers, take no file until the lone files
(``lone``, which run beside no other test) have completed: a test they started would hold
them off. Then, until every timing and lone test has completed, they take only the files
that need no whole CPU (not ``needs_whole_cpus``: vLLM's, the embedded servers'), and run
them confined to the CPU time that the timing tests leave (``tests/cpu_share.py``, the
room's ``confined`` kind); when they have, every worker takes any file. A foreground worker
takes a file that needs whole CPUs before then only if no other file is left.

The scheduler marks each phase done with a file in the folder ``phases``: :data:`LONE` once
the lone tests have completed (no other test starts before, ``tests/conftest.py``: one that
had started first would keep them waiting), :data:`FOREGROUND` once the timing and lone
tests have.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController

LONE, FOREGROUND = "lone", "foreground"
"""The phases' names: every lone test has completed; every timing and lone test has."""

FOREGROUND_WORKERS = 3
"""The timing tests run on three workers at most: mostly waiting on paced servers, three
leave two CPUs a sixth idle (which the confined workers take); four would crowd them."""

MORE_WORK_BELOW = 2
"""A worker is handed its next file once this many of its tests or fewer are left (xdist's)."""


class Scheduling(LoadFileScheduling):  # type: ignore[misc]
    """LoadFile scheduling in which the files ``foreground_only(scope)`` names go to the
    foreground workers and run first, and the files ``needs_whole_cpus(scope)`` names wait
    for them."""

    def __init__(self, config: pytest.Config, log: Any, foreground_only: Callable[[str], bool],
                 lone: Callable[[str], bool], needs_whole_cpus: Callable[[str], bool],
                 phases: Path) -> None:
        super().__init__(config, log)
        self.foreground_only = foreground_only
        self.lone = lone
        self.needs_whole_cpus = needs_whole_cpus
        self.phases = phases
        self.done: set[str] = set()  # the phases marked done

    def may_take(self, node: WorkerController, scope: str) -> bool:
        """A timing or lone file: a foreground worker. A file that needs whole CPUs: a
        foreground worker, or any once the foreground tests are done. Any other file: a
        foreground worker, or any once the lone tests are done."""
        foreground = min(FOREGROUND_WORKERS, max(1, self.numnodes - 1))
        if int(node.gateway.id.removeprefix("gw")) < foreground:
            return True
        if self.foreground_only(scope) or LONE not in self.done:
            return False
        return not self.held_back(scope)

    def held_back(self, scope: str) -> bool:
        """Whether ``scope`` needs whole CPUs while timing or lone tests are left."""
        return FOREGROUND not in self.done and self.needs_whole_cpus(scope)

    def completed(self, files: Callable[[str], bool]) -> bool:
        """Whether every test of the files ``files(scope)`` names has completed."""
        if any(files(scope) for scope in self.workqueue):
            return False
        return all(done for work in self.assigned_work.values()
                   for scope, tests in work.items() if files(scope)
                   for done in tests.values())

    def _assign_work_unit(self, node: WorkerController) -> None:
        """The first file this worker may take (xdist hands out the queue's first); while
        timing or lone tests are left, a file that needs whole CPUs only if no other is left
        (its servers would keep those tests out of the room until the file is done)."""
        allowed = [s for s in self.workqueue if self.may_take(node, s)]
        if not allowed:  # nothing this worker may take yet: see _reschedule
            return
        scope = next((s for s in allowed if not self.held_back(s)), allowed[0])
        self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)

    def _reschedule(self, node: WorkerController) -> None:
        """xdist's rule for every worker, not only the one that reported: a worker left
        without a file it may take gets one once it may, and stops once none is left."""
        self._mark_done(LONE, self.lone)
        self._mark_done(FOREGROUND, self.foreground_only)
        for each in (node, *(other for other in self.nodes if other is not node)):
            if each.shutting_down:
                continue
            if not self.workqueue:
                each.shutdown()
            else:
                self._top_up(each)

    def _mark_done(self, phase: str, files: Callable[[str], bool]) -> None:
        """Mark ``phase`` done once every test of the files ``files(scope)`` names has."""
        if phase not in self.done and self.completed(files):
            (self.phases / phase).touch()
            self.done.add(phase)

    def _top_up(self, node: WorkerController) -> None:
        """Files for ``node`` until more than :data:`MORE_WORK_BELOW` of its tests are left or
        it may take none: a worker runs its last test only once it has a next one (or is told
        to stop), so a worker handed a one-test file would sit idle until another report."""
        while self._pending_of(self.assigned_work.get(node, {})) <= MORE_WORK_BELOW:
            left = len(self.workqueue)
            self._assign_work_unit(node)
            if len(self.workqueue) == left:
                return
