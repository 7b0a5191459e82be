"""An async OpenAI-compatible client: N requests in flight, or requests sent on a schedule.

* :func:`stream_requests` and :func:`stream_open_loop` stream over a small HTTP/1.1 client
  on :class:`asyncio.Protocol` that parses SSE inline with one clock reading per socket
  read: about 4 µs of CPU per token against httpx's 13 µs
  (``benches/perf/client_harness.py``); a busy client delays its own clock readings.
* :func:`post_requests` (accuracy) sends plain JSON POSTs with httpx; each answer is read
  once by :func:`parse_completion`.

Neither raises for a bad answer: an error status, a cut stream or a timeout becomes a
one-line ``error`` on that request's record, and the other requests go on.
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
    "Guard", "InFlight", "OpenLoopRun", "StreamOutcome", "parse_completion", "post_requests",
    "run_post_requests", "run_stream_requests", "stream_open_loop", "stream_requests",
    "stream_requests_detailed",
]
