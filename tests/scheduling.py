"""How xdist hands the project's test files to its workers (``-n``).

A file's tests go to one worker (its module fixtures are made once), in the order the files
were collected. The timing and lone files (``foreground_only``) come first and go to the
first two workers only. Until every one of their tests has completed, a third worker takes
only the files that need no whole CPU (not ``needs_whole_cpus``: vLLM's, the embedded
servers'), and runs them confined to one CPU at the lowest priority (``tests/cpu_share.py``,
the room's ``confined`` kind); when they have, the scheduler writes ``foreground_done`` and
every worker takes any file.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController

FOREGROUND_WORKERS = 2
"""The workers that run the timing and lone files (``gw0``, ``gw1``)."""

MORE_WORK_BELOW = 2
"""A worker is handed its next file once this many of its tests or fewer are left (xdist's)."""


class Scheduling(LoadFileScheduling):  # type: ignore[misc]
    """LoadFile scheduling in which the files ``foreground_only(scope)`` names go to the first
    two workers and run first, and the files ``needs_whole_cpus(scope)`` names wait for them."""

    def __init__(self, config: pytest.Config, log: Any, foreground_only: Callable[[str], bool],
                 needs_whole_cpus: Callable[[str], bool], foreground_done: Path) -> None:
        super().__init__(config, log)
        self.foreground_only = foreground_only
        self.needs_whole_cpus = needs_whole_cpus
        self.foreground_done = foreground_done
        self.foreground_over = False  # foreground_done written

    def may_take(self, node: WorkerController, scope: str) -> bool:
        """A timing or lone file: a foreground worker. A file that needs whole CPUs: a
        foreground worker, or any once the foreground tests are done. Any other file: any."""
        if int(node.gateway.id.removeprefix("gw")) < FOREGROUND_WORKERS:
            return True
        if self.foreground_only(scope):
            return False
        return self.foreground_over or not self.needs_whole_cpus(scope)

    def foreground_finished(self) -> bool:
        """Whether every test of a timing or lone file has completed."""
        if any(self.foreground_only(scope) for scope in self.workqueue):
            return False
        return all(done for work in self.assigned_work.values()
                   for scope, tests in work.items() if self.foreground_only(scope)
                   for done in tests.values())

    def _assign_work_unit(self, node: WorkerController) -> None:
        """The first file this worker may take (xdist hands out the queue's first)."""
        scope = next((s for s in self.workqueue if self.may_take(node, s)), None)
        if scope is None:  # nothing this worker may take yet: see _reschedule
            return
        self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)

    def _reschedule(self, node: WorkerController) -> None:
        """xdist's rule for every worker, not only the one that reported: a worker left
        without a file it may take gets one once it may, and stops once none is left."""
        if not self.foreground_over and self.foreground_finished():
            self.foreground_done.touch()
            self.foreground_over = True
        for each in (node, *(other for other in self.nodes if other is not node)):
            if each.shutting_down:
                continue
            if not self.workqueue:
                each.shutdown()
            elif self._pending_of(self.assigned_work.get(each, {})) <= MORE_WORK_BELOW:
                self._assign_work_unit(each)
