"""Plain records that travel from a measurement to the results file and the store.

They are dataclasses of JSON-friendly fields, so that a record survives the
trip from an xdist worker to the controller and into JSON unchanged
(``asdict`` / ``from_dict`` round-trip).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


def prompt_hash(payload: Any) -> str:
    """A stable short hash of what was sent for an item (messages, prompt, tools, settings)."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


ApiPath = Literal["/v1/chat/completions", "/v1/completions"]


@dataclass(frozen=True)
class ApiRequest:
    """One OpenAI-compatible request for one benchmark item, independent of how it is sent.

    ``payload`` is the JSON body without the ``model`` field; the client adds the
    endpoint's served name, so that the prompt hash does not depend on it.
    """

    item_id: str
    path: ApiPath
    payload: dict[str, Any] = field(hash=False)

    @property
    def prompt_hash(self) -> str:
        return prompt_hash({"path": self.path, **self.payload})


@dataclass
class RequestRecord:
    """One streamed request as the client saw it; times are seconds on a monotonic clock."""

    start: float
    end: float
    first_token: float | None = None
    token_times: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    text: str = ""

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.start

    @property
    def latency(self) -> float:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        return cls(**data)


@dataclass
class ItemRecord:
    """One scored benchmark item (a GSM8K problem, a BFCL record) of one model.

    ``prompt_hash`` covers exactly what was sent (it differs between a chat and a
    completion model); ``data_hash`` covers the source record, so that items of
    two models pair by ``item_id`` and ``data_hash``.
    """

    item_id: str
    prompt_hash: str
    correct: bool
    response: str
    data_hash: str = ""
    extracted: Any = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    scores: dict[str, bool] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemRecord:
        return cls(**data)


@dataclass
class Measurement:
    """One recorded result of one test: a value with its unit, sample size and records."""

    model: str
    benchmark: str
    value: float
    unit: str
    n: int
    params: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    test_id: str = ""
    recorded_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        return cls(**data)
