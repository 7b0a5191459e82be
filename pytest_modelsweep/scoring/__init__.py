"""Scoring rules, exactly as lm-evaluation-harness (GSM8K) and BFCL (simple) apply them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..records import ApiRequest, ItemRecord


def usage_counts(response: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """``usage.prompt_tokens`` and ``usage.completion_tokens`` of a response, if they are ints."""
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None, None

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return count("prompt_tokens"), count("completion_tokens")


def response_from_record(request: ApiRequest, record: ItemRecord) -> dict[str, Any]:
    """The OpenAI response a stored item was scored from, rebuilt from the record.

    A record keeps what the scorers read: the generated text (for a ``tools`` request
    with tool calls, their JSON), the finish reason and the token counts. Scoring the
    rebuilt response again gives the current scorer's verdict on a stored answer, as
    lm-eval re-scores cached generations. (For ``tools``, an answer whose
    ``tool_calls`` list was empty but had text comes back as text alone: both are wrong.)
    """
    choice: dict[str, Any] = {"index": 0, "finish_reason": record.finish_reason}
    if request.path == "/v1/completions":
        choice["text"] = record.response
    else:
        message: dict[str, Any] = {"role": "assistant", "content": record.response}
        calls = _stored_tool_calls(record.response) if "tools" in request.payload else None
        if calls is not None:
            message = {"role": "assistant", "content": None, "tool_calls": calls}
        choice["message"] = message
    usage = {"prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens}
    return {"choices": [choice], "usage": {k: v for k, v in usage.items() if v is not None}}


def _stored_tool_calls(text: str) -> list[Any] | None:
    if not text.startswith("["):
        return None
    try:
        calls = json.loads(text)
    except json.JSONDecodeError:
        return None
    is_calls = isinstance(calls, list) and bool(calls) and all(
        isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls
    )
    return calls if is_calls else None
