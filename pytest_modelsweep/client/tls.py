"""The one TLS context every httpx call of the process verifies servers with.

httpx builds a new context per client, reading certifi's CA bundle each time: about 30 ms
of CPU, paid four times a throughput window by the counter reads alone (``/metrics`` before
and after, each read twice), which a loaded 2-core machine turned into seconds per capacity
search. Built once (as httpx would: ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured), it is
shared by every client.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verifying context, made on first use and then shared."""
    return httpx.create_ssl_context()
