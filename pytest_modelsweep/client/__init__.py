"""An async OpenAI-compatible client: N requests in flight, or requests sent on a schedule.

Two paths:

* :func:`stream_requests` (throughput, latency) and :func:`stream_open_loop` (requests
  sent at scheduled times, whatever is in flight) stream ``stream: true``
  responses over a small HTTP/1.1 client of its own, built on
  :class:`asyncio.Protocol`: each connection parses the status line, headers,
  chunked or ``Content-Length`` bodies and the SSE events inline, as the bytes
  arrive, with one clock reading per socket read. On one core it costs about
  4 µs of CPU per token when reads carry many events (over 200,000 tokens/s
  at 16 and 64 streams) against about 13 µs for an httpx ``aiter_lines`` loop
  (about 70,000 tokens/s) and 6 µs for aiohttp (not a dependency); at about
  one event per read, 9-10 µs against httpx's 17-45 µs and aiohttp's 10-14 µs.
  ``benches/perf/client_harness.py`` has the side-by-side figures. The CPU it
  saves is timing accuracy: a busy client delays its own clock readings.
* :func:`post_requests` (accuracy workloads) sends plain JSON POSTs with
  httpx, where per-event speed does not matter; each answer is read once, by
  :func:`parse_completion`, into a :class:`~..core.records.Completion`.

Neither raises for a bad answer from the server: an HTTP error status, a cut
stream, a non-JSON ``data:`` line or a timeout becomes a one-line ``error``
on that request's record, and the other requests go on.
"""

from .post import parse_completion, post_requests, run_post_requests
from .stream import (
    InFlight,
    OpenLoopRun,
    StreamOutcome,
    run_stream_requests,
    stream_open_loop,
    stream_requests,
    stream_requests_detailed,
)
from .watch import Guard

__all__ = [
    "Guard",
    "InFlight",
    "OpenLoopRun",
    "StreamOutcome",
    "parse_completion",
    "post_requests",
    "run_post_requests",
    "run_stream_requests",
    "stream_open_loop",
    "stream_requests",
    "stream_requests_detailed",
]
