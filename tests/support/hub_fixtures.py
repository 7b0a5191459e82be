"""Offline stand-ins for the Hugging Face Hub, built the way huggingface_hub builds its answers.

* :func:`api_answer` returns the JSON of ``GET /api/models/REPO?blobs=true`` (what
  ``HfApi.model_info(repo, files_metadata=True)`` receives): ``cardData``,
  ``tags``, ``siblings`` with ``size``, ``safetensors`` {``parameters``, ``total``},
  ``config``; :func:`model_info` turns it into a :class:`ModelInfo` exactly as
  ``model_info`` does (``ModelInfo(**answer)``).
* :func:`hub_error` makes the exception huggingface_hub itself raises for a Hub
  error answer, by passing a Hub-shaped HTTP response (status and
  ``X-Error-Code`` header) through ``hf_raise_for_status``.
* :func:`connect_error` is the transport error of huggingface_hub's HTTP client
  when the Hub's host cannot be resolved.
* :class:`FakeHub` answers ``model_info`` and ``config.json`` from dicts and
  records every call.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from huggingface_hub.hf_api import ModelInfo
from huggingface_hub.utils import hf_raise_for_status  # type: ignore[attr-defined]

# huggingface_hub >= 1 talks HTTP through httpx (this environment's build: httpx2).
try:
    _http: Any = importlib.import_module("httpx2")
except ImportError:  # pragma: no cover - depends on the installed huggingface_hub
    _http = importlib.import_module("httpx")


def api_answer(
    repo: str,
    *,
    license: str | None = None,
    license_name: str | None = None,
    tags: list[str] | None = None,
    parameters: Mapping[str, int] | None = None,
    total: int | None = None,
    siblings: list[tuple[str, int | None]] | None = None,
    config: Mapping[str, Any] | None = None,
    gated: str | bool = False,
) -> dict[str, Any]:
    """The Hub API's JSON for one model repo; omitted parts are absent, as the Hub omits them."""
    answer: dict[str, Any] = {
        "_id": "0" * 24,
        "id": repo,
        "modelId": repo,
        "author": repo.split("/")[0],
        "private": False,
        "gated": gated,
        "disabled": False,
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "tags": list(
            tags if tags is not None else ["transformers", "safetensors", "text-generation"]
        ),
        "lastModified": "2025-04-28T12:00:00.000Z",
        "createdAt": "2025-04-27T12:00:00.000Z",
    }
    if license is not None:
        card: dict[str, Any] = {"license": license}
        if license_name is not None:
            card["license_name"] = license_name
        answer["cardData"] = card
    if parameters is not None:
        answer["safetensors"] = {
            "parameters": dict(parameters),
            "total": total if total is not None else sum(parameters.values()),
        }
    if siblings is not None:
        answer["siblings"] = [
            {"rfilename": name, **({"size": size} if size is not None else {})}
            for name, size in siblings
        ]
    if config is not None:
        answer["config"] = dict(config)
    return answer


def model_info(repo: str, **kwargs: Any) -> ModelInfo:
    """:func:`api_answer` parsed by :class:`ModelInfo`, as ``HfApi.model_info`` parses it."""
    return ModelInfo(**api_answer(repo, **kwargs))  # type: ignore[no-untyped-call]


def config_json(
    architecture: str, dtype: str = "bfloat16", key: str = "torch_dtype"
) -> dict[str, Any]:
    """A config.json with the fields screening reads."""
    return {"architectures": [architecture], "model_type": architecture.lower(), key: dtype}


_ERROR_ANSWERS = {
    # kind: (status, X-Error-Code, X-Error-Message)
    "gated": (
        403,
        "GatedRepo",
        "Access to model {repo} is restricted and you are not in the authorized list.",
    ),
    "not_found": (404, "RepoNotFound", "Repository not found"),
    "revision_not_found": (404, "RevisionNotFound", "Invalid rev id: nope"),
    "entry_not_found": (404, "EntryNotFound", "Entry not found"),
    "server_error": (503, None, "Service Unavailable"),
}


def hub_error(kind: str, repo: str, path: str = "") -> BaseException:
    """The exception huggingface_hub raises for a Hub error answer of ``kind`` (see _ERROR_ANSWERS)."""
    status, code, message = _ERROR_ANSWERS[kind]
    url = (
        f"https://huggingface.co/{repo}/resolve/main/{path}"
        if path
        else (f"https://huggingface.co/api/models/{repo}")
    )
    headers = {"X-Error-Message": message.format(repo=repo)}
    if code:
        headers["X-Error-Code"] = code
    response = _http.Response(status, headers=headers, request=_http.Request("GET", url))
    try:
        hf_raise_for_status(response)
    except Exception as error:
        return error
    raise AssertionError(f"hf_raise_for_status accepted a {status} answer")


def connect_error() -> BaseException:
    """What ``model_info`` raises when huggingface.co cannot be resolved."""
    error: BaseException = _http.ConnectError("[Errno -2] Name or service not known")
    return error


class FakeHub:
    """``model_info`` and ``config.json`` from dicts (a value that is an exception is raised)."""

    def __init__(
        self,
        answers: Mapping[str, ModelInfo | BaseException],
        configs: Mapping[str, Mapping[str, Any] | BaseException] | None = None,
    ) -> None:
        self.answers = dict(answers)
        self.configs = dict(configs or {})
        self.info_calls: list[tuple[str, str | None, bool]] = []
        self.config_calls: list[tuple[str, str | None]] = []

    def model_info(
        self, repo_id: str, *, revision: str | None = None, files_metadata: bool = False
    ) -> ModelInfo:
        self.info_calls.append((repo_id, revision, files_metadata))
        answer = self.answers[repo_id]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def fetch_config(self, repo: str, revision: str | None) -> Mapping[str, Any]:
        self.config_calls.append((repo, revision))
        config = self.configs.get(repo)
        if config is None:
            raise hub_error("entry_not_found", repo, "config.json")
        if isinstance(config, BaseException):
            raise config
        return config
