"""Cold start: how long a model takes from launch to ready, and to its first served token.

Each launch is a fresh server process (:func:`~.pool.launch_endpoint`), timed from its
spawn, and says what was already warm (docs/open-loop.md). An attached endpoint has no
launch to time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..client import Guard, run_stream_requests
from ..core.errors import MeasurementError
from ..core.measurements import CacheState, ColdStart, StartupStats
from ..core.records import ApiRequest
from ..core.sweep import Sweep
from .endpoint import Endpoint
from .pool import launch_endpoint
from .provision import Progress, ensure_embedded_model

FIRST_PROMPT = "The quick brown fox jumps over the lazy dog. Once upon a time"
FIRST_MAX_TOKENS = 8
WARM_SHARE = 0.5
"""A model file with at least this share of its pages resident is read from memory."""


def cold_start_refusal(name: str, attach: dict[str, str] | None) -> str | None:
    """One line when model ``name`` cannot be cold-started (it is attached); else None."""
    return (
        (
            f"cold start needs a server this run launches: {name} is attached "
            "(--endpoint), so its start is not ours to time"
        )
        if attach and name in attach
        else None
    )


# --------------------------------------------------------------------------- cache state


def resident_share(path: Path) -> float | None:
    """The share of ``path``'s pages in the page cache (``mincore`` on a copy-on-write mapping,
    which touches no page); None where it cannot be read (not Linux, no libc, an empty file)."""
    libc = ctypes.util.find_library("c")
    try:
        size = path.stat().st_size
        if libc is None or size == 0:
            return None
        pages = -(-size // mmap.PAGESIZE)
        vector = (ctypes.c_ubyte * pages)()
        with (
            open(path, "rb") as handle,
            mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_COPY) as mapped,
        ):
            # the buffer's export ends with the expression, so the mapping can be closed
            address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
            if ctypes.CDLL(libc).mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vector):
                return None
    except OSError:
        return None
    return sum(byte & 1 for byte in bytes(vector)) / pages


def evict_page_cache(path: Path) -> None:
    """Ask the kernel to drop ``path``'s clean pages from the page cache (no root needed)."""
    with open(path, "rb") as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def page_cache_state(path: Path, *, evict: bool = False) -> CacheState:
    """The model file's page-cache state just before a launch (after eviction if asked)."""
    evicted = evict and hasattr(os, "posix_fadvise")
    if evicted:
        evict_page_cache(path)
    share = resident_share(path)
    size = f"{path.stat().st_size / 2**20:.0f} MiB"
    if share is None:
        return CacheState(
            "page-cache",
            None,
            f"page cache of {path.name} ({size}): unknown (mincore unavailable)",
            None,
            evicted,
        )
    warm = share >= WARM_SHARE
    why = "warm: read from memory" if warm else "cold: read from disk"
    if warm and evicted:
        why += " (still mapped by another process?)"
    return CacheState(
        "page-cache",
        warm,
        f"page cache of {path.name} ({size}): {'after eviction, ' if evicted else ''}"
        f"{share:.0%} resident before launch, {why}",
        share,
        evicted,
    )


def vllm_cache_dirs(environ: dict[str, str] | None = None) -> dict[str, Path]:
    """Where vLLM keeps its compile caches, as vLLM's ``envs`` finds them."""
    env = os.environ if environ is None else environ
    base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return {
        "torch.compile": Path(os.path.expanduser(env.get("VLLM_CACHE_ROOT") or str(base / "vllm")))
        / "torch_compile_cache",
        "XLA": Path(
            os.path.expanduser(env.get("VLLM_XLA_CACHE_PATH") or str(base / "vllm" / "xla_cache"))
        ),
    }


def compile_cache_state(backend: str, environ: dict[str, str] | None = None) -> CacheState:
    """vLLM's compile caches before a launch: warm when any holds an entry."""
    if backend == "vllm-docker":
        return CacheState(
            "compile-cache",
            False,
            "compile caches live inside the container, which keeps none between launches: cold",
        )
    counted = [
        (label, folder, sum(1 for _ in folder.iterdir()) if folder.is_dir() else 0)
        for label, folder in vllm_cache_dirs(environ).items()
    ]
    warm = any(entries > 0 for _, _, entries in counted)
    parts = [
        f"{label} cache {folder}: {entries} entries"
        if entries
        else f"{label} cache {folder}: absent or empty"
        for label, folder, entries in counted
    ]
    return CacheState("compile-cache", warm, "; ".join(parts) + (" (warm)" if warm else " (cold)"))


def cache_state(sweep: Sweep, name: str, progress: Progress, *, evict: bool) -> CacheState:
    """The state that decides how cold the next launch of ``name`` is: for llama-server, the
    page cache of the GGUF file it maps."""
    backend = sweep.backend_of(name)
    if backend == "llamacpp":
        source = sweep.model(name).source
        path = (
            ensure_embedded_model(source.id, progress).path
            if source.kind == "embedded"
            else Path(source.id)
            if source.kind == "path"
            else None
        )
        return (
            page_cache_state(path, evict=evict)
            if path is not None and path.is_file()
            else CacheState("page-cache", None, f"no model file to inspect for {name}")
        )
    return compile_cache_state(backend)


# --------------------------------------------------------------------------- launches


@dataclass(frozen=True)
class ColdStarts:
    """A model's launches and the endpoint its first launch served (for provenance)."""

    stats: StartupStats
    endpoint: Endpoint | None


FIRST_REQUEST = ApiRequest(
    item_id="cold-start",
    path="/v1/completions",
    payload={
        "prompt": FIRST_PROMPT,
        "max_tokens": FIRST_MAX_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
    },
)
"""The first request of a fresh server: a short streamed completion."""


def measure_cold_starts(
    sweep: Sweep,
    name: str,
    *,
    launches: int,
    log_dir: Path,
    progress: Progress,
    worker_id: str = "main",
    evict_page_cache: bool = False,
    timeout_s: float = 300.0,
) -> ColdStarts:
    """Launch ``name``'s server ``launches`` times, each stopped before the next, and time
    each one's start."""
    if launches < 1:
        raise ValueError(f"launches must be at least 1, got {launches}")
    measured: list[ColdStart] = []
    first_endpoint: Endpoint | None = None
    for launch in range(1, launches + 1):
        cache = cache_state(sweep, name, progress, evict=evict_page_cache)
        endpoint, process = launch_endpoint(
            sweep, name, log_dir / f"cold-start-{launch}", progress, worker_id=worker_id
        )
        first_endpoint = first_endpoint or endpoint
        try:
            (record,) = run_stream_requests(
                endpoint.v1,
                endpoint.served_name,
                [FIRST_REQUEST],
                1,
                timeout_s=timeout_s,
                guard=Guard(idle_timeout_s=timeout_s, credentials=endpoint.credentials),
            )
        finally:
            process.stop()
        assert process.launched_at is not None and process.ready_at is not None
        assert process.ready_within_s is not None
        error = record.error
        if error is None and record.first_token is None:
            error = "the first request produced no token"
        measured.append(
            ColdStart(
                launch=launch,
                ready_s=process.ready_at - process.launched_at,
                ready_within_s=process.ready_within_s,
                first_token_s=None if error else (record.first_token or 0.0) - process.launched_at,
                first_request_ttft_s=None if error else record.ttft,
                cache=cache,
                error=error,
            )
        )
        # e.g. cold start smollm2-135m: launch 2/3, ready 0.61 s, first token 0.68 s; …
        progress(
            f"cold start {name}: launch {launch}/{launches}, ready {measured[-1].ready_s:.2f} s, "
            f"first token {'failed' if error else f'{measured[-1].first_token_s:.2f} s'}; "
            f"{cache.detail}"
        )
        time.sleep(0.2)  # let the port and the process table settle
    return ColdStarts(StartupStats(sweep.backend_of(name), tuple(measured)), first_endpoint)


def measure_startup(
    sweep: Sweep,
    name: str,
    *,
    launches: int,
    log_dir: Path,
    progress: Progress,
    record_measurement: Callable[..., Any],
    worker_id: str = "main",
) -> StartupStats:
    """Cold-start ``name`` ``launches`` times (pages evicted first), record one ``startup``
    measurement (the geometric mean of launch → first token, s), then raise
    :class:`MeasurementError` when a first request failed."""
    measured = measure_cold_starts(
        sweep,
        name,
        launches=launches,
        log_dir=log_dir,
        progress=progress,
        worker_id=worker_id,
        evict_page_cache=True,
    )
    stats = measured.stats
    record_measurement(
        "startup",
        float("nan") if stats.first_token_s is None else stats.first_token_s,
        "s",
        len(stats.launches),
        params={"launches": launches, "backend": stats.backend, "cache": stats.cache},
        stats=stats,
        endpoint=measured.endpoint,
    )
    if stats.errors:
        raise MeasurementError(f"cold start of {name}: " + "; ".join(stats.errors[:3]))
    return stats
