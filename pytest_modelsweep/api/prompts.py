"""Your own throughput shape: prompts from a file, and the ``measure_throughput`` fixture's type.

Public API (docs/writing-benchmarks.md): :func:`load_prompts` reads a prompt file;
:class:`MeasureThroughput` is the type of the ``measure_throughput`` fixture, which measures
them as the built-in throughput benches do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import DataError
from ..core.text_files import read_jsonl, read_utf8_text


def load_prompts(path: str | Path) -> list[str]:
    """The prompts of a file: ``.jsonl`` (one ``{"prompt": ...}`` a line) or plain text (one
    a line; blank and ``#`` lines skipped); a one-line :class:`DataError` otherwise."""
    where, fix = Path(path), "pass the path of a .txt or .jsonl file of prompts"
    if not where.exists():
        raise DataError(f"prompt file {where} not found; {fix}")
    if where.suffix != ".jsonl":
        lines = read_utf8_text(where, "prompt", fix).splitlines()
        prompts = [
            line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")
        ]
    else:
        prompts = []
        for number, line, record in read_jsonl(
            where,
            "prompt",
            fix,
            'a .jsonl prompt file has one {"prompt": "..."} object a line',
            "not JSON",
        ):
            prompt = record.get("prompt") if isinstance(record, dict) else None
            if not isinstance(prompt, str) or not prompt.strip():
                raise DataError(
                    f'{where}:{number}: expected a non-empty "prompt" string, '
                    f"got {line.strip()[:80]!r}"
                )
            prompts.append(prompt)
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
            raise DataError(
                f"{benchmark}: prompt {index} must be a non-empty string, got {prompt!r}"[:200]
            )
    return listed


def prompts_digest(prompts: Sequence[str]) -> str:
    """A stable short hash of a list of prompts (sha256 over each one's length and UTF-8
    bytes, 16 hex digits): a throughput measurement's ``prompts_hash``."""
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
        """Send ``prompts`` with exactly ``concurrency`` in flight, ``output_tokens`` each, over
        ``--repeats`` windows; record the mean output tokens/s. With ``rate`` (requests/s) the
        windows are open loops (at most ``concurrency`` in flight)."""


__all__ = ["MeasureThroughput", "checked_prompts", "load_prompts"]
