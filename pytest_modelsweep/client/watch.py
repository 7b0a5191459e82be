"""What guards one call's requests in flight: the idle timeout, the breaker's stall check,
overdue reports (:class:`Guard`, :class:`Watch`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.options import DEFAULTS
from ..core.secrets import Credentials, wants_key_message
from .breaker import STALL_CHECK_S, Breaker
from .http import perf


@dataclass(slots=True, eq=False)
class Pending:
    """A POST in flight: when it was sent (no byte comes before the answer) and its abort."""

    aborted: asyncio.Future[str]
    last: float = field(default_factory=perf)

    def fail(self, reason: str, now: float) -> None:
        if not self.aborted.done():
            self.aborted.set_result(reason)


class Watch:
    """The requests in flight of one call: overdue reports and the breaker's stall check.

    A request silent for ``stall_s`` makes the breaker check the server (in a thread); a stall
    opens it and every request in flight fails at once. ``on_wait(n, seconds)`` is told every
    ``report_every_s`` how many have waited that long."""

    def __init__(
        self,
        breaker: Breaker | None,
        stall_s: float,
        on_wait: Callable[[int, float], None] | None,
        report_every_s: float = 30.0,
        idle_s: float | None = None,
    ) -> None:
        self.breaker, self.stall_s, self.on_wait = breaker, stall_s, on_wait
        self.idle_s = idle_s
        self.report_every_s = report_every_s
        self.inflight: dict[int, Any] = {}
        self._last_report = perf()
        self._last_check = 0.0
        self._noting: asyncio.Task[None] | None = None

    def blocked(self) -> str | None:
        return self.breaker.reason if self.breaker is not None else None

    def settle(self, error: str | None, timed_out: bool, waited_s: float) -> None:
        """Tell the breaker how a request ended: a timeout or connection failure, or an answer."""
        if self.breaker is None:
            return
        if timed_out:
            self.breaker.failure(waited_s)
        elif error is None or error.startswith(("HTTP ", "non-JSON", "response")):
            self.breaker.success()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(min(0.5, self.stall_s / 4))
            now = perf()
            lasts = [p.last for p in self.inflight.values()]
            if not lasts:
                continue
            silent = now - min(lasts)
            if self.on_wait is not None and now - self._last_report >= self.report_every_s:
                self._last_report = now
                waiting = sum(1 for last in lasts if now - last >= self.report_every_s)
                if waiting:
                    self.on_wait(waiting, silent)
            breaker = self.breaker
            if breaker is not None and silent < min(1.0, self.stall_s / 2):
                breaker.answered()  # bytes flow: a later silence reads the counters afresh
                if self._noting is not None and self._noting.done():
                    self._noting = None
            elif breaker is not None and silent < self.stall_s and self._noting is None:
                # read the counters as the silence begins, without holding up this loop
                self._noting = asyncio.create_task(asyncio.to_thread(breaker.note_work))
            if breaker is None or silent < self.stall_s or now - self._last_check < self.stall_s:
                continue
            self._last_check = now
            reason = breaker.reason or await asyncio.to_thread(breaker.stalled, silent, self.idle_s)
            if reason is not None:
                for pending in list(self.inflight.values()):
                    pending.fail(reason, perf())


@dataclass(frozen=True)
class Guard:
    """What protects one call's requests beyond the total timeout: the idle timeout (for a
    non-streamed answer with work counters: no byte *and* no counter movement), credentials,
    the endpoint's breaker, and ``on_wait(n, seconds)`` told when requests are overdue."""

    idle_timeout_s: float = DEFAULTS.idle_timeout
    credentials: Credentials | None = None
    breaker: Breaker | None = None
    on_wait: Callable[[int, float], None] | None = None
    stall_check_s: float = STALL_CHECK_S
    report_every_s: float = 30.0

    def watch(self) -> Watch:
        # the health check has time to decide before the idle timeout would
        return Watch(
            self.breaker,
            min(self.stall_check_s, self.idle_timeout_s / 4),
            self.on_wait,
            self.report_every_s,
            idle_s=self.idle_timeout_s,
        )


def wants_key(status: int, breaker: Breaker | None, served_name: str) -> str | None:
    return (
        f"HTTP {status}: " + wants_key_message(breaker.name if breaker else served_name)
        if status in (401, 403)
        else None
    )


async def with_watch(watch: Watch, work: Callable[[], Any]) -> None:
    """Run ``work`` (the workers) with ``watch`` beside it."""
    task = asyncio.create_task(watch.run())
    try:
        await work()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
