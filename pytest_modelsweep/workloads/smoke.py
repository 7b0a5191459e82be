"""The smoke benchmark: one real greedy generation, checked and timed."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from ..errors import MeasurementError
from ..records import ApiRequest
from ..serving.endpoint import Endpoint

SMOKE_QUESTION = "Name the three primary colours."


def smoke_request(endpoint: Endpoint, max_tokens: int = 32) -> ApiRequest:
    """A chat request for chat models, a completion for base models."""
    if endpoint.model.prompting == "chat":
        return ApiRequest(
            item_id="smoke",
            path="/v1/chat/completions",
            payload={
                "messages": [{"role": "user", "content": SMOKE_QUESTION}],
                "max_tokens": max_tokens,
                "temperature": 0,
            },
        )
    return ApiRequest(
        item_id="smoke",
        path="/v1/completions",
        payload={
            "prompt": f"Question: {SMOKE_QUESTION}\nAnswer:",
            "max_tokens": max_tokens,
            "temperature": 0,
        },
    )


@dataclass(frozen=True)
class SmokeResult:
    """What one generation returned and how long it took."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    latency_s: float
    response: dict[str, Any]

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.latency_s if self.latency_s > 0 else 0.0


def text_of(response: dict[str, Any]) -> str:
    """The generated text of a chat or completion response; ``MeasurementError`` if absent."""
    try:
        choice = response["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise MeasurementError(
            f"the response has no choices: {str(response)[:200]!r}"
        ) from None
    if "message" in choice:
        text = (choice.get("message") or {}).get("content")
    else:
        text = choice.get("text")
    if not isinstance(text, str):
        raise MeasurementError(f"the response's choice carries no text: {str(choice)[:200]!r}")
    return text


def run_smoke(endpoint: Endpoint, max_tokens: int = 32, timeout_s: float = 120.0) -> SmokeResult:
    """Send one request and return its text, usage and latency.

    Raises :class:`MeasurementError` when the server answers an error, no text,
    or no ``usage`` counts.
    """
    request = smoke_request(endpoint, max_tokens)
    body = {"model": endpoint.served_name, **request.payload}
    started = time.perf_counter()
    try:
        response = httpx.post(endpoint.v1 + request.path.removeprefix("/v1"), json=body,
                              timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise MeasurementError(f"{request.path} failed: {type(exc).__name__}: {exc}") from None
    latency = time.perf_counter() - started
    if response.status_code != 200:
        raise MeasurementError(
            f"HTTP {response.status_code} from {request.path}: {response.text[:200]!r}"
        )
    try:
        data = response.json()
    except ValueError:
        raise MeasurementError(f"{request.path} returned non-JSON: {response.text[:200]!r}") from None
    text = text_of(data)
    usage = data.get("usage") or {}
    prompt_tokens = usage.get("prompt_tokens")
    completion_tokens = usage.get("completion_tokens")
    if not isinstance(prompt_tokens, int) or not isinstance(completion_tokens, int):
        raise MeasurementError(f"{request.path} returned no usage counts: {str(usage)[:200]!r}")
    if completion_tokens <= 0 or not text.strip():
        raise MeasurementError(f"{request.path} generated nothing (usage {usage})")
    return SmokeResult(
        text=text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        finish_reason=data["choices"][0].get("finish_reason"),
        latency_s=latency,
        response=data,
    )
