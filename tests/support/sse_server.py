"""A small real loopback server that streams OpenAI-style SSE chunks, with faults.

It speaks HTTP/1.1 with keep-alive on 127.0.0.1 (port 0, or ``port``), in a thread with its
own event loop, and serves what the client and the throughput workload use:

* ``POST /v1/completions`` and ``/v1/chat/completions``: ``max_tokens`` tokens
  " w0", " w1", ... as one chunked SSE event each, then a finish chunk with
  ``usage`` (and llama.cpp-like ``timings.cache_n``), then ``data: [DONE]``;
  with ``stream`` false, one JSON body.
* ``POST /tokenize``: llama.cpp-shaped; one token per whitespace-separated word,
  its id a CRC32 of the word, plus ``bos`` leading id 1 when ``add_special``.
* ``GET /metrics``: llama.cpp counters (``llamacpp:tokens_predicted_total``...).

A request picks a fault with a ``"test_fault"`` key in its JSON body (the
client passes payload keys through), else the server's ``default_fault``:
``short:K`` (stop after K tokens), ``cut:K`` (close the connection after K
chunks), ``nonjson:K`` (a non-JSON data line after K chunks), ``http500``,
``slow:SECONDS`` (sleep before each chunk), ``batch:K`` (K tokens per chunk),
``error:K`` (an ``{"error": ...}`` event after K chunks), ``nodone`` (end the
body properly without ``[DONE]``), ``badjson`` (a non-streaming 200 that is not
JSON), ``hang`` (never answer); and framings: ``crlf`` (CRLF line ends),
``length`` (a Content-Length body), ``trickle`` (7-byte writes), ``close``
(``Connection: close``, then close), ``dropnext`` (answer, keep the connection,
then close it without a word on the next request it carries); ``echokey`` (HTTP 500
whose body echoes the request's ``Authorization`` header, as some proxies do);
``othermodel`` (an answer whose ``model`` field names another model than the one asked
for: a proxy routing to the wrong model). Every other answer names the model asked for.

With ``served_names`` it lists them at ``GET /v1/models`` (so ``--endpoint`` attaches), each
entry with the keys of ``model_entry`` too (a NaN is written as JSON's ``NaN``);
with ``api_key`` every request needs ``Authorization: Bearer KEY`` (or Basic with KEY as
the password), else HTTP 401; ``freeze`` makes the server stop answering anything, GETs
included, from the first completion request on (a hung server); ``drip_s`` writes every
answer but a stream a byte at a time, ``drip_s`` apart (a hostile server that never trips
a per-read timeout).

``per_token_s_per_inflight`` makes latency grow with load, as a batching server's
does: each token chunk is due ``per_token_s_per_inflight × (requests generating now)``
seconds after the previous one (paced by deadlines, so that a late wake-up does not add
up). With ``c`` requests kept in flight, a request's TPOT is about ``base × c``; the
server completes ``1 / (base × max_tokens)`` requests per second however many share it.
``slots`` (0: no limit) lets at most that many generate at once, as llama-server's
``--parallel`` does: the others wait in a queue, first come first served, so a request's
time grows with the queue ahead of it. ``/metrics`` reports the requests generating and
waiting (``llamacpp:requests_processing``/``requests_deferred``), or with
``metrics_style="vllm"`` vLLM's names (``vllm:num_requests_running``/``waiting``,
``vllm:kv_cache_usage_perc`` = generating ÷ slots, ``vllm:num_preemptions_total`` from
``stats.preemptions``, ``vllm:prefix_cache_hits_total``/``queries_total``).

``schedule`` (a :class:`DelaySchedule`) paces each completion request by data instead of one
``chunk_delay_s``: the delay before each of its tokens is the schedule's next one, so a test
states the speeds a server goes through (a drift, a repeat slower than the last) as a list.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

HTTP500_BODY = '{"error":{"code":500,"message":"model exploded\\nsecond line"}}'


def fake_token_ids(text: str) -> list[int]:
    """The fake tokenizer: one id per whitespace-separated word."""
    return [2 + zlib.crc32(word.encode()) % 60000 for word in text.split()]


@dataclass
class ServerStats:
    """What the server saw: connections, requests in flight, bodies, counters."""

    connections: int = 0
    open_connections: int = 0
    max_open_connections: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    tokens_predicted: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    processing: int = 0
    deferred: int = 0
    max_deferred: int = 0
    preemptions: int = 0
    dropped: int = 0
    authorizations: list[str] = field(default_factory=list)


class DelaySchedule:
    """Per-request pacing as data: the n-th completion request taken by any server that shares
    the schedule waits ``token_delays_s[n]`` before each token (0-based, in the order the
    servers take them; past the end the list starts again)."""

    def __init__(self, token_delays_s: Sequence[float]) -> None:
        self.token_delays_s = tuple(token_delays_s)
        self.taken = 0
        self._lock = threading.Lock()  # servers sharing a schedule run in threads of their own

    def next_delay(self) -> float:
        with self._lock:
            delay = self.token_delays_s[self.taken % len(self.token_delays_s)]
            self.taken += 1
            return delay


class SseServer:
    """The loopback server; use as a context manager or call start()/stop()."""

    def __init__(
        self,
        *,
        default_fault: str = "",
        bos: int = 0,
        cached_tokens_per_request: int = 0,
        counter_scale: float = 1.0,
        metrics: bool = True,
        chunk_delay_s: float = 0.0,
        served_names: tuple[str, ...] = (),
        api_key: str | None = None,
        freeze: bool = False,
        per_token_s_per_inflight: float = 0.0,
        slots: int = 0,
        metrics_style: str = "llamacpp",
        port: int = 0,
        drip_s: float = 0.0,
        model_entry: dict[str, Any] | None = None,
        schedule: DelaySchedule | None = None,
    ) -> None:
        self.model_entry = model_entry or {}
        self.schedule = schedule
        self.drip_s = drip_s
        self.per_token_s_per_inflight = per_token_s_per_inflight
        self.slots = slots
        self.metrics_style = metrics_style
        self._slot_queue = asyncio.Semaphore(slots) if slots else None
        self.served_names = served_names
        self.api_key = api_key
        self.freeze = freeze
        self.frozen = False
        self.default_fault = default_fault
        self.bos = bos
        self.cached_tokens_per_request = cached_tokens_per_request
        self.counter_scale = counter_scale
        self.metrics = metrics
        self.chunk_delay_s = chunk_delay_s
        self.stats = ServerStats()
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def v1(self) -> str:
        return self.base_url + "/v1"

    def start(self) -> SseServer:
        self._thread = threading.Thread(target=self._run, name="sse-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("SSE test server did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> SseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        self.stats = ServerStats()

    # -- server loop

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._server = loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", self.port)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stats = self.stats
        stats.connections += 1
        stats.open_connections += 1
        stats.max_open_connections = max(stats.max_open_connections, stats.open_connections)
        drop_next = False
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if drop_next:  # a kept-alive connection the server gives up on
                    stats.dropped += 1
                    writer.transport.abort()
                    return
                drop_next = b'"test_fault":"dropnext"' in body
                if self.freeze and method == "POST" and "completions" in path:
                    self.frozen = True
                if self.frozen:
                    await asyncio.Event().wait()  # never answers
                auth = headers.get("authorization", "")
                stats.authorizations.append(auth)
                if self.api_key is not None and not self._authorized(auth):
                    await self._respond(
                        writer, 401, "application/json", b'{"error":{"message":"Invalid API key"}}'
                    )
                    continue
                if (
                    b'"test_fault":"echokey"' in body or self.default_fault == "echokey"
                ) and "completions" in path:
                    echo = {"error": {"message": f"upstream refused: header was {auth!r}"}}
                    await self._respond(writer, 500, "application/json", json.dumps(echo).encode())
                    continue
                if path == "/v1/models" and method == "GET" and self.served_names:
                    listing = {
                        "object": "list",
                        "data": [
                            {"id": name, "object": "model", **self.model_entry}
                            for name in self.served_names
                        ],
                    }
                    await self._respond(
                        writer, 200, "application/json", json.dumps(listing).encode()
                    )
                    continue
                keep = await self._dispatch(method, path, body, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:  # server stopping (3.11's start_server trips on a re-raise)
            return
        finally:
            stats.open_connections -= 1
            writer.close()

    def _authorized(self, auth: str) -> bool:
        scheme, _, value = auth.partition(" ")
        if scheme == "Bearer":
            return value == self.api_key
        if scheme == "Basic":
            return base64.b64decode(value).decode().partition(":")[2] == self.api_key
        return False

    async def _dispatch(
        self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        if path == "/metrics" and method == "GET":
            if not self.metrics:
                return await self._respond(writer, 501, "text/plain", b"metrics disabled")
            return await self._respond(writer, 200, "text/plain; version=0.0.4", self._metrics())
        if path == "/health":
            return await self._respond(writer, 200, "application/json", b'{"status":"ok"}')
        data = json.loads(body or b"{}")
        if path == "/tokenize" and method == "POST":
            if "content" not in data:  # llama.cpp-shaped only
                return await self._respond(writer, 400, "text/plain", b"content is required")
            ids = fake_token_ids(data["content"])
            if data.get("add_special"):
                ids = [1] * self.bos + ids
            return await self._respond(
                writer, 200, "application/json", json.dumps({"tokens": ids}).encode()
            )
        if path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            stats = self.stats
            stats.bodies.append(data)
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            try:
                if self._slot_queue is not None:
                    stats.deferred += 1
                    stats.max_deferred = max(stats.max_deferred, stats.deferred)
                    try:
                        await self._slot_queue.acquire()
                    finally:
                        stats.deferred -= 1
                stats.processing += 1
                try:
                    return await self._generate(path, data, writer)
                finally:
                    stats.processing -= 1
                    if self._slot_queue is not None:
                        self._slot_queue.release()
            finally:
                stats.in_flight -= 1
        return await self._respond(writer, 404, "text/plain", b"not found")

    # -- responses

    async def _respond(
        self, writer: asyncio.StreamWriter, status: int, ctype: str, body: bytes
    ) -> bool:
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            500: "Internal Server Error",
            501: "Not Implemented",
        }
        answer = (
            f"HTTP/1.1 {status} {reason.get(status, 'X')}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        step = 1 if self.drip_s else len(answer)
        for i in range(0, len(answer), step):
            writer.write(answer[i : i + step])
            await writer.drain()
            if self.drip_s:
                await asyncio.sleep(self.drip_s)
        return True

    def _metrics(self) -> bytes:
        s = self.stats
        predicted = int(s.tokens_predicted * self.counter_scale)
        if self.metrics_style == "vllm":
            labels = '{engine="0",model_name="fake"}'
            usage = s.processing / self.slots if self.slots else 0.0
            return (
                "# TYPE vllm:num_requests_running gauge\n"
                f"vllm:num_requests_running{labels} {float(s.processing)}\n"
                f"vllm:num_requests_waiting{labels} {float(s.deferred)}\n"
                f"vllm:kv_cache_usage_perc{labels} {usage}\n"
                "# TYPE vllm:num_preemptions counter\n"
                f"vllm:num_preemptions_total{labels} {float(s.preemptions)}\n"
                f"vllm:num_preemptions_created{labels} 1.7e9\n"
                f"vllm:prefix_cache_queries_total{labels} {float(s.prompt_tokens + s.cached_tokens)}\n"
                f"vllm:prefix_cache_hits_total{labels} {float(s.cached_tokens)}\n"
                f"vllm:prompt_tokens_total{labels} {float(s.prompt_tokens + s.cached_tokens)}\n"
                f"vllm:generation_tokens_total{labels} {float(predicted)}\n"
                f'vllm:e2e_request_latency_seconds_bucket{{le="0.3",model_name="fake"}} 3.0\n'
            ).encode()
        return (
            "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
            "# TYPE llamacpp:prompt_tokens_total counter\n"
            f"llamacpp:prompt_tokens_total {s.prompt_tokens}\n"
            f"llamacpp:prompt_tokens_cached_total {s.cached_tokens}\n"
            "# TYPE llamacpp:tokens_predicted_total counter\n"
            f"llamacpp:tokens_predicted_total {predicted}\n"
            f"llamacpp:requests_processing {s.processing}\n"
            f"llamacpp:requests_deferred {s.deferred}\n"
        ).encode()

    async def _generate(
        self, path: str, data: dict[str, Any], writer: asyncio.StreamWriter
    ) -> bool:
        fault, _, arg = str(data.get("test_fault", self.default_fault)).partition(":")
        token_delay_s = self.schedule.next_delay() if self.schedule else self.chunk_delay_s
        max_tokens = int(data.get("max_tokens", 16))
        prompt = data.get("prompt") or " ".join(
            str(m.get("content", "")) for m in data.get("messages", [])
        )
        prompt_tokens = len(fake_token_ids(prompt)) + self.bos
        chat = path.endswith("chat/completions")
        if fault == "hang":
            await asyncio.sleep(3600)
        if fault == "http500":
            await self._respond(writer, 500, "application/json", HTTP500_BODY.encode())
            return True
        model = "another-model" if fault == "othermodel" else str(data.get("model", ""))
        produce = int(arg) if fault == "short" else max_tokens
        finish = "stop" if fault == "short" else "length"
        self.stats.prompt_tokens += prompt_tokens - self.cached_tokens_per_request
        self.stats.cached_tokens += self.cached_tokens_per_request
        if not data.get("stream"):
            body = self._final_json(chat, produce, finish, prompt_tokens, model)
            if fault == "badjson":
                body = b"<html>oops</html>"
            if fault == "slow":  # computed a token at a time: silent, but the counters move
                for _ in range(produce):
                    await asyncio.sleep(float(arg))
                    self.stats.tokens_predicted += 1
            else:
                self.stats.tokens_predicted += produce
            return await self._respond(writer, 200, "application/json", body)

        if fault in ("crlf", "length", "trickle", "close"):
            return await self._framed(fault, chat, produce, finish, prompt_tokens, writer)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n"
        )
        delay = float(arg) if fault == "slow" else token_delay_s
        per_chunk = int(arg) if fault == "batch" else 1
        after = int(arg) if fault in ("cut", "nonjson", "error") else -1
        sent = 0
        chunks = 0
        loop = asyncio.get_running_loop()
        due = loop.time()
        while sent < produce:
            if chunks == after:
                if fault == "cut":
                    await writer.drain()
                    writer.transport.abort()
                    return False
                if fault == "nonjson":
                    self._event(writer, b"data: {not json at all\n\n")
                elif fault == "error":
                    self._event(writer, b'data: {"error":{"message":"out of memory"}}\n\n')
                await writer.drain()
                after = -1
            if delay:
                await asyncio.sleep(delay)
            if self.per_token_s_per_inflight:
                due += self.per_token_s_per_inflight * self.stats.processing
                await asyncio.sleep(max(0.0, due - loop.time()))
            take = min(per_chunk, produce - sent)
            text = "".join(f" w{sent + i}" for i in range(take))
            self._event(writer, b"data: " + self._chunk(chat, text, None, model=model) + b"\n\n")
            sent += take
            chunks += 1
            self.stats.tokens_predicted += take
            await writer.drain()
        final = self._chunk(chat, "", finish, usage=(prompt_tokens, produce), model=model)
        self._event(writer, b"data: " + final + b"\n\n")
        if fault != "nodone":
            self._event(writer, b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _framed(
        self,
        fault: str,
        chat: bool,
        produce: int,
        finish: str,
        prompt_tokens: int,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """A whole response framed another way: CRLF events, Content-Length, trickled, close."""
        end = b"\r\n\r\n" if fault == "crlf" else b"\n\n"
        events = [b"data: " + self._chunk(chat, f" w{i}", None) + end for i in range(produce)] + [
            b"data: " + self._chunk(chat, "", finish, usage=(prompt_tokens, produce)) + end,
            b": keep-alive comment" + end,
            b"data: [DONE]" + end,
        ]
        self.stats.tokens_predicted += produce
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        if fault == "length":
            body = b"".join(events)
            head += b"Content-Length: %d\r\n\r\n" % len(body)
        else:
            body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
            close = b"Connection: close\r\n" if fault == "close" else b""
            head += b"Transfer-Encoding: chunked\r\n" + close + b"\r\n"
        data = head + body
        step = 7 if fault == "trickle" else len(data)
        for i in range(0, len(data), step):
            writer.write(data[i : i + step])
            await writer.drain()
            if fault == "trickle":
                await asyncio.sleep(0)
        return fault != "close"

    @staticmethod
    def _event(writer: asyncio.StreamWriter, event: bytes) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))

    def _chunk(
        self,
        chat: bool,
        text: str,
        finish: str | None,
        usage: tuple[int, int] | None = None,
        model: str = "",
    ) -> bytes:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["delta"] = {"content": text} if text else {}
        else:
            choice["text"] = text
        obj: dict[str, Any] = {
            "id": "cmpl-1",
            "object": "text_completion",
            "model": model,
            "choices": [choice],
        }
        if usage is not None:
            obj["usage"] = {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": usage[0] + usage[1],
            }
            obj["timings"] = {"cache_n": self.cached_tokens_per_request, "predicted_n": usage[1]}
        return json.dumps(obj).encode()

    def _final_json(
        self, chat: bool, produce: int, finish: str, prompt_tokens: int, model: str = ""
    ) -> bytes:
        text = "".join(f" w{i}" for i in range(produce))
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return json.dumps(
            {
                "model": model,
                "choices": [choice],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": produce},
            }
        ).encode()


class ListingServer(SseServer):
    """The fake streaming server, also listing its model at ``GET /v1/models`` so that
    ``--endpoint`` attaches to it (it reports itself as a generic OpenAI-compatible server);
    with ``build_info`` it answers ``GET /props`` as llama-server does (its build, its
    slots), so that the probe takes it for llama-server; with ``vllm_version`` it answers
    ``GET /version`` as vLLM does, publishing vLLM's counters but no config-info gauge."""

    def __init__(
        self,
        served_name: str,
        *,
        chunk_delay_s: float = 0.0,
        default_fault: str = "",
        per_token_s_per_inflight: float = 0.0,
        slots: int = 0,
        port: int = 0,
        build_info: str | None = None,
        vllm_version: str | None = None,
        schedule: DelaySchedule | None = None,
        model_entry: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            schedule=schedule,
            model_entry=model_entry,
            chunk_delay_s=chunk_delay_s,
            default_fault=default_fault,
            per_token_s_per_inflight=per_token_s_per_inflight,
            slots=slots,
            port=port,
            metrics_style="vllm" if vllm_version else "llamacpp",
        )
        self.served_name = served_name
        self.build_info = build_info
        self.vllm_version = vllm_version

    async def _dispatch(
        self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        if path == "/v1/models" and method == "GET":
            entry = {"id": self.served_name, "object": "model", **self.model_entry}
            listing = {"object": "list", "data": [entry]}
            return await self._respond(
                writer, 200, "application/json", json.dumps(listing).encode()
            )
        if path == "/props" and method == "GET" and self.build_info is not None:
            props = {
                "build_info": self.build_info,
                "total_slots": self.slots or 1,
                "default_generation_settings": {"n_ctx": 4096, "params": {}},
            }
            return await self._respond(writer, 200, "application/json", json.dumps(props).encode())
        if path == "/version" and method == "GET" and self.vllm_version is not None:
            version = json.dumps({"version": self.vllm_version}).encode()
            return await self._respond(writer, 200, "application/json", version)
        return await super()._dispatch(method, path, body, writer)
