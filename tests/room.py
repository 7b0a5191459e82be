"""Which kind of test runs now, across the xdist workers of one test run.

Tests of one kind run beside one another, never beside a test of another kind, and a test
of the kind :data:`ALONE` beside no other test; except that a test of the kind
:data:`CONFINED` (run at the lowest priority, ``tests/cpu_share.py``) runs beside
any kind but :data:`ALONE`. Waiting is first come, first served: a
test that waits for the room keeps every later test of another kind out, so a stream of
one kind cannot starve the other; except that the kinds a room puts ``first`` go before the
waiting tests of other kinds, whichever came first (never before a lone test), so that
those wait until no test of theirs is left. The state lives in a JSON file guarded by
``flock``; an entry whose process has died is dropped, so a crashed worker blocks nobody.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

ALONE = "alone"
CONFINED = "confined"
POLL_S = 0.02


def compatible(kind: str, other: str) -> bool:
    """Whether tests of ``kind`` and ``other`` may run at the same time."""
    if ALONE in (kind, other):
        return False
    return kind == other or CONFINED in (kind, other)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Room:
    """The room of one test run, kept in ``path`` (a JSON file) and ``path.lock``; the kinds
    in ``first`` go before waiting tests of other kinds."""

    def __init__(self, path: Path, first: Collection[str] = ()) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.first = frozenset(first)

    def waits_behind(self, kind: str, waiting: str, earlier: bool) -> bool:
        """Whether a test of ``kind`` waits for a test of kind ``waiting`` queued ``earlier``
        than it or later: for an earlier one unless only ``kind`` goes first (a lone test
        always goes before), for a later one when only that one's kind goes first."""
        if earlier:
            return waiting == ALONE or kind not in self.first or waiting in self.first
        return kind != ALONE and kind not in self.first and waiting in self.first

    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        with self.lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                try:
                    state: dict[str, Any] = json.loads(self.path.read_text())
                except (FileNotFoundError, ValueError):
                    state = {}
                state["inside"] = [e for e in state.get("inside", []) if alive(e[0])]
                state["queue"] = [e for e in state.get("queue", []) if alive(e[0])]
                yield state
                self.path.write_text(json.dumps(state))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _try_enter(self, kind: str) -> bool:
        pid = os.getpid()
        with self._state() as state:
            inside: list[list[Any]] = state["inside"]
            queue: list[list[Any]] = state["queue"]
            mine = [pid, kind]
            if mine in inside:  # this process is inside already (a module's hold, then a test)
                inside.append(mine)
                return True
            if mine not in queue:
                queue.append(mine)
            place = queue.index(mine)
            ahead = [e for at, e in enumerate(queue)
                     if at != place and self.waits_behind(kind, e[1], earlier=at < place)]
            if all(compatible(kind, k) for _, k in inside + ahead):
                queue.remove(mine)
                inside.append(mine)
                return True
            return False

    def enter(self, kind: str) -> None:
        """Wait until a test of ``kind`` may run, and count this process in."""
        while not self._try_enter(kind):
            time.sleep(POLL_S)

    def leave(self, kind: str) -> None:
        with self._state() as state, contextlib.suppress(ValueError):
            state["inside"].remove([os.getpid(), kind])

    @contextlib.contextmanager
    def held(self, kind: str) -> Iterator[None]:
        self.enter(kind)
        try:
            yield
        finally:
            self.leave(kind)
