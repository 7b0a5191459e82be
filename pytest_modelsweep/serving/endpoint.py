"""What a benchmark needs of a served model: its URL, name, context and provenance."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..client.breaker import Breaker
from ..core.secrets import Credentials
from ..core.sweep import ModelSpec

ServerKind = Literal["llamacpp", "vllm", "openai"]
How = Literal["attach", "llamacpp", "vllm", "vllm-docker"]


@dataclass(frozen=True)
class Provenance:
    """What an endpoint was measured under, read back from the live server: its
    ``server_settings`` are what it reports, not what the sweep asked for."""

    server_name: str
    server_version: str
    served_name: str
    server_settings: dict[str, Any] = field(default_factory=dict)
    model_source: str = ""
    model_sha256: str | None = None
    model_revision: str | None = None
    model_header: dict[str, Any] | None = None
    """What the model file's GGUF header says (architecture, name, file type), when it is one."""
    image_digest: str | None = None
    """The digest of the image that ran: read from Docker (``docker image inspect``)."""
    image_pinned: bool | None = None
    """Whether the sweep named the image by that digest (False: a tag, digest observed)."""
    launch_argv: tuple[str, ...] = ()
    how: How = "attach"
    flag_sources: dict[str, str] = field(default_factory=dict)
    """Each serving flag of ``server_settings``: ``observed`` (read from the server) or
    ``declared`` (only the sweep's)."""
    observed: dict[str, Any] = field(default_factory=dict)
    """What was read from what ran: ``/version``, the ``/v1/models`` entry, the config-info
    gauges of ``/metrics``, the startup log, the image."""
    server_process: dict[str, Any] | None = None
    """The process listening on the endpoint's port on this host: pid, command (redacted)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"launch_argv": list(self.launch_argv)}

    def cache_key(self) -> str:
        """What a stored item of this model must share to be reused without a request."""
        return model_serving_key(self.as_dict())


# Settings that are serving flags (identical for every model of a sweep); the rest of
# server_settings describes the model itself (parameters, file type, template).
SERVING_FLAGS = (
    "total_slots",
    "n_ctx_per_slot",
    "n_threads",
    "cache_prompt",
    "max_model_len",
    "max_num_seqs",
    "prefix_caching",
    "dtype",
    "kv_cache_dtype",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
)


def serving_identity(provenance: dict[str, Any]) -> dict[str, Any]:
    """The serving side of a provenance record: server, version, image, serving flags."""
    settings = provenance.get("server_settings") or {}
    return {
        "server_name": provenance.get("server_name"),
        "server_version": provenance.get("server_version"),
        "image_digest": provenance.get("image_digest"),
        "serving_flags": {k: settings.get(k) for k in SERVING_FLAGS if k in settings},
    }


def model_serving_key(provenance: dict[str, Any]) -> str:
    """A short hash of everything a stored answer depends on: serving identity and model."""
    import hashlib
    import json

    identity = serving_identity(provenance) | {
        key: provenance.get(key)
        for key in (
            "served_name",
            "model_source",
            "model_sha256",
            "model_revision",
            "server_settings",
        )
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[
        :16
    ]


@dataclass(frozen=True)
class Endpoint:
    """A live OpenAI-compatible server for one model of the sweep; ``base_url`` never
    carries credentials, ``breaker`` is shared by all its tests in this process."""

    model: ModelSpec
    base_url: str
    served_name: str
    context_length: int
    server_kind: ServerKind
    provenance: Provenance
    credentials: Credentials | None = field(default=None, repr=False, compare=False)
    breaker: Breaker = field(default=None, repr=False, compare=False)  # type: ignore[assignment]
    accelerator: str | None = None
    """The sweep's ``[serving] accelerator`` (``tpu-v5e``): TPU pitfalls are refused."""

    def __post_init__(self) -> None:
        if self.breaker is None:
            object.__setattr__(
                self,
                "breaker",
                Breaker(self.model.name, self.base_url, credentials=self.credentials),
            )

    @property
    def v1(self) -> str:
        """The OpenAI API root, e.g. ``http://127.0.0.1:8080/v1``."""
        return self.base_url.rstrip("/") + "/v1"

    @property
    def tokenize_url(self) -> str:
        """The server's tokenizer endpoint (llama.cpp and vLLM both serve ``/tokenize``)."""
        return self.base_url.rstrip("/") + "/tokenize"

    def server_pids(self) -> list[int]:
        """The pids of this endpoint's server on this host: the one this process launched,
        else the process listening on its port; [] for a server elsewhere."""
        from .listener import listening_pids
        from .process import server_pids_at

        return server_pids_at(self.base_url) or listening_pids(self.base_url)
