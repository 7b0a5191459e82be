"""The process's httpx calls: one shared TLS context (httpx would read certifi's CA bundle per
client, ~30 ms of CPU), and a deadline on each whole exchange (httpx's ``timeout`` bounds each
read only, so a server trickling bytes never trips it).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Mapping
from typing import Any

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verifying context, made on first use and then shared."""
    return httpx.create_ssl_context()


class DeadlineClient:
    """An httpx client (keep-alive, on an event loop of its own) whose every exchange ends
    within ``deadline_s``, else raises ``httpx.ReadTimeout``; for code that runs no event
    loop in its thread."""

    def __init__(self, deadline_s: float, headers: Mapping[str, str] | None = None) -> None:
        self.deadline_s = deadline_s
        self._loop = asyncio.new_event_loop()
        self._client = httpx.AsyncClient(timeout=deadline_s, headers=headers, verify=tls_context())

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._loop.run_until_complete(
                asyncio.wait_for(self._client.request(method, url, **kwargs), self.deadline_s)
            )
        except TimeoutError:
            raise httpx.ReadTimeout(f"no whole answer within {self.deadline_s:g} s") from None

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._client.aclose())
            self._loop.close()

    def __enter__(self) -> DeadlineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def get_within(
    url: str, deadline_s: float, headers: Mapping[str, str] | None = None
) -> httpx.Response:
    """One GET whose whole exchange ends within ``deadline_s`` (:class:`DeadlineClient`)."""
    with DeadlineClient(deadline_s, headers) as client:
        return client.request("GET", url)
