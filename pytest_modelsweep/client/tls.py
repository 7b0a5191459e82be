"""The one TLS context every httpx call of the process verifies servers with.

httpx builds a new context per client, reading certifi's CA bundle each time (~30 ms of CPU,
several times a window); built once, as httpx would, it is shared by every client.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verifying context, made on first use and then shared."""
    return httpx.create_ssl_context()
