"""Streamed requests: N in flight, each worker on its own keep-alive connection (closed loop),
or each sent at its scheduled time whatever is in flight (open loop, :func:`stream_open_loop`)."""

from __future__ import annotations

import asyncio
import itertools
import ssl
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from ..core.records import ApiRequest, RequestRecord
from ..core.secrets import SecretBytes, auth_headers
from .http import Connection, StreamExchange, Target, perf, request_body
from .watch import Guard, wants_key, with_watch

OnRecord = Callable[[ApiRequest, RequestRecord], None]
"""Told each request's record as it ends."""


@dataclass
class StreamOutcome:
    """One streamed request's record plus ``cached_tokens`` (from the server's cache),
    ``chunks`` (SSE events, ``[DONE]`` included) and ``sent_at`` (when the client began it; in
    an open loop ``record.start`` is the *scheduled* time, so latencies count any wait)."""

    request: ApiRequest
    record: RequestRecord
    cached_tokens: int | None
    chunks: int
    sent_at: float | None = None


class _IdleTimeout(Exception):
    """No byte for the idle timeout."""


class _StreamRunner:
    """N workers, each with its own keep-alive connection, pulling from one queue."""

    def __init__(
        self,
        base_url_v1: str,
        served_name: str,
        requests: Sequence[ApiRequest],
        timeout_s: float,
        on_record: OnRecord | None,
        guard: Guard | None = None,
        in_flight: InFlight | None = None,
    ) -> None:
        guard = guard or Guard()
        self.target = Target.parse(base_url_v1)
        self.requests = requests
        self.timeout_s = timeout_s
        self.idle_timeout_s = guard.idle_timeout_s or timeout_s
        self.credentials = guard.credentials
        self.watch = guard.watch()
        self.on_record = on_record
        self.served_name = served_name
        self.outcomes: list[StreamOutcome | None] = [None] * len(requests)
        self.in_flight = in_flight or InFlight()
        """Kept current with the requests in flight, for readers in other threads."""
        self._queue = iter(enumerate(requests))
        self._ssl = ssl.create_default_context() if self.target.scheme == "https" else None

    def _request_bytes(self, request: ApiRequest) -> tuple[str, SecretBytes]:
        """The request on the wire; its head carries the key, so it is held as
        :class:`SecretBytes` (never shown, also not by ``pytest -l``)."""
        __tracebackhide__ = True
        body = request_body(self.served_name, request, stream=True)
        head = (
            f"POST {self.target.prefix}{request.path} HTTP/1.1\r\n"
            f"Host: {self.target.host_header}\r\n"
            "User-Agent: pytest-modelsweep\r\n"
            "Accept: text/event-stream\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in auth_headers(self.credentials).items())
            + "Connection: keep-alive\r\n\r\n"
        )
        return request.path, SecretBytes(head.encode("latin-1") + body)

    async def _wait_idle(self, ex: StreamExchange) -> None:
        """Wait for ``ex`` to end; no byte for the idle timeout raises :class:`_IdleTimeout`."""
        idle = self.idle_timeout_s
        while True:
            left = ex.last + idle - perf()
            if left <= 0:
                raise _IdleTimeout
            done, _ = await asyncio.wait({ex.future}, timeout=left)
            if done:
                return

    async def _connect(self) -> Connection:
        _, protocol = await asyncio.get_running_loop().create_connection(
            Connection, self.target.host, self.target.port, ssl=self._ssl
        )
        return protocol

    async def worker(self) -> None:
        conn: Connection | None = None
        try:
            for index, request in self._queue:
                outcome, conn = await self._counted(request, conn)
                self._keep(index, outcome)
        finally:
            if conn is not None:
                conn.abort()

    def _keep(self, index: int, outcome: StreamOutcome) -> None:
        self.outcomes[index] = outcome
        if self.on_record is not None:
            self.on_record(outcome.request, outcome.record)

    async def _counted(
        self, request: ApiRequest, conn: Connection | None, scheduled: float | None = None
    ) -> tuple[StreamOutcome, Connection | None]:
        """:meth:`_one`, counted in flight while it runs."""
        gauge = self.in_flight
        gauge.now += 1
        gauge.peak = max(gauge.peak, gauge.now)
        try:
            return await self._one(request, conn, scheduled)
        finally:
            gauge.now -= 1

    async def _one(
        self, request: ApiRequest, conn: Connection | None, scheduled: float | None = None
    ) -> tuple[StreamOutcome, Connection | None]:
        """Stream one request; its record's ``start`` is ``scheduled`` when given (open loop)."""
        loop = asyncio.get_running_loop()
        label, raw = self._request_bytes(request)
        sent_at = perf()
        start = sent_at if scheduled is None else scheduled
        ex = StreamExchange(label, loop.create_future(), self.served_name)
        watch = self.watch
        timed_out = False
        blocked = watch.blocked()
        if blocked is not None:
            ex.fail(blocked, sent_at)
        else:
            token = id(ex)
            try:
                async with asyncio.timeout(self.timeout_s):
                    for _attempt in range(2):
                        watch.inflight[token] = ex
                        fresh = conn is None or conn.closed
                        if conn is None or conn.closed:
                            conn = await self._connect()
                        conn.send(raw, ex)
                        await self._wait_idle(ex)
                        # A reused keep-alive connection the server had already closed:
                        # nothing was received, so send once more on a new connection.
                        if fresh or ex.any_bytes or ex.status or not conn.closed:
                            break
                        conn = None
                        watch.inflight.pop(token, None)
                        ex = StreamExchange(label, loop.create_future(), self.served_name)
                        token = id(ex)
            except (_IdleTimeout, OSError) as exc:  # OSError: TimeoutError too
                timed_out = True
                where = f"{self.target.host}:{self.target.port}"
                ex.fail(
                    f"no byte for {self.idle_timeout_s:g} s from {where} "
                    f"({ex.chunks} chunks received)"
                    if isinstance(exc, _IdleTimeout)
                    else f"timed out after {self.timeout_s:g} s ({ex.chunks} chunks received)"
                    if isinstance(exc, TimeoutError)
                    else f"cannot connect to {where}: {exc}",
                    perf(),
                )
            except BaseException:  # cancelled (another worker's callback raised): no leaks
                if conn is not None:
                    conn.abort()
                raise
            finally:
                watch.inflight.pop(token, None)
            watch.settle(ex.error, timed_out, perf() - sent_at)
            ex.error = wants_key(ex.status, watch.breaker, self.served_name) or ex.error
        if ex.error is not None and conn is not None:
            conn.abort()
        if conn is not None and conn.closed:
            conn = None
        return StreamOutcome(
            request,
            RequestRecord(
                start=start,
                end=ex.end if ex.end is not None else perf(),
                first_token=ex.first,
                token_times=ex.times,
                prompt_tokens=ex.prompt_tokens,
                completion_tokens=ex.completion_tokens,
                finish_reason=ex.finish,
                error=ex.error,
                text="".join(ex.texts),
            ),
            ex.cached_tokens,
            ex.chunks,
            sent_at,
        ), conn


P = ParamSpec("P")
T = TypeVar("T")


def synchronous(coroutine: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """``coroutine``'s function as a plain one that runs it in a new event loop."""

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return asyncio.run(coroutine(*args, **kwargs))

    return run


async def run_workers(count: int, make: Callable[[], Any]) -> None:
    """Run ``count`` workers; the first exception (from a callback) is re-raised as is."""
    tasks = [asyncio.create_task(make()) for _ in range(count)]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def stream_requests_detailed(
    base_url_v1: str,
    served_name: str,
    requests: Sequence[ApiRequest],
    concurrency: int,
    *,
    timeout_s: float,
    on_record: OnRecord | None = None,
    guard: Guard | None = None,
    in_flight: InFlight | None = None,
) -> list[StreamOutcome]:
    """Like :func:`stream_requests`, with the server's cached-token count per request;
    ``in_flight`` (optional) is kept current for readers in other threads."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    runner = _StreamRunner(
        base_url_v1, served_name, requests, timeout_s, on_record, guard, in_flight
    )
    await with_watch(
        runner.watch, lambda: run_workers(min(concurrency, len(requests)), runner.worker)
    )
    return [outcome for outcome in runner.outcomes if outcome is not None]


async def stream_requests(
    base_url_v1: str,
    served_name: str,
    requests: Sequence[ApiRequest],
    concurrency: int,
    *,
    timeout_s: float,
    on_record: OnRecord | None = None,
    guard: Guard | None = None,
) -> list[RequestRecord]:
    """Stream ``requests`` with exactly ``concurrency`` in flight; records in input order.
    ``timeout_s`` bounds each request from connect to ``[DONE]``; ``guard`` adds the idle
    timeout, credentials and the endpoint's breaker. Times are ``time.perf_counter()``."""
    outcomes = await stream_requests_detailed(
        base_url_v1,
        served_name,
        requests,
        concurrency,
        timeout_s=timeout_s,
        on_record=on_record,
        guard=guard,
    )
    return [outcome.record for outcome in outcomes]


run_stream_requests = synchronous(stream_requests)
"""Synchronous :func:`stream_requests` (for the sync pytest fixtures)."""


# --------------------------------------------------------------------------- open loop


@dataclass(slots=True, eq=False)
class InFlight:
    """How many requests of a run are in flight now, and the most so far (read from other
    threads without a lock: an int read is atomic)."""

    now: int = 0
    peak: int = 0


@dataclass
class OpenLoopRun:
    """What an open-loop run did: each request's outcome, when it was due, the cap's hits.

    ``capped``: requests that found ``max_in_flight`` in flight and waited for a slot."""

    outcomes: list[StreamOutcome]
    scheduled: list[float]
    started: float
    max_in_flight: int
    capped: int
    peak_in_flight: int

    @property
    def send_lags(self) -> list[float]:
        """Seconds each request was begun after its scheduled time."""
        return [
            o.sent_at - due
            for o, due in zip(self.outcomes, self.scheduled)
            if o.sent_at is not None
        ]


class _OpenLoopRunner(_StreamRunner):
    """Sends request i at ``started + offsets[i]``, however many are in flight (up to the cap);
    idle connections are reused newest first, else one is opened (in its latency)."""

    async def run(self, offsets: Sequence[float], max_in_flight: int, preopen: int) -> None:
        self.idle: list[Connection] = []
        self.scheduled, self.started, self.capped = [0.0] * len(self.requests), 0.0, 0
        slots = asyncio.Semaphore(max_in_flight)
        tasks: list[asyncio.Task[None]] = []
        try:
            for _ in range(min(preopen, max_in_flight, len(self.requests))):
                try:
                    self.idle.append(await self._connect())
                except OSError:
                    break  # the first request reports why, on its own record
            self.started = perf()
            for index, offset in enumerate(offsets):
                due = self.started + offset
                wait = due - perf()
                if wait > 0:
                    await asyncio.sleep(wait)
                if slots.locked():
                    self.capped += 1
                await slots.acquire()
                self.scheduled[index] = due
                tasks.append(asyncio.create_task(self._send(index, due, slots)))
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            for conn in self.idle:
                conn.abort()
            self.idle.clear()

    async def _send(self, index: int, due: float, slots: asyncio.Semaphore) -> None:
        conn = self.idle.pop() if self.idle else None
        try:
            outcome, conn = await self._counted(self.requests[index], conn, due)
        finally:
            slots.release()
        if conn is not None and not conn.closed:
            self.idle.append(conn)
        self._keep(index, outcome)


async def stream_open_loop(
    base_url_v1: str,
    served_name: str,
    requests: Sequence[ApiRequest],
    offsets_s: Sequence[float],
    *,
    max_in_flight: int,
    timeout_s: float,
    preopen: int = 0,
    on_record: OnRecord | None = None,
    guard: Guard | None = None,
    in_flight: InFlight | None = None,
) -> OpenLoopRun:
    """Stream ``requests[i]`` at ``offsets_s[i]`` seconds after the run starts (open loop).

    At most ``max_in_flight`` are open (one that waits counts in :attr:`OpenLoopRun.capped`);
    ``preopen`` connections are opened before the clock starts.
    """
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
    if len(offsets_s) != len(requests):
        raise ValueError(f"{len(requests)} requests but {len(offsets_s)} send times")
    if any(b < a for a, b in itertools.pairwise(offsets_s)) or (offsets_s and offsets_s[0] < 0):
        raise ValueError("send times must be ascending offsets from 0 s")
    runner = _OpenLoopRunner(
        base_url_v1, served_name, requests, timeout_s, on_record, guard, in_flight
    )
    await with_watch(runner.watch, lambda: runner.run(offsets_s, max_in_flight, preopen))
    return OpenLoopRun(
        [outcome for outcome in runner.outcomes if outcome is not None],
        runner.scheduled,
        runner.started,
        max_in_flight,
        runner.capped,
        runner.in_flight.peak,
    )
