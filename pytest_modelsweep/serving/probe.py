"""Read back from a live server what it is and what it runs with.

Provenance comes from the server, not from the sweep: llama.cpp's ``/props`` and
``/v1/models``, vLLM's ``/version``, ``/v1/models`` (``max_model_len``, ``root``) and the
config-info gauges of its ``/metrics`` (:func:`.observed.config_gauges`).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..client.tls import DeadlineClient
from ..core.errors import EndpointError
from ..core.jsontext import number_or_none
from ..core.secrets import Credentials, auth_headers, redact, wants_key_message
from ..core.sweep import ModelSpec
from .endpoint import Endpoint, Provenance, ServerKind
from .observed import config_gauges


@dataclass(frozen=True)
class ServerFacts:
    """What one probe of a live server found."""

    kind: ServerKind
    server_name: str
    server_version: str
    context_length: int
    settings: dict[str, Any] = field(default_factory=dict)
    observed: dict[str, Any] = field(default_factory=dict)
    """What the server's endpoints said (vLLM: version, model entry, config gauges)."""

    def endpoint(
        self,
        spec: ModelSpec,
        base_url: str,
        provenance: Provenance,
        credentials: Credentials | None = None,
    ) -> Endpoint:
        """The endpoint these facts describe, for the sweep's model ``spec``."""
        return Endpoint(
            credentials=credentials,
            model=spec,
            base_url=base_url,
            served_name=spec.served_name,
            context_length=self.context_length,
            server_kind=self.kind,
            provenance=provenance,
        )


def _get(client: DeadlineClient, url: str, *, text: bool = False) -> Any:
    """The JSON (or ``text``) of a 200 answer to ``GET url``, else None ('' for text)."""
    with contextlib.suppress(httpx.HTTPError, ValueError):
        response = client.request("GET", url)
        if response.status_code == 200:
            return response.text if text else response.json()
    return "" if text else None


def probe_server(
    base_url: str,
    served_name: str,
    *,
    timeout_s: float = 10.0,
    credentials: Credentials | None = None,
    model: str | None = None,
) -> ServerFacts:
    """Check that ``base_url`` serves ``served_name`` and read its facts (each answer whole
    within ``timeout_s``); an :class:`EndpointError` when it does not answer with a model
    list that lists it."""
    base = redact(base_url.rstrip("/"))
    with DeadlineClient(timeout_s, auth_headers(credentials)) as client:
        try:
            response = client.request("GET", f"{base}/v1/models")
        except httpx.HTTPError as exc:
            raise EndpointError(
                f"{base}/v1/models did not answer ({type(exc).__name__}: {redact(str(exc))}); "
                "check that the server is running and the URL (scheme, host, port) is right"
            ) from None
        if response.status_code in (401, 403):
            raise EndpointError(
                f"{base}/v1/models answered HTTP {response.status_code}: "
                + wants_key_message(model or served_name)
            )
        if response.status_code != 200:
            raise EndpointError(
                f"{base}/v1/models answered HTTP {response.status_code}; an OpenAI-compatible "
                "server answers 200 with its model list (is this the server's root URL?)"
            )
        try:
            entries = response.json()["data"]
            served = tuple(str(entry["id"]) for entry in entries)
        except (ValueError, KeyError, TypeError):
            raise EndpointError(
                f"{base}/v1/models did not return an OpenAI model list (got "
                f"{redact(response.text[:480])[:120]!r}); point --endpoint at an "
                "OpenAI-compatible server"
            ) from None
        if served_name not in served:
            raise EndpointError(
                f"{base} does not serve {served_name!r} (it serves: "
                f"{', '.join(served) or 'nothing'}); start it with that served name or fix "
                "served_name in the sweep"
            )
        entry = next(e for e in entries if e.get("id") == served_name)
        props = _get(client, f"{base}/props")
        if isinstance(props, dict) and "build_info" in props:
            return _llamacpp_facts(props, entry)
        version = _get(client, f"{base}/version")
        if isinstance(version, dict) and "version" in version:
            listed = {"max_model_len": entry.get("max_model_len"), "root": entry.get("root")}
            return ServerFacts(
                "vllm",
                "vllm",
                str(version["version"]),
                _length(entry.get("max_model_len")),
                dict(listed),
                {
                    "version": str(version["version"]),
                    "model": listed,
                    "config_gauges": config_gauges(_get(client, f"{base}/metrics", text=True)),
                },
            )
    return ServerFacts(
        "openai",
        "openai-compatible",
        "unknown",
        _length(entry.get("max_model_len")) or _length(entry.get("context_length")),
        {"model_entry": entry},
    )


def _llamacpp_facts(props: dict[str, Any], entry: dict[str, Any]) -> ServerFacts:
    generation = props.get("default_generation_settings", {})
    meta = entry.get("meta") or {}
    return ServerFacts(
        "llamacpp",
        "llama.cpp llama-server",
        str(props.get("build_info")),
        _length(generation.get("n_ctx")),
        {
            "total_slots": props.get("total_slots"),
            "n_ctx_per_slot": generation.get("n_ctx"),
            "n_ctx_train": meta.get("n_ctx_train"),
            "model_ftype": props.get("model_ftype") or meta.get("ftype"),
            "n_params": meta.get("n_params"),
            "n_vocab": meta.get("n_vocab"),
            "endpoint_metrics": props.get("endpoint_metrics"),
            "supports_tool_calls": (props.get("chat_template_caps") or {}).get(
                "supports_tool_calls"
            ),
            "chat_format": (generation.get("params") or {}).get("chat_format"),
        },
    )


def _length(value: Any) -> int:
    """A context length a server answered: a finite number as an int, anything else 0 (not
    told)."""
    number = number_or_none(value)
    return int(number) if number is not None and math.isfinite(number) and number > 0 else 0
