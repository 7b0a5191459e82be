"""The server's own counters, read from its Prometheus ``/metrics`` text.

A throughput run reads them around its timed window, to check the client's count (llama.cpp's
``prompt`` counts only the prompt tokens it computed, not cached ones). Names match with and
without ``_total``; samples of one name are summed over their labels.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Literal

import httpx

from ..core.errors import EndpointError
from ..core.secrets import Credentials, auth_headers
from .tls import get_within

CounterKind = Literal["generated", "prompt", "cached"]

_NAMES: dict[CounterKind, dict[str, tuple[str, ...]]] = {
    "generated": {
        "llamacpp": ("llamacpp:tokens_predicted_total",),
        "vllm": ("vllm:generation_tokens_total",),
    },
    "prompt": {
        "llamacpp": ("llamacpp:prompt_tokens_total",),
        "vllm": ("vllm:prompt_tokens_total",),
    },
    "cached": {
        "llamacpp": ("llamacpp:prompt_tokens_cached_total",),
        "vllm": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    },
}


_SAMPLE = re.compile(r"([^ {]*)(?:\{.*\}(?=[^}]*$)|(?= ))\s*(\S+)")
"""A sample line: its name (up to a ``{`` or space), label set (up to the last ``}``) and
value (a timestamp after it left out)."""


def parse_prometheus(text: str, only: tuple[str, ...] | None = None) -> dict[str, float]:
    """Each metric name's value, summed over its label sets; ``only``: just the lines that
    start with one of these names (the rest skipped unparsed)."""
    values: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or (only is not None and not line.startswith(only)):
            continue
        sample = _SAMPLE.match(line)
        if sample is None:
            continue
        try:
            value = float(sample[2])
        except ValueError:
            continue
        if not math.isnan(value):
            values[sample[1]] = values.get(sample[1], 0.0) + value
    return values


def names_for(table: Mapping[str, tuple[str, ...]], server_kind: str) -> tuple[str, ...]:
    """The names a server of ``server_kind`` uses in ``table`` (server kind → names); an
    ``openai`` endpoint (attached, of unknown make) tries every known name."""
    return (
        table[server_kind]
        if server_kind in table
        else tuple(name for names in table.values() for name in names)
    )


def counter_names(endpoint_kind: str, which: CounterKind) -> tuple[str, ...]:
    """The metric names that may hold ``which`` on a server of ``endpoint_kind``."""
    return names_for(_NAMES[which], endpoint_kind)


def lookup(names: tuple[str, ...], metrics: Mapping[str, float]) -> tuple[str, float] | None:
    """``(name, value)`` of the first of ``names`` the metrics hold, each also tried without
    the ``_total`` suffix; None when none is there."""
    tried = (candidate for name in names for candidate in (name, name.removesuffix("_total")))
    return next(((found, metrics[found]) for found in tried if found in metrics), None)


def find_counter(
    endpoint_kind: str, which: CounterKind, metrics: dict[str, float]
) -> tuple[str, float]:
    """``(name, value)`` of the counter; EndpointError if the server has none of its names."""
    names = counter_names(endpoint_kind, which)
    found = lookup(names, metrics)
    if found is not None:
        return found
    raise EndpointError(
        f"the {endpoint_kind} server's /metrics has no {which}-tokens counter "
        f"({' or '.join(names)}); attach a llama.cpp server started with --metrics or a "
        "vLLM server"
    )


METRICS_TIMEOUT_S = 10.0
"""The most one read of the server's counters may take, connect to last byte."""


def fetch_metrics(
    base_url: str, *, timeout_s: float = METRICS_TIMEOUT_S, credentials: Credentials | None = None
) -> dict[str, float]:
    """GET ``base_url/metrics`` (all of it within ``timeout_s``) and parse it; EndpointError
    names the URL and the fix."""
    url = base_url.rstrip("/") + "/metrics"
    try:
        response = get_within(url, timeout_s, auth_headers(credentials))
    except httpx.HTTPError as exc:
        raise EndpointError(
            f"cannot read the server's counters from {url}: "
            f"{type(exc).__name__}: {exc}; is the server still running?"
        ) from None
    fix = "llama-server needs --metrics to serve its counters (vLLM serves /metrics by default)"
    if response.status_code != 200:
        raise EndpointError(
            f"{url} answered HTTP {response.status_code} "
            f"({' '.join(response.text.split())[:120]}); {fix}"
        )
    metrics = parse_prometheus(response.text)
    if not metrics:
        raise EndpointError(f"{url} returned no Prometheus samples; {fix}")
    return metrics


# Counters that move while a server works on anything: decode steps (prefill batches
# included) and tokens computed. Their sum standing still means it computes nothing.
WORK_COUNTERS = (
    "llamacpp:n_decode_total",
    "llamacpp:tokens_predicted_total",
    "llamacpp:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prompt_tokens_total",
)


def work_done(metrics: dict[str, float]) -> float | None:
    """The sum of the work counters the server exposes, or None when it exposes none."""
    found = [
        value
        for name in WORK_COUNTERS
        for value in [metrics.get(name, metrics.get(name.removesuffix("_total")))]
        if value is not None
    ]
    return sum(found) if found else None
