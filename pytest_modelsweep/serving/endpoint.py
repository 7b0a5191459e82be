"""What a benchmark needs of a served model: its URL, name, context and provenance."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..sweep import ModelSpec

ServerKind = Literal["llamacpp", "vllm", "openai"]
How = Literal["attach", "llamacpp", "vllm", "vllm-docker"]


@dataclass(frozen=True)
class Provenance:
    """What an endpoint was measured under, read back from the live server.

    ``server_settings`` holds what the server reports it runs with (slots,
    context per sequence, prefix caching, threads...), not what the sweep
    asked for; ``launch_argv`` is the command line when the plugin started it.
    """

    server_name: str
    server_version: str
    served_name: str
    server_settings: dict[str, Any] = field(default_factory=dict)
    model_source: str = ""
    model_sha256: str | None = None
    model_revision: str | None = None
    image_digest: str | None = None
    launch_argv: tuple[str, ...] = ()
    how: How = "attach"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["launch_argv"] = list(self.launch_argv)
        return data

    def pairing_key(self) -> dict[str, Any]:
        """The fields two runs must share to be paired item by item."""
        return {
            "server_name": self.server_name,
            "server_version": self.server_version,
            "image_digest": self.image_digest,
            "server_settings": self.server_settings,
        }


@dataclass(frozen=True)
class Endpoint:
    """A live OpenAI-compatible server for one model of the sweep."""

    model: ModelSpec
    base_url: str
    served_name: str
    context_length: int
    server_kind: ServerKind
    provenance: Provenance

    @property
    def v1(self) -> str:
        """The OpenAI API root, e.g. ``http://127.0.0.1:8080/v1``."""
        return self.base_url.rstrip("/") + "/v1"

    @property
    def tokenize_url(self) -> str:
        """The server's tokenizer endpoint (llama.cpp and vLLM both serve ``/tokenize``)."""
        return self.base_url.rstrip("/") + "/tokenize"

    @property
    def metrics_url(self) -> str:
        return self.base_url.rstrip("/") + "/metrics"
