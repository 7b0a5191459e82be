"""What the server saw during a timed window: its Prometheus metrics, sampled, and a summary.

A :class:`MetricsSampler` scrapes ``/metrics`` as the window starts, every ``interval_s`` and
as it ends, on one keep-alive ``http.client`` connection (~0.25 ms a GET, httpx ~0.8 ms). A
quantity the server does not expose is *absent* (with the names looked for), never zero.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Literal
from urllib.parse import urlsplit

from ..client.counters import counter_names, lookup, names_for, parse_prometheus
from ..core.measurements import (
    GaugeSummary,
    MetricsSample,
    SamplerCost,
    ServerMetricsSummary,
    ServerMetricsWindow,
)
from ..core.secrets import Credentials, auth_headers

DEFAULT_INTERVAL_S = 0.333
"""Seconds between two scrapes during a window."""

Quantity = Literal[
    "running",
    "waiting",
    "kv_cache_usage",
    "preemptions",
    "prefix_cache_hits",
    "prefix_cache_queries",
    "generated_tokens",
]

_NAMES: dict[Quantity, dict[str, tuple[str, ...]]] = {
    "running": {
        "vllm": ("vllm:num_requests_running",),
        "llamacpp": ("llamacpp:requests_processing",),
    },
    "waiting": {
        "vllm": ("vllm:num_requests_waiting",),
        "llamacpp": ("llamacpp:requests_deferred",),
    },
    "kv_cache_usage": {
        "vllm": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "llamacpp": ("llamacpp:kv_cache_usage_ratio",),
    },
    "preemptions": {"vllm": ("vllm:num_preemptions_total",), "llamacpp": ()},
    "prefix_cache_hits": {
        "vllm": counter_names("vllm", "cached"),
        "llamacpp": counter_names("llamacpp", "cached"),
    },
    "prefix_cache_queries": {
        "vllm": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "llamacpp": counter_names("llamacpp", "prompt"),
    },
    "generated_tokens": {
        "vllm": counter_names("vllm", "generated"),
        "llamacpp": counter_names("llamacpp", "generated"),
    },
}
GAUGES: tuple[Quantity, ...] = ("running", "waiting", "kv_cache_usage")


def quantity_names(server_kind: str, quantity: Quantity) -> tuple[str, ...]:
    """The metric names that may hold ``quantity`` on a server of ``server_kind``."""
    return names_for(_NAMES[quantity], server_kind)


def sampled_names(server_kind: str) -> tuple[str, ...]:
    """Every name the sampler reads (``_total`` dropped, so that both spellings match)."""
    return tuple(
        sorted(
            {
                name.removesuffix("_total")
                for quantity in _NAMES
                for name in quantity_names(server_kind, quantity)
            }
        )
    )


def _value(
    server_kind: str, quantity: Quantity, values: Mapping[str, float]
) -> tuple[str, float] | None:
    """``(name, value)`` of a quantity in one sample; llama.cpp's lookups are derived
    (cached + computed prompt tokens)."""
    if quantity != "prefix_cache_queries":
        return lookup(quantity_names(server_kind, quantity), values)
    table = _NAMES["prefix_cache_queries"]
    if server_kind != "llamacpp":
        direct = lookup(table["vllm"], values)
        if direct is not None or server_kind == "vllm":
            return direct
    hits = lookup(_NAMES["prefix_cache_hits"]["llamacpp"], values)
    computed = lookup(table["llamacpp"], values)
    return (
        None
        if hits is None or computed is None
        else (f"{hits[0]} + {computed[0]}", hits[1] + computed[1])
    )


def summarize_samples(server_kind: str, samples: Sequence[MetricsSample]) -> ServerMetricsSummary:
    """The window's summary: gauges' mean and max, counters' deltas (last − first sample);
    a sample's NaN or infinity is left out with a note (``ignored``; ``absent`` when no sample
    had a figure)."""
    gauges: dict[Quantity, GaugeSummary] = {}
    deltas: dict[Quantity, float] = {}
    absent: dict[str, str] = {}
    sources: dict[str, str] = {}
    ignored: dict[str, str] = {}
    for quantity in _NAMES:
        read = [v for s in samples if (v := _value(server_kind, quantity, s.values)) is not None]
        found = [(name, value) for name, value in read if math.isfinite(value)]
        if len(found) < len(read):  # never a figure: a NaN or infinity the server exposed
            bad = sorted({repr(value) for _, value in read if not math.isfinite(value)})
            ignored[quantity] = (
                f"{read[0][0]} was {' or '.join(bad)} in "
                f"{len(read) - len(found)} of {len(read)} samples: ignored"
            )
        if not found:
            names = quantity_names(server_kind, quantity)
            absent[quantity] = (
                ignored[quantity]
                if read
                else " or ".join(names) + " not exposed"
                if names
                else f"a {server_kind} server has no such metric"
            )
            continue
        sources[quantity] = found[0][0]
        values = [value for _, value in found]
        if quantity in GAUGES:
            gauges[quantity] = GaugeSummary(sum(values) / len(values), max(values), len(values))
        else:
            deltas[quantity] = values[-1] - values[0]
    in_flight = [s.client_in_flight for s in samples if s.client_in_flight is not None]
    return ServerMetricsSummary(
        samples=len(samples),
        running=gauges.get("running"),
        waiting=gauges.get("waiting"),
        kv_cache_usage=gauges.get("kv_cache_usage"),
        preemptions=deltas.get("preemptions"),
        prefix_cache_hits=deltas.get("prefix_cache_hits"),
        prefix_cache_queries=deltas.get("prefix_cache_queries"),
        absent=absent,
        sources=sources,
        peak_client_in_flight=max(in_flight) if in_flight else None,
        ignored=ignored or None,
    )


class _MetricsConnection:
    """GET ``/metrics`` on one keep-alive connection, each answer whole within ``timeout_s``
    (a socket timeout bounds each read only: a server trickling bytes is cut off at the
    deadline); a one-line error names the URL."""

    def __init__(self, base_url: str, credentials: Credentials | None, timeout_s: float) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.url = base_url.rstrip("/") + "/metrics"
        self.path = (parts.path or "") + "/metrics"
        self.headers = auth_headers(credentials, {"User-Agent": "pytest-modelsweep"})
        self.timeout_s = timeout_s
        # closed, it opens a new socket on its next request
        self._conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=timeout_s, context=ssl.create_default_context()
            )
            if parts.scheme == "https"
            else http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
        )
        self._late = False

    def _cut(self, conn: http.client.HTTPConnection) -> None:
        """The deadline passed: shut the socket down, so that a blocked read returns now."""
        self._late = True
        if conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def get(self) -> tuple[int, str]:
        """``(status, body)``; one retry on a fresh connection when a kept one was closed."""
        for attempt in range(2):
            self._late = False
            deadline = threading.Timer(self.timeout_s, self._cut, (self._conn,))
            deadline.start()
            try:
                self._conn.request("GET", self.path, headers=self.headers)
                response = self._conn.getresponse()
                body = response.read().decode("utf-8", "replace")
                if self._late:  # a body without a length ends at the cut as if whole
                    raise http.client.IncompleteRead(b"")
                if response.will_close:
                    self.close()
                return response.status, body
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if self._late:
                    raise MetricsUnavailable(
                        f"{self.url} sent no whole answer within {self.timeout_s:g} s"
                    ) from None
                if attempt == 1 or not isinstance(
                    exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
                ):
                    raise MetricsUnavailable(
                        f"cannot read the server's metrics from {self.url}: "
                        f"{type(exc).__name__}: {exc}"
                    ) from None
            finally:
                deadline.cancel()
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._conn.close()


class MetricsUnavailable(Exception):
    """One scrape failed; ``str()`` is the line kept with the window."""


class MetricsSampler:
    """Scrapes the server's ``/metrics`` around and during a window (a context manager);
    each sample records ``in_flight()``. A server without ``/metrics`` leaves the window
    ``unavailable`` (one line) rather than failing the measurement."""

    MAX_ERRORS_KEPT = 3

    def __init__(
        self,
        base_url: str,
        server_kind: str,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        credentials: Credentials | None = None,
        in_flight: Callable[[], int] | None = None,
        timeout_s: float = 2.0,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"the sampling interval must be > 0 s, got {interval_s!r}")
        self.server_kind = server_kind
        self.interval_s = interval_s
        self.in_flight = in_flight
        self._only = sampled_names(server_kind)
        self._samples: list[MetricsSample] = []
        self._errors: list[str] = []
        self._failed = 0
        self._cpu_s = 0.0
        self._began = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn = _MetricsConnection(base_url, credentials, timeout_s)
        self._unavailable: str | None = None
        self.window: ServerMetricsWindow | None = None

    def _scrape(self) -> None:
        """One scrape, its CPU time (the request, the parse) added to the sampler's cost."""
        cpu = time.thread_time()
        try:
            status, body = self._conn.get()
            if status != 200:
                raise MetricsUnavailable(
                    f"{self._conn.url} answered HTTP {status} ({' '.join(body.split())[:120]}); "
                    "llama-server needs --metrics to serve them (vLLM serves /metrics by "
                    "default)"
                )
        except MetricsUnavailable as error:
            self._failed += 1
            if len(self._errors) < self.MAX_ERRORS_KEPT:
                self._errors.append(str(error))
        else:
            values = parse_prometheus(body, self._only)
            in_flight = self.in_flight() if self.in_flight is not None else None
            self._samples.append(MetricsSample(time.perf_counter(), values, in_flight))
        finally:
            self._cpu_s += time.thread_time() - cpu

    def _run(self) -> None:
        due = time.perf_counter() + self.interval_s
        while not self._stop.wait(max(0.0, due - time.perf_counter())):
            self._scrape()
            due += self.interval_s
            now = time.perf_counter()
            if due < now:  # a slow scrape: skip the missed slots, keep the grid
                due += self.interval_s * (1 + int((now - due) / self.interval_s))

    def __enter__(self) -> MetricsSampler:
        """Scrape once, then every ``interval_s`` on a thread of its own (none when that first
        scrape failed: the window is ``unavailable``)."""
        self._began = time.perf_counter()
        self._scrape()
        if not self._samples:
            self._unavailable = (
                f"no server metrics: {self._errors[0]}" if self._errors else "no server metrics"
            )
            return self
        self._thread = threading.Thread(target=self._run, name="server-metrics", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the thread, scrape a last time and keep the window in :attr:`window`."""
        if self.window is not None:
            return
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._scrape()
        self._conn.close()
        wall = time.perf_counter() - self._began
        samples = tuple(self._samples)
        self.window = ServerMetricsWindow(
            server_kind=self.server_kind,
            interval_s=self.interval_s,
            samples=samples,
            summary=summarize_samples(self.server_kind, samples),
            cost=SamplerCost(self._cpu_s, wall, len(samples) + self._failed, self._failed),
            unavailable=self._unavailable,
            errors=tuple(self._errors),
        )


__all__ = [
    "DEFAULT_INTERVAL_S",
    "MetricsSampler",
    "ServerMetricsWindow",
    "quantity_names",
    "sampled_names",
    "summarize_samples",
]
