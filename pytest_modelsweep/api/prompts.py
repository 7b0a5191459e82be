"""Your own throughput shape: prompts from a file, and the ``measure_throughput`` fixture's type.

The public, typed API for a throughput benchmark over your prompts
(docs/writing-benchmarks.md, "Throughput benchmarks"): :func:`load_prompts` reads
a prompt file, and :class:`MeasureThroughput` is the type of the
``measure_throughput`` fixture, which measures one concurrency of them as the
built-in throughput benches do (repeats, exactness checks against the server's
counters, contention, cost and goodput). Pure: no pytest, no HTTP.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import DataError
from ..core.text_files import read_utf8_text


def load_prompts(path: str | Path) -> list[str]:
    """The prompts of a file: ``.jsonl`` (one object a line with a ``"prompt"`` string) or
    plain text (one prompt a line; blank lines and lines starting with ``#`` are skipped).

    Raises :class:`DataError` with one line naming the file and what to fix.
    """
    where = Path(path)
    if not where.exists():
        raise DataError(f"prompt file {where} not found; pass the path of a .txt or .jsonl "
                        "file of prompts")
    text = read_utf8_text(where, "prompt", "pass the path of a .txt or .jsonl file of prompts")
    prompts: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or (where.suffix != ".jsonl" and line.lstrip().startswith("#")):
            continue
        if where.suffix == ".jsonl":
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}:{number}: not JSON ({exc.msg}); a .jsonl prompt "
                                'file has one {"prompt": "..."} object a line') from None
            prompt = record.get("prompt") if isinstance(record, dict) else None
            if not isinstance(prompt, str) or not prompt.strip():
                raise DataError(f"{where}:{number}: expected a non-empty \"prompt\" string, "
                                f"got {line.strip()[:80]!r}")
            prompts.append(prompt)
        else:
            prompts.append(line.strip())
    if not prompts:
        raise DataError(f"prompt file {where} has no prompts; write one prompt a line")
    return prompts


def checked_prompts(benchmark: str, prompts: Sequence[str]) -> list[str]:
    """``prompts`` as a list of non-empty strings, or a one-line :class:`DataError`."""
    if isinstance(prompts, str | bytes):
        raise DataError(f"{benchmark}: prompts must be a list of strings, not one string")
    listed = list(prompts)
    if not listed:
        raise DataError(f"{benchmark}: no prompts to send")
    for index, prompt in enumerate(listed):
        if not isinstance(prompt, str) or not prompt.strip():
            raise DataError(f"{benchmark}: prompt {index} must be a non-empty string, "
                            f"got {prompt!r}"[:200])
    return listed


def prompts_digest(prompts: Sequence[str]) -> str:
    """A stable short hash of a list of prompts (sha256 of each prompt's UTF-8 bytes with its
    length, in order, 16 hex digits as an item's ``prompt_hash``): which prompts a throughput
    measurement sent, recorded as its ``prompts_hash``."""
    digest = hashlib.sha256()
    for prompt in prompts:
        encoded = prompt.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return digest.hexdigest()[:16]


class MeasureThroughput(Protocol):
    """The ``measure_throughput`` fixture's type: measure your prompts on this test's model."""

    def __call__(
        self,
        benchmark: str,
        prompts: Sequence[str],
        *,
        concurrency: int,
        output_tokens: int = 256,
        unique_prefixes: bool = True,
        params: Mapping[str, Any] | None = None,
        rate: float | None = None,
        burstiness: float = 1.0,
    ) -> None:
        """Send ``prompts`` (in turn) with exactly ``concurrency`` in flight, each generating
        exactly ``output_tokens`` tokens, over ``--repeats`` timed windows; record the mean
        output tokens/s; fail in one line when a window broke its rules. With ``rate``
        (requests/s) the windows are open loops instead, as ``vllm bench serve
        --request-rate RATE --burstiness B --max-concurrency N`` sends them: each request at
        its scheduled time, at most ``concurrency`` in flight, latency from that time."""
        ...


__all__ = ["MeasureThroughput", "checked_prompts", "load_prompts"]
