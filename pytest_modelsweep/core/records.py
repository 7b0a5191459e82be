"""Plain records that travel from a measurement to the results file and the store.

They are dataclasses of JSON-friendly fields, so that a record survives the
trip from an xdist worker to the controller and into JSON unchanged
(``asdict`` / ``from_dict`` round-trip).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict

from .codec import converter


def prompt_hash(payload: Any) -> str:
    """A stable short hash of what was sent for an item (messages, prompt, tools, settings)."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


ApiPath = Literal["/v1/chat/completions", "/v1/completions"]


@dataclass(frozen=True)
class ApiRequest:
    """One OpenAI-compatible request for one benchmark item, independent of how it is sent.
    ``payload`` lacks the ``model`` field, so that the prompt hash does not depend on it."""

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


def text_field(path: ApiPath) -> str:
    """Where an OpenAI response for ``path`` carries the generated text (for messages)."""
    return "choices[0].text" if path == "/v1/completions" else "choices[0].message.content"


class ToolCall(TypedDict):
    """One tool call of a chat answer (``message.tool_calls[i]``), JSON-friendly.

    ``name`` and ``arguments`` are None when the server sent no string there; ``arguments``
    is the JSON text as sent, not decoded."""

    id: str | None
    name: str | None
    arguments: str | None


ErrorKind = Literal["request", "response"]
"""``request``: no response body to read (connection, timeout, HTTP error status, non-JSON body).
``response``: a JSON body that is not a usable completion (no choices, ``choices[0]`` or its
``message`` not an object, text of the wrong type)."""


@dataclass(frozen=True)
class Completion:
    """One non-streamed answer as the scorers read it, parsed once from the OpenAI wire format.

    ``text`` is None when a chat message has no content (as with tool calls), ``""`` only when
    the server generated nothing. ``error`` is set exactly when there is no usable answer.
    """

    text: str | None = None
    tool_calls: list[ToolCall] | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    error_kind: ErrorKind | None = None

    @classmethod
    def failed(cls, error: str, kind: ErrorKind = "request") -> Completion:
        """A completion without an answer: the request failed (or the response was unusable)."""
        return cls(error=error, error_kind=kind)


def tool_calls_as_openai(calls: list[ToolCall]) -> list[dict[str, Any]]:
    """Tool calls in OpenAI's ``{"id", "type", "function": {"name", "arguments"}}`` shape (for display)."""
    return [
        {
            **({} if call["id"] is None else {"id": call["id"]}),
            "type": "function",
            "function": {"name": call["name"], "arguments": call["arguments"]},
        }
        for call in calls
    ]


def _string_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def tool_call_of(call: Any) -> ToolCall:
    """One OpenAI tool call (``{"id", "function": {"name", "arguments"}}``) as a
    :class:`ToolCall`: a field that is not a string (or is missing) is None."""
    call = call if isinstance(call, dict) else {}
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    return ToolCall(
        id=_string_or_none(call.get("id")),
        name=_string_or_none(function.get("name")),
        arguments=_string_or_none(function.get("arguments")),
    )


def _tool_calls_of_older_response(response: str) -> list[ToolCall] | None:
    """The tool calls an older record kept as its ``response``: a JSON list of OpenAI tool calls."""
    if not response.startswith("["):
        return None
    try:
        calls = json.loads(response)
    except json.JSONDecodeError:
        return None
    if (
        not isinstance(calls, list)
        or not calls
        or not all(
            isinstance(call, dict) and isinstance(call.get("function"), dict) for call in calls
        )
    ):
        return None
    return [tool_call_of(call) for call in calls]


def completion_of_older_record(data: dict[str, Any]) -> Completion:
    """The completion an older ItemRecord (one ``response`` string) was scored from: a
    ``response`` that is a JSON list of OpenAI tool calls becomes the tool calls *and* stays
    the text; an error is a ``response`` error where BFCL's ``error_type`` says so."""
    response = str(data.get("response") or "")
    error = data.get("error")
    extracted = data.get("extracted")
    bfcl_says = isinstance(extracted, dict) and extracted.get("error_type") == "response_error"
    return Completion(
        text=response,
        tool_calls=_tool_calls_of_older_response(response),
        finish_reason=data.get("finish_reason"),
        prompt_tokens=data.get("prompt_tokens"),
        completion_tokens=data.get("completion_tokens"),
        error=error,
        error_kind=None if error is None else ("response" if bfcl_says else "request"),
    )


def shown_answer(completion: Completion) -> str:
    """How an answer is shown: its tool calls as OpenAI's JSON list when it has any, else its
    text (``""`` for none). An :class:`ItemRecord` whose ``response`` is this keeps the
    answer once, in its completion."""
    if completion.tool_calls:
        return json.dumps(tool_calls_as_openai(completion.tool_calls))
    return completion.text or ""


@dataclass
class ItemRecord:
    """One scored benchmark item (a GSM8K problem, a BFCL record) of one model.

    ``prompt_hash`` covers exactly what was sent; ``data_hash`` the source record, so that
    items of two models pair by ``item_id`` and ``data_hash``. ``completion`` is the answer
    as scored, from which a stored item is scored again. ``score``: a partial credit in
    [0, 1], None for a right/wrong verdict; :attr:`credit` is what comparisons use.
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
    completion: Completion | None = None
    score: float | None = None

    @property
    def credit(self) -> float:
        """The item's score in [0, 1]: ``score`` when the scorer gave one, else 1 or 0."""
        return float(self.correct) if self.score is None else self.score

    def extracted_value(self, name: str) -> Any:
        """``extracted[name]`` where the scorer extracted an object (None otherwise)."""
        return self.extracted.get(name) if isinstance(self.extracted, dict) else None

    @property
    def failed(self) -> bool:
        """No usable answer (HTTP error, timeout, cut stream, unparsable envelope): never scored."""
        return self.error is not None

    @property
    def outcome(self) -> Literal["correct", "wrong", "failed"]:
        """``failed`` when no answer came back; else the scorer's ``correct`` or ``wrong``."""
        if self.failed:
            return "failed"
        return "correct" if self.correct else "wrong"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict that holds the answer once: ``response`` is left out when it
        is what the completion shows (:func:`shown_answer`), ``score`` when the scorer gave
        no partial credit."""
        data = asdict(self)
        if data["score"] is None:
            del data["score"]
        if self.completion is not None and self.response == shown_answer(self.completion):
            del data["response"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemRecord:
        """A record from its dict: ``response`` shown from the completion when left out; one
        written before records kept their completion gets it rebuilt."""
        fields = dict(data)
        if "completion" not in fields:
            fields["completion"] = completion_of_older_record(fields)
        elif fields["completion"] is not None:
            fields["completion"] = converter.structure(fields["completion"], Completion)
        if "response" not in fields:
            completion = fields["completion"]
            fields["response"] = shown_answer(completion) if completion is not None else ""
        return cls(**fields)
