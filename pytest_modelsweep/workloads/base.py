"""The request a workload sends for one item, independent of how it is sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..records import prompt_hash

ApiPath = Literal["/v1/chat/completions", "/v1/completions"]


@dataclass(frozen=True)
class ApiRequest:
    """One OpenAI-compatible request for one benchmark item.

    ``payload`` is the JSON body without the ``model`` field; the client adds the
    endpoint's served name, so that the prompt hash does not depend on it.
    """

    item_id: str
    path: ApiPath
    payload: dict[str, Any] = field(hash=False)

    @property
    def prompt_hash(self) -> str:
        return prompt_hash({"path": self.path, **self.payload})
