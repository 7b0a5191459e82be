"""The smoke benchmark: one real greedy generation, checked and timed."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from ..client import parse_completion
from ..client.tls import DeadlineClient
from ..core.errors import MeasurementError
from ..core.records import ApiRequest
from ..core.secrets import auth_headers, wants_key_message
from ..serving.endpoint import Endpoint

SMOKE_QUESTION = "Name the three primary colours."


def smoke_request(endpoint: Endpoint, max_tokens: int = 32) -> ApiRequest:
    """A chat request for chat models, a completion for base models."""
    chat = endpoint.model.prompting == "chat"
    return ApiRequest(
        item_id="smoke",
        path="/v1/chat/completions" if chat else "/v1/completions",
        payload={
            **(
                {"messages": [{"role": "user", "content": SMOKE_QUESTION}]}
                if chat
                else {"prompt": f"Question: {SMOKE_QUESTION}\nAnswer:"}
            ),
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

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.latency_s if self.latency_s > 0 else 0.0


def run_smoke(endpoint: Endpoint, max_tokens: int = 32, timeout_s: float = 120.0) -> SmokeResult:
    """Send one request and return its text, usage and latency; a :class:`MeasurementError`
    for an error, no text, or no ``usage`` counts."""
    request = smoke_request(endpoint, max_tokens)
    started = time.perf_counter()
    try:
        with DeadlineClient(timeout_s, auth_headers(endpoint.credentials)) as client:
            response = client.request(
                "POST",
                endpoint.v1 + request.path.removeprefix("/v1"),
                json={"model": endpoint.served_name, **request.payload},
            )
    except httpx.HTTPError as exc:
        raise MeasurementError(f"{request.path} failed: {type(exc).__name__}: {exc}") from None
    latency = time.perf_counter() - started
    if response.status_code in (401, 403):
        raise MeasurementError(
            f"HTTP {response.status_code} from {request.path}: "
            + wants_key_message(endpoint.model.name)
        )
    if response.status_code != 200:
        raise MeasurementError(
            f"HTTP {response.status_code} from {request.path}: {response.text[:200]!r}"
        )
    try:
        data = response.json()
    except ValueError:
        raise MeasurementError(
            f"{request.path} returned non-JSON: {response.text[:200]!r}"
        ) from None
    completion = parse_completion(request.path, data)
    if completion.error is not None:
        raise MeasurementError(f"{request.path} returned no usable answer: {completion.error}")
    text = completion.text
    if text is None:
        raise MeasurementError(f"{request.path} returned no text: {str(data)[:200]!r}")
    prompt_tokens, completion_tokens = completion.prompt_tokens, completion.completion_tokens
    if prompt_tokens is None or completion_tokens is None:
        raise MeasurementError(
            f"{request.path} returned no usage counts: {str(data.get('usage'))[:200]!r}"
        )
    if completion_tokens <= 0 or not text.strip():
        raise MeasurementError(f"{request.path} generated nothing (usage {data.get('usage')})")
    return SmokeResult(
        text=text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        finish_reason=completion.finish_reason,
        latency_s=latency,
    )
