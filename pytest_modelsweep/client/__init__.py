"""An async OpenAI-compatible client: N requests in flight, or requests sent on a schedule.

Streaming uses a small HTTP/1.1 client of our own: about 4 µs of CPU per token against
httpx's 13 µs (``benches/perf/client_harness.py``); a busy client delays its own clock
readings. Accuracy's plain JSON POSTs use httpx. Neither raises for a bad answer: an error
status, a cut stream or a timeout is a one-line ``error`` on that request's record only.
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
