"""Plain JSON POSTs with httpx (accuracy workloads), N in flight; each answer read once by
:func:`parse_completion` into a :class:`~pytest_modelsweep.core.records.Completion`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import httpx

from ..core.jsontext import int_or_none
from ..core.records import ApiPath, ApiRequest, Completion, ToolCall, text_field, tool_call_of
from ..core.secrets import auth_headers
from .http import one_line, other_model, perf, request_body
from .stream import run_workers, synchronous
from .tls import tls_context
from .watch import Guard, Pending, wants_key, with_watch


def parse_completion(path: ApiPath, data: Any) -> Completion:
    """Read a non-streamed OpenAI response body (parsed JSON) for ``path`` into a Completion:
    the one place the wire format is read. A malformed body gives ``error`` (kind
    ``response``) with whatever could be read; a tool call's odd fields are None."""
    if not isinstance(data, dict):
        return Completion.failed(
            f"response is {type(data).__name__}, not a JSON object", "response"
        )
    usage = data.get("usage")
    counts = usage if isinstance(usage, dict) else {}
    read = Completion(
        prompt_tokens=int_or_none(counts.get("prompt_tokens")),
        completion_tokens=int_or_none(counts.get("completion_tokens")),
    )
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        return replace(read, error="response has no choices", error_kind="response")
    choice = choices[0]
    if not isinstance(choice, dict):
        return replace(read, error="choices[0] is not an object", error_kind="response")
    finish = choice.get("finish_reason")
    read = replace(read, finish_reason=finish if isinstance(finish, str) else None)
    tool_calls: list[ToolCall] | None = None
    if path == "/v1/completions":
        text = choice.get("text")
    else:
        message = choice.get("message")
        if not isinstance(message, dict):
            return replace(read, error="choices[0].message is not an object", error_kind="response")
        text = message.get("content")
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            tool_calls = [tool_call_of(call) for call in calls]
    if not isinstance(text, str) and (text is not None or path == "/v1/completions"):
        return replace(
            read,
            error=f"{text_field(path)} is {type(text).__name__}, not a string",
            error_kind="response",
        )
    return replace(read, text=text, tool_calls=tool_calls)


async def post_requests(
    base_url_v1: str,
    served_name: str,
    requests: Sequence[ApiRequest],
    concurrency: int,
    *,
    timeout_s: float,
    on_result: Callable[[ApiRequest, Completion], None] | None = None,
    guard: Guard | None = None,
) -> list[Completion]:
    """Non-streaming JSON POSTs with ``concurrency`` in flight, completions in input order.

    A failed request is a Completion with ``error`` of kind ``request``.
    ``guard.idle_timeout_s`` is httpx's read timeout, except where the breaker reads work
    counters (then its watch decides a stall); ``timeout_s`` bounds all."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    root = base_url_v1.rstrip("/")
    results: list[Completion | None] = [None] * len(requests)
    queue = iter(enumerate(requests))
    guard = guard or Guard()
    watch = guard.watch()
    idle = min(guard.idle_timeout_s, timeout_s)
    # a server with work counters shows a stall without a byte: the watch decides it
    if (
        guard.breaker is not None
        and idle < timeout_s
        and requests
        and await asyncio.to_thread(guard.breaker.work_done) is not None
    ):
        idle = timeout_s
    headers = auth_headers(guard.credentials, {"Content-Type": "application/json"})
    loop = asyncio.get_running_loop()

    async with httpx.AsyncClient(
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        timeout=httpx.Timeout(timeout_s, read=idle),
        verify=tls_context(),
    ) as client:

        async def send(request: ApiRequest) -> Completion:
            pending = Pending(loop.create_future())
            watch.inflight[id(pending)] = pending
            post = asyncio.ensure_future(
                client.post(
                    root + request.path.removeprefix("/v1"),
                    content=request_body(served_name, request, stream=False),
                    headers=headers,
                )
            )
            waiters: set[asyncio.Future[Any]] = {post, pending.aborted}
            try:
                done, _ = await asyncio.wait(
                    waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                watch.inflight.pop(id(pending), None)
                if not post.done():
                    post.cancel()
                    await asyncio.gather(post, return_exceptions=True)
            if pending.aborted in done:
                return Completion.failed(pending.aborted.result())
            if post not in done:
                raise TimeoutError
            response: httpx.Response = post.result()
            wants = wants_key(response.status_code, guard.breaker, served_name)
            if wants is not None:
                return Completion.failed(wants)
            if response.status_code >= 400:
                return Completion.failed(
                    f"HTTP {response.status_code} from {request.path}: {one_line(response.text)}"
                )
            try:
                data = response.json()
            except ValueError:
                return Completion.failed(
                    f"non-JSON response from {request.path}: {one_line(response.text, 80)!r}"
                )
            completion = parse_completion(request.path, data)
            wrong = other_model(served_name, data.get("model")) if isinstance(data, dict) else None
            return (
                replace(completion, error=wrong, error_kind="response")
                if wrong is not None and completion.error is None
                else completion
            )

        async def one(request: ApiRequest) -> Completion:
            blocked = watch.blocked()
            if blocked is not None:
                return Completion.failed(blocked)
            start = perf()
            timed_out = False
            try:
                result = await send(request)
            except httpx.ReadTimeout:
                timed_out = True
                result = Completion.failed(f"no answer for {idle:g} s from {request.path}")
            except (TimeoutError, httpx.TimeoutException):
                timed_out = True
                result = Completion.failed(f"timed out after {timeout_s:g} s")
            except httpx.HTTPError as exc:
                timed_out = isinstance(exc, (httpx.ConnectError, httpx.RemoteProtocolError))
                result = Completion.failed(
                    f"request to {request.path} failed: {type(exc).__name__}: {exc}"
                )
            watch.settle(result.error, timed_out, perf() - start)
            return result

        async def worker() -> None:
            for index, request in queue:
                result = await one(request)
                results[index] = result
                if on_result is not None:
                    on_result(request, result)

        await with_watch(watch, lambda: run_workers(min(concurrency, len(requests)), worker))
    return [result for result in results if result is not None]


run_post_requests = synchronous(post_requests)
"""Synchronous :func:`post_requests`."""
