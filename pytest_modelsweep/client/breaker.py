"""A per-endpoint circuit breaker: a server that stopped answering fails fast, once.

After ``threshold`` consecutive timeouts or connection failures, or a silence and no answer to
a health check, it opens: every request waiting or not yet sent fails at once with one line;
:meth:`Breaker.recheck` may close it before the model's next test. A silence alone proves
nothing (prefill is silent), so a server that answers ``GET /v1/models`` stalls only when its
work counters stand still for a whole check interval (one without them: the idle timeout).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from ..core.secrets import Credentials, auth_headers
from .tls import get_within

STALL_CHECK_S = 20.0
"""A request silent this long makes the breaker check the server's health."""
COUNTER_STILL_S = 30.0
"""Work counters standing still this long while requests wait mean the server computes
nothing; it outlasts one prefill batch of a busy CPU server (10-20 s)."""
HEALTH_TIMEOUT_S = 5.0
"""How long a health check (``GET /v1/models``) may take before the server counts as stalled."""
DEFAULT_THRESHOLD = 3


class Breaker:
    """Consecutive failures of one endpoint; open means requests to it fail at once."""

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        threshold: int = DEFAULT_THRESHOLD,
        health_timeout_s: float = HEALTH_TIMEOUT_S,
        still_s: float = COUNTER_STILL_S,
        credentials: Credentials | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.base_url, self.threshold = name, base_url.rstrip("/"), threshold
        self.clock = clock  # how long the counters stood still is read on it
        self.health_timeout_s = health_timeout_s
        self.still_s = still_s
        self.credentials = credentials
        self.failures = 0
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._work: tuple[float, float] | None = None  # (counter sum, when read)

    def __repr__(self) -> str:
        return f"Breaker({self.name}, open={self.reason is not None})"

    def success(self) -> None:
        with self._lock:
            self.failures = 0

    def failure(self, waited_s: float) -> None:
        """A timeout or connection failure after ``waited_s``; the threshold-th in a row opens."""
        with self._lock:
            self.failures += 1
            if self.failures >= self.threshold and self.reason is None:
                self.reason = (
                    f"{self.name} at {self.base_url}: {self.failures} requests in a "
                    f"row timed out or could not connect (waited {waited_s:.0f} s); "
                    "the rest fail at once"
                )

    def trip(self, reason: str) -> str:
        """Open with ``reason`` (unless already open); ``reason``."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
        return reason

    def _get(self, path: str, timeout_s: float | None = None) -> httpx.Response | None:
        """``GET path``, answered whole within the health timeout; None when it is not."""
        try:
            return get_within(
                f"{self.base_url}{path}",
                timeout_s or self.health_timeout_s,
                auth_headers(self.credentials),
            )
        except httpx.HTTPError:
            return None

    def healthy(self, timeout_s: float | None = None) -> bool:
        """Whether ``GET /v1/models`` answers whole (any HTTP status) within the health timeout."""
        return self._get("/v1/models", timeout_s) is not None

    def work_done(self) -> float | None:
        """The server's work counters summed (``/metrics``), or None where it has none."""
        from .counters import parse_prometheus, work_done

        response = self._get("/metrics")
        return (
            None
            if response is None or response.status_code != 200
            else work_done(parse_prometheus(response.text))
        )

    def note_work(self) -> None:
        """Read the work counters when a silence begins, so that a stall is seen early."""
        if self._work is None:
            work = self.work_done()
            if work is not None:
                self._work = (work, self.clock())

    def stalled(self, silent_s: float, idle_s: float | None = None) -> str | None:
        """After ``silent_s`` without a byte: the reason to give up (and open) when the server
        fails a health check or its work counters stood still for ``still_s`` (or ``idle_s``,
        if shorter); else None."""
        started = time.monotonic()
        if not self.healthy():
            return self.trip(
                f"{self.name} at {self.base_url} stalled: no byte for {silent_s:.0f} s "
                f"and no answer to GET /v1/models in {time.monotonic() - started:.0f} s"
            )
        work, now = self.work_done(), self.clock()
        if work is None:
            return None  # no counters: the idle timeout decides
        if self._work is None or work != self._work[0]:
            self._work = (work, now)
            return None
        still = now - self._work[1]
        if still < (self.still_s if idle_s is None else min(self.still_s, idle_s)):
            return None
        return self.trip(
            f"{self.name} at {self.base_url} stalled: no byte for {silent_s:.0f} s, and "
            f"its work counters (/metrics) have not moved in {still:.0f} s although it "
            "answers GET /v1/models"
        )

    def answered(self) -> None:
        """Bytes flow again: the next silence reads the work counters afresh."""
        self._work = None

    def recheck(self) -> str | None:
        """Before a test: None when closed or the server answers again, else the one line."""
        if self.reason is None:
            return None
        if self.healthy():
            with self._lock:
                self.reason, self.failures = None, 0
            return None
        return (
            f"{self.reason}; it still does not answer GET /v1/models within "
            f"{self.health_timeout_s:g} s: is the server still running?"
        )
