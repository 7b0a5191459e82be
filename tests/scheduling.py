"""How xdist hands the project's test files to its workers (``-n``).

A file's tests go to one worker (its module fixtures are made once), in the order the files
were collected. The timing and lone files (``foreground_only``) come first and go to the
first two workers only; a third worker gets its first file once they have all been handed
out, and adds a worker to the rest of the run, whose tests often wait on a server or a
subprocess. (The room, ``tests/room.py``, lets the timing tests go before the others that
wait for it, so that the last timing files run at their pace.)
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController

FOREGROUND_WORKERS = 2
"""The workers that run the timing and lone files (``gw0``, ``gw1``)."""


class Scheduling(LoadFileScheduling):  # type: ignore[misc]
    """LoadFile scheduling in which the files ``foreground_only(scope)`` names go to the first
    two workers and run before any other file."""

    def __init__(self, config: pytest.Config, log: Any,
                 foreground_only: Callable[[str], bool]) -> None:
        super().__init__(config, log)
        self.foreground_only = foreground_only

    def may_take(self, node: WorkerController, scope: str) -> bool:
        """A timing or lone file: a foreground worker. Any other file: a foreground worker,
        or any once every timing and lone file has been handed out."""
        if int(node.gateway.id.removeprefix("gw")) < FOREGROUND_WORKERS:
            return True
        return not self.foreground_only(scope) and not any(
            self.foreground_only(s) for s in self.workqueue)

    def _assign_work_unit(self, node: WorkerController) -> None:
        """The first file this worker may take (xdist hands out the queue's first)."""
        scope = next((s for s in self.workqueue if self.may_take(node, s)), None)
        if scope is None:  # nothing this worker may take yet: see _reschedule
            return
        self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)

    def _reschedule(self, node: WorkerController) -> None:
        super()._reschedule(node)
        # a worker left waiting gets its first file once it may take one, and stops once
        # nothing is left to hand out
        for other in self.nodes:
            if other is node or other.shutting_down or self._pending_of(
                    self.assigned_work.get(other, {})):
                continue
            if self.workqueue:
                self._assign_work_unit(other)
            else:
                other.shutdown()
