"""HTTP/1.1 framing and SSE parsing for streamed requests, on :class:`asyncio.BufferedProtocol`.

Each connection parses the status line, headers, chunked or ``Content-Length``
bodies and the SSE events inline, as the bytes arrive, with one clock reading per
socket read; a bad answer becomes a one-line ``error`` on that request's record.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..core.records import ApiRequest
from ..core.secrets import redact

perf = time.perf_counter
_loads = json.loads
_MAX_HEAD = 64 * 1024
MAX_ERROR_BODY = 4096


def one_line(text: str, limit: int = 200) -> str:
    """A server's ``text`` as a record's error: on one line, credentials redacted, cut to
    ``limit`` characters."""
    return redact(" ".join(text.split()))[:limit]


def short_bytes(data: bytes, limit: int = 80) -> str:
    """The start of a server's bad bytes, credentials redacted."""
    return redact(data[: limit * 4].decode("utf-8", "replace"))[:limit]


def other_model(asked: str, answered: Any) -> str | None:
    """The error of an answer whose ``model`` field names another model than ``asked``,
    else None. No ``model`` field passes, and so do the asked name in any case, versioned
    (``m-2024-08-06``, ``m:latest``, ``m@v2``) or with a folder before it (``org/m``)."""
    if not isinstance(answered, str) or not answered or not asked:
        return None
    a, b = asked.lower(), answered.lower()
    if (
        b == a
        or b.rpartition("/")[2] == a.rpartition("/")[2]
        or b.startswith((a + "-", a + ":", a + "@"))
    ):
        return None
    return (
        f"answered by model {redact(answered)[:80]!r}, not {asked!r} that was asked for: "
        "the server (or a proxy before it) routes to another model; point --endpoint at "
        "the server of this model, or fix its served_name in the sweep"
    )


@dataclass(frozen=True)
class Target:
    """Where requests go: scheme, host, port and the path prefix before ``/v1``."""

    scheme: str
    host: str
    port: int
    prefix: str

    @classmethod
    def parse(cls, base_url_v1: str) -> Target:
        parts = urlsplit(base_url_v1.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url_v1!r}")
        return cls(
            parts.scheme,
            parts.hostname,
            parts.port or (443 if parts.scheme == "https" else 80),
            parts.path.removesuffix("/v1"),
        )

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return (
            host if self.port == (443 if self.scheme == "https" else 80) else f"{host}:{self.port}"
        )


def request_body(served_name: str, request: ApiRequest, *, stream: bool) -> bytes:
    payload: dict[str, Any] = {"model": served_name, **request.payload}
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {**(payload.get("stream_options") or {}), "include_usage": True}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass(slots=True, eq=False, repr=False)
class StreamExchange:
    """One streamed request: receives the response head and body, parses SSE events."""

    path: str
    future: asyncio.Future[None]
    asked_model: str = ""
    """The served name sent: an event naming another model fails the request."""
    status: int = 0
    is_sse: bool = True
    error: str | None = None
    done: bool = False
    end: float | None = None
    chunks: int = 0
    first: float | None = None
    times: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    finish: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    any_bytes: bool = False
    last: float = field(default_factory=perf)
    _sse: bytes = b""
    _err_body: bytearray = field(default_factory=bytearray)

    # -- called by the connection

    def on_head(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.is_sse = status == 200 and "text/event-stream" in headers.get("content-type", "")

    def on_body(self, data: bytes, now: float) -> bool:
        """Feed body bytes; False asks the connection to abort (the request failed)."""
        if not self.is_sse:
            if len(self._err_body) < MAX_ERROR_BODY:
                self._err_body += data[: MAX_ERROR_BODY - len(self._err_body)]
            return True
        buf = self._sse + data if self._sse else data
        if b"\r" in buf:
            buf = self._normalize(buf)
        pos = 0
        find = buf.find
        while True:
            j = find(b"\n\n", pos)
            if j < 0:
                break
            event = buf[pos:j]
            pos = j + 2
            payload = (
                event[6:] if event[:6] == b"data: " and b"\n" not in event else self._data_of(event)
            )
            if payload is not None and not self._on_data(payload, now):
                return False
        self._sse = buf[pos:] if pos else buf
        return True

    def on_end(self, complete: bool, now: float, reason: str = "") -> None:
        """The response ended: completely, or cut (connection lost, protocol error)."""
        if self.future.done():
            return
        if self.error is None:
            if not self.status:
                self.error = reason or "connection closed before a response"
            elif not self.is_sse:
                body = one_line(self._err_body.decode("utf-8", "replace"))
                self.error = (
                    f"expected an SSE stream from {self.path}, got HTTP 200 "
                    f"without text/event-stream: {body}"
                    if self.status == 200
                    else f"HTTP {self.status} from {self.path}: {body}"
                )
            elif not self.done:
                cut = "" if complete else f" ({reason or 'connection closed'})"
                self.error = f"stream ended before [DONE] after {self.chunks} chunks{cut}"
        self.fail(self.error, now)

    def fail(self, reason: str | None, now: float) -> None:
        """End the request with ``reason`` as its error (unless it has one already)."""
        if self.error is None:
            self.error = reason
        if self.end is None:
            self.end = now
        if not self.future.done():
            self.future.set_result(None)

    # -- SSE

    @staticmethod
    def _normalize(buf: bytes) -> bytes:
        """CRLF or CR line ends to LF; a trailing CR waits for its LF."""
        tail = b""
        if buf.endswith(b"\r"):
            buf, tail = buf[:-1], b"\r"
        return buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail

    @staticmethod
    def _data_of(event: bytes) -> bytes | None:
        """The data of one SSE event (``data:`` lines joined), or None for none."""
        lines = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line[:5] == b"data:"]
        return b"\n".join(lines) if lines else None

    def _on_data(self, payload: bytes, now: float) -> bool:
        self.chunks += 1
        if self.done:
            return True
        if payload == b"[DONE]":
            self.done = True
            self.end = now
            return True
        try:
            obj = _loads(payload)
        except ValueError:
            self.fail(f"non-JSON SSE data line: {short_bytes(payload)!r}", now)
            return False
        if type(obj) is not dict:
            self.fail(f"SSE data is not a JSON object: {short_bytes(payload)!r}", now)
            return False
        if self.asked_model:
            wrong = other_model(self.asked_model, obj.get("model"))
            if wrong is not None:
                self.fail(wrong, now)
                return False
            self.asked_model = ""  # the first event that says decides; the rest pay nothing
        choices = obj.get("choices")
        if choices:
            choice = choices[0]
            if type(choice) is not dict:
                self.fail(f"malformed choices in SSE data: {short_bytes(payload)!r}", now)
                return False
            text = choice.get("text")
            if text is None:
                delta = choice.get("delta")
                if delta:
                    text = (
                        delta.get("content")
                        or delta.get("reasoning_content")
                        or delta.get("reasoning")
                    )
            if text:
                if self.first is None:
                    self.first = now
                self.times.append(now)
                self.texts.append(text)
            self.finish = choice.get("finish_reason") or self.finish
        usage = obj.get("usage")
        if usage:
            self.prompt_tokens = usage.get("prompt_tokens")
            self.completion_tokens = usage.get("completion_tokens")
            details = usage.get("prompt_tokens_details")
            if details and details.get("cached_tokens") is not None:
                self.cached_tokens = details["cached_tokens"]
        timings = obj.get("timings")
        if timings and "cache_n" in timings:
            self.cached_tokens = timings["cache_n"]
        error = obj.get("error")
        if error:
            message = error.get("message", error) if isinstance(error, dict) else error
            self.fail(
                f"server error in stream after {self.chunks} chunks: {one_line(str(message))}", now
            )
            return False
        return True


(
    _HEAD,
    _BODY_CHUNK_SIZE,
    _BODY_CHUNK_DATA,
    _BODY_CHUNK_CRLF,
    _TRAILERS,
    _BODY_LENGTH,
    _BODY_CLOSE,
) = range(7)


class Connection(asyncio.BufferedProtocol):
    """One HTTP/1.1 keep-alive connection; parses one response at a time as bytes arrive
    (the socket reads into one preallocated buffer, not a fresh bytes object per read)."""

    def __init__(self) -> None:
        self._read_buffer = bytearray(256 * 1024)
        self._read_view = memoryview(self._read_buffer)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._ex: StreamExchange | None = None
        self._buf = b""
        self._state = _HEAD
        self._left = 0
        self._keep_alive = True

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex, self._ex = self._ex, None
        if ex is not None:  # a close-delimited body is complete when the connection closes
            ex.on_end(
                self._state == _BODY_CLOSE,
                perf(),
                "connection closed" if exc is None else f"connection lost: {exc}",
            )

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._read_view[:nbytes].tobytes())

    def data_received(self, data: bytes) -> None:
        """Parse ``data``: the response head, then chunked, sized or close-delimited body."""
        now = perf()
        ex = self._ex
        if ex is None:
            self.abort()  # bytes nobody asked for: the connection is out of step
            return
        ex.any_bytes = True
        ex.last = now
        buf = self._buf + data if self._buf else data
        pos = 0
        n = len(buf)
        state = self._state
        if state == _HEAD:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if n > _MAX_HEAD:
                    self._fail(ex, "response head over 64 KiB", now)
                    return
                self._buf = buf
                return
            error = self._head(ex, buf[:end])
            if error:
                self._fail(ex, error, now)
                return
            pos = end + 4
            state = self._state
            if state == _HEAD:  # an interim 1xx response: read the next head
                self._buf = b""
                if pos < n:
                    self.data_received(buf[pos:])
                return
        if state == _BODY_LENGTH:
            take = min(self._left, n - pos)
            self._left -= take
            if take and not ex.on_body(buf[pos : pos + take], now):
                self.abort()
                return
            self._buf = b""
            if self._left == 0:
                self._finish(ex, now)
            return
        if state == _BODY_CLOSE:
            self._buf = b""
            if pos < n and not ex.on_body(buf[pos:], now):
                self.abort()
            return
        # chunked transfer encoding
        pieces: list[bytes] = []
        left = self._left
        find = buf.find
        while True:
            if state == _BODY_CHUNK_SIZE:
                eol = find(b"\r\n", pos)
                if eol < 0:
                    break
                line = buf[pos:eol]
                semi = line.find(b";")
                try:
                    left = int(line if semi < 0 else line[:semi], 16)
                except ValueError:
                    self._fail(ex, f"bad chunk size line {short_bytes(line)!r}", now)
                    return
                pos = eol + 2
                state = _BODY_CHUNK_DATA if left else _TRAILERS
            elif state == _BODY_CHUNK_DATA:
                avail = n - pos
                if avail <= 0:
                    break
                if avail >= left:
                    pieces.append(buf[pos : pos + left])
                    pos += left
                    left = 0
                    state = _BODY_CHUNK_CRLF
                else:
                    pieces.append(buf[pos:])
                    left -= avail
                    pos = n
                    break
            elif state == _BODY_CHUNK_CRLF:
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    self._fail(ex, "chunk data not followed by CRLF", now)
                    return
                pos += 2
                state = _BODY_CHUNK_SIZE
            else:  # _TRAILERS: lines until an empty one
                eol = find(b"\r\n", pos)
                if eol < 0:
                    break
                empty = eol == pos
                pos = eol + 2
                if empty:
                    state = _HEAD
                    break
        self._state = state
        self._left = left
        self._buf = buf[pos:] if pos < n else b""
        if pieces:
            body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            if not ex.on_body(body, now):
                self.abort()
                return
        if state == _HEAD:
            self._finish(ex, now)

    # -- helpers

    def _head(self, ex: StreamExchange, head: bytes) -> str | None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            return f"not an HTTP/1.x response: {lines[0][:80]!r}"
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if 100 <= status < 200:
            self._state = _HEAD
            return None
        connection = headers.get("connection", "").lower()
        self._keep_alive = (
            "close" not in connection if parts[0] == "HTTP/1.1" else "keep-alive" in connection
        )
        ex.on_head(status, headers)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _BODY_CHUNK_SIZE
        elif "content-length" in headers:
            try:
                self._left = int(headers["content-length"])
            except ValueError:
                return f"bad Content-Length {headers['content-length']!r}"
            self._state = _BODY_LENGTH
        elif status in (204, 304):
            self._left = 0
            self._state = _BODY_LENGTH
        else:
            self._state = _BODY_CLOSE
            self._keep_alive = False
        return None

    def _finish(self, ex: StreamExchange, now: float) -> None:
        self._ex = None
        self._state = _HEAD
        if not self._keep_alive or self._buf:
            self.abort()
        ex.on_end(True, now)

    def _fail(self, ex: StreamExchange, reason: str, now: float) -> None:
        self._ex = None
        self.abort()
        ex.fail(f"bad HTTP response from {ex.path}: {reason}", now)

    def send(self, request: bytes, ex: StreamExchange) -> None:
        assert self.transport is not None and self._ex is None
        self._ex = ex
        self._buf = b""
        self._state = _HEAD
        self._keep_alive = True
        self.transport.write(request)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
