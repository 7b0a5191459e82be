"""Scoring rules, exactly as lm-evaluation-harness (GSM8K) and BFCL (simple) apply them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def usage_counts(response: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """``usage.prompt_tokens`` and ``usage.completion_tokens`` of a response, if they are ints."""
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None, None

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return count("prompt_tokens"), count("completion_tokens")
