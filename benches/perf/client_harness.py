"""How many streamed tokens/s the benchmark client sustains on one core.

Run: ``python benches/perf/client_harness.py [--seconds S] [--tokens T] [--repeats R]
[--framing burst|per-event|paced|all]``

A loopback server in a separate process (pinned to one core) answers every
``POST /v1/completions`` with pre-encoded bytes: T vLLM-like SSE chunks, one
token each and each its own HTTP chunk, a usage chunk and ``[DONE]``. Two
framings, one table each:

* ``burst``: the whole response handed to the kernel in one write (the
  server is never the limit; reads carry many events);
* ``per-event``: one write per SSE event, streams served round-robin, as a
  real server writes one token at a time (reads carry one or a few events);
* ``paced``: per-event, with a 1 ms pause after each round (one event per
  stream), so that nearly every read carries one event, as from a real GPU
  server: the rate is the server's, and the figure that counts is the
  client's CPU µs per token at one event per read.

The server's ceiling is measured first with a raw-socket reader that only
counts bytes. The client side runs in this process, pinned to the other core,
at 1, 16 and 64 streams, side by side:

* ``modelsweep``: ``pytest_modelsweep.client.stream_requests_detailed`` (the production path);
* ``httpx lines``: a plain httpx ``aiter_lines`` + ``json.loads`` loop;
* ``httpx raw``: httpx ``aiter_raw`` with our own SSE splitting and ``json.loads``
  (how far httpx goes when the per-line work is taken out of its hands);
* ``aiohttp lines``: vLLM's own benchmark loop (``async for`` over
  ``response.content`` + ``json.loads``), only where aiohttp is importable
  (it is not a dependency; run the script from a throwaway venv that has it).

Each figure is the best of R runs (the machine is shared), with the client's CPU
time per token (``time.process_time``) of that run; paced, the run with the
least CPU per token.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx

from pytest_modelsweep.client import stream_requests_detailed
from pytest_modelsweep.core.records import ApiRequest

STREAMS = (1, 16, 64)
MODEL = "bench-model"


# --------------------------------------------------------------------------- server


def build_response(tokens: int) -> bytes:
    """One complete chunked SSE response, vLLM-shaped, one token per chunk."""
    head, events = build_events(tokens)
    return head + b"".join(events)


def build_events(tokens: int) -> tuple[bytes, list[bytes]]:
    """The response head and its HTTP chunks (one SSE event each, then the last chunk)."""
    created = int(time.time())
    parts = []
    for i in range(tokens):
        chunk = {
            "id": "cmpl-3f8a2b9c0d1e4f5a6b7c8d9e0f1a2b3c",
            "object": "text_completion",
            "created": created,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "text": f" tok{i % 97}",
                    "logprobs": None,
                    "finish_reason": "length" if i == tokens - 1 else None,
                    "stop_reason": None,
                }
            ],
            "usage": None,
        }
        parts.append(b"data: " + json.dumps(chunk, separators=(", ", ": ")).encode() + b"\n\n")
    usage = {
        "id": "cmpl-3f8a2b9c0d1e4f5a6b7c8d9e0f1a2b3c",
        "object": "text_completion",
        "created": created,
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 32, "total_tokens": 32 + tokens, "completion_tokens": tokens},
    }
    parts.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    chunks = [b"%x\r\n%s\r\n" % (len(p), p) for p in parts]
    chunks[-1] += b"0\r\n\r\n"
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"transfer-encoding: chunked\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
        b"server: uvicorn\r\n\r\n"
    )
    return head, chunks


class _ServerProtocol(asyncio.Protocol):
    response = b""
    head = b""
    events: list[bytes] = []
    per_event = False
    pace_s = 0.0
    active: dict[_ServerProtocol, int] = {}
    wake: asyncio.Event | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buf = b""

    def connection_lost(self, exc: Exception | None) -> None:
        _ServerProtocol.active.pop(self, None)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].lower()
            i = head.find(b"content-length:")
            length = int(head[i + 15 :].split(b"\r\n", 1)[0]) if i >= 0 else 0
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            if self.per_event:
                self.transport.write(self.head)
                _ServerProtocol.active[self] = 0
                assert _ServerProtocol.wake is not None
                _ServerProtocol.wake.set()
            else:
                self.transport.write(self.response)


async def _round_robin() -> None:
    """Per-event framing: one write per SSE event, one event per stream per round."""
    events = _ServerProtocol.events
    active = _ServerProtocol.active
    wake = _ServerProtocol.wake
    assert wake is not None
    while True:
        if not active:
            wake.clear()
            await wake.wait()
        for conn, cursor in list(active.items()):
            conn.transport.write(events[cursor])
            if cursor + 1 == len(events):
                del active[conn]
            else:
                active[conn] = cursor + 1
        await asyncio.sleep(_ServerProtocol.pace_s)


def serve(port_queue: Any, core: int, tokens: int, per_event: bool, pace_s: float) -> None:
    """The server process, pinned to ``core``: pre-encoded responses, burst or per event."""
    os.sched_setaffinity(0, {core})
    _ServerProtocol.response = build_response(tokens)
    _ServerProtocol.head, _ServerProtocol.events = build_events(tokens)
    _ServerProtocol.per_event = per_event
    _ServerProtocol.pace_s = pace_s

    async def main() -> None:
        loop = asyncio.get_running_loop()
        _ServerProtocol.wake = asyncio.Event()
        server = await loop.create_server(_ServerProtocol, "127.0.0.1", 0, backlog=512)
        port_queue.put(server.sockets[0].getsockname()[1])
        await _round_robin()

    asyncio.run(main())


# --------------------------------------------------------------------------- clients


def request_bytes(port: int) -> bytes:
    body = json.dumps({"model": MODEL, "prompt": "x", "max_tokens": 256, "stream": True}).encode()
    return (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def raw_ceiling(port: int, streams: int, seconds: float, tokens: int) -> float:
    """Tokens/s of a reader that only waits for each response's known byte count.

    Blocking ``recv_into(..., MSG_WAITALL)`` per response, streams in turn: the
    reader costs a few syscalls per response, so the figure is the server's.
    """
    req = request_bytes(port)
    size = len(build_response(tokens))
    buf = bytearray(size)
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(streams)]
    done = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    for sock in socks:
        sock.sendall(req)
    live = list(socks)
    while live:
        for sock in list(live):
            got = sock.recv_into(buf, size, socket.MSG_WAITALL)
            if got != size:
                raise RuntimeError(f"short response: {got} of {size} bytes")
            done += 1
            if time.perf_counter() < deadline:
                sock.sendall(req)
            else:
                live.remove(sock)
                sock.close()
    return done * tokens / (time.perf_counter() - t0)


async def run_modelsweep(port: int, streams: int, n: int) -> int:
    reqs = [
        ApiRequest(str(i), "/v1/completions", {"prompt": "x", "max_tokens": 256}) for i in range(n)
    ]
    outcomes = await stream_requests_detailed(
        f"http://127.0.0.1:{port}/v1", MODEL, reqs, streams, timeout_s=60
    )
    bad = [o.record.error for o in outcomes if o.record.error]
    if bad:
        raise RuntimeError(f"modelsweep client failed: {bad[0]}")
    return sum(len(o.record.token_times) for o in outcomes)


async def _httpx_workers(
    port: int, streams: int, n: int, consume: Callable[[httpx.Response], Coroutine[Any, Any, int]]
) -> int:
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    url = f"http://127.0.0.1:{port}/v1/completions"
    total = 0
    left = n
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            nonlocal left, total
            while left > 0:
                left -= 1
                payload = {"model": MODEL, "prompt": "x", "max_tokens": 256, "stream": True}
                async with client.stream("POST", url, json=payload) as response:
                    got = await consume(response)
                total += got

        await asyncio.gather(*(worker() for _ in range(streams)))
    return total


async def run_httpx_lines(port: int, streams: int, n: int) -> int:
    async def consume(response: httpx.Response) -> int:
        count = 0
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data = line[6:]
                if data == "[DONE]":
                    break
                obj = json.loads(data)
                if obj["choices"] and obj["choices"][0]["text"]:
                    count += 1
        return count

    return await _httpx_workers(port, streams, n, consume)


async def run_httpx_raw(port: int, streams: int, n: int) -> int:
    async def consume(response: httpx.Response) -> int:
        count = 0
        buf = b""
        async for data in response.aiter_raw():
            buf += data
            pos = 0
            while (j := buf.find(b"\n\n", pos)) >= 0:
                event = buf[pos:j]
                pos = j + 2
                if event.startswith(b"data: ") and event[6:] != b"[DONE]":
                    obj = json.loads(event[6:])
                    if obj["choices"] and obj["choices"][0]["text"]:
                        count += 1
            buf = buf[pos:]
        return count

    return await _httpx_workers(port, streams, n, consume)


async def run_aiohttp_lines(port: int, streams: int, n: int) -> int:
    import aiohttp  # only in a throwaway venv: not a dependency

    url = f"http://127.0.0.1:{port}/v1/completions"
    total = 0
    left = n
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal left, total
            while left > 0:
                left -= 1
                payload = {"model": MODEL, "prompt": "x", "max_tokens": 256, "stream": True}
                async with session.post(url, json=payload) as response:
                    async for chunk_bytes in response.content:
                        chunk_bytes = chunk_bytes.strip()
                        if not chunk_bytes:
                            continue
                        text = chunk_bytes.decode("utf-8").removeprefix("data: ")
                        if text != "[DONE]":
                            obj = json.loads(text)
                            if obj["choices"] and obj["choices"][0]["text"]:
                                total += 1

        await asyncio.gather(*(worker() for _ in range(streams)))
    return total


CLIENTS: dict[str, Callable[[int, int, int], Coroutine[Any, Any, int]]] = {
    "modelsweep": run_modelsweep,
    "httpx lines": run_httpx_lines,
    "httpx raw": run_httpx_raw,
}
try:
    import aiohttp  # noqa: F401

    CLIENTS["aiohttp lines"] = run_aiohttp_lines
except ImportError:
    pass


def measure(
    run: Callable[[int, int, int], Coroutine[Any, Any, int]],
    port: int,
    streams: int,
    seconds: float,
    tokens: int,
    rate_guess: float,
) -> tuple[float, float]:
    """(tokens/s, CPU µs per token) of one timed run sized to last about ``seconds``."""
    n = max(streams * 2, int(rate_guess * seconds / tokens) // streams * streams)
    cpu0, t0 = time.process_time(), time.perf_counter()
    got = asyncio.run(run(port, streams, n))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if got != n * tokens:
        raise RuntimeError(f"expected {n * tokens} tokens, counted {got}")
    return got / wall, cpu / got * 1e6


def table(port: int, args: argparse.Namespace, title: str, paced: bool = False) -> None:
    """Measure the ceiling and every client at 1, 16 and 64 streams; print one table.

    A cell is the run with the highest tokens/s, or, paced (where the server
    sets the rate), the run with the least CPU per token.
    """
    ceiling = {
        s: max(raw_ceiling(port, s, args.seconds, args.tokens) for _ in range(2)) for s in STREAMS
    }
    print(f"\n{title}")
    print(
        "server ceiling (raw-socket reader): "
        + ", ".join(f"{s} streams {ceiling[s]:,.0f} tok/s" for s in STREAMS)
    )
    header = f"{'client':<14}" + "".join(f"| {s:>2} streams tok/s  CPU µs/tok " for s in STREAMS)
    print(header)
    print("-" * len(header))
    for name, run in CLIENTS.items():
        cells = []
        guess = 20_000.0
        for streams in STREAMS:
            asyncio.run(run(port, streams, streams))  # warm-up
            best = (0.0, 0.0)
            for _ in range(args.repeats):
                size_by = min(guess, ceiling[streams])  # paced: the server sets the rate
                rate, cpu_us = measure(run, port, streams, args.seconds, args.tokens, size_by)
                guess = max(guess, rate)
                if best[0] == 0.0 or (cpu_us < best[1] if paced else rate > best[0]):
                    best = (rate, cpu_us)
            cells.append(best)
        print(
            f"{name:<14}" + "".join(f"| {rate:>16,.0f} {cpu:>11.1f} " for rate, cpu in cells),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one timed run")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per response")
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell; the best counts")
    parser.add_argument("--framing", choices=["burst", "per-event", "paced", "all"], default="all")
    parser.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help=f"comma-separated subset of: {', '.join(CLIENTS)}",
    )
    args = parser.parse_args()
    for name in list(CLIENTS):
        if name not in args.clients.split(","):
            del CLIENTS[name]

    cores = sorted(os.sched_getaffinity(0))
    client_core, server_core = cores[0], cores[-1]
    os.sched_setaffinity(0, {client_core})
    print(
        f"client on core {client_core}, server on core {server_core}; {args.tokens} tokens per "
        f"response, {len(build_response(args.tokens)) // args.tokens} bytes per token on the "
        f"wire; best of {args.repeats} runs of ~{args.seconds:g} s; Python "
        f"{sys.version.split()[0]}, httpx {httpx.__version__}"
    )
    framings = ["burst", "per-event", "paced"] if args.framing == "all" else [args.framing]
    titles = {
        "burst": "burst framing: each response handed to the kernel in one write",
        "per-event": "per-event framing: one write per SSE event, streams served round-robin",
        "paced": "paced per-event framing: 1 ms pause per round, about one event per read "
        "(tokens/s here is the server's pace; read the CPU column)",
    }
    for framing in framings:
        ctx = mp.get_context("fork")
        queue: Any = ctx.Queue()
        server = ctx.Process(
            target=serve,
            args=(
                queue,
                server_core,
                args.tokens,
                framing != "burst",
                0.001 if framing == "paced" else 0.0,
            ),
            daemon=True,
        )
        server.start()
        try:
            table(queue.get(timeout=10), args, titles[framing], paced=framing == "paced")
        finally:
            server.kill()
            server.join()


if __name__ == "__main__":
    main()
