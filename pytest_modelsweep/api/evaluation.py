"""Your own accuracy benchmark: the item, the score and the scorer the ``evaluate`` fixture takes.

The public API (docs/writing-benchmarks.md): :class:`EvalItem`, :data:`Scorer`,
:class:`Score`, :class:`Evaluate` → :class:`EvaluationResult`. Items become requests
(:func:`request_for`), completions scored records (:func:`scored_record`), records
statistics (:func:`summarise_items`). Imported in every run: nothing heavy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..core.errors import DataError, ScorerError
from ..core.records import (
    ApiRequest,
    Completion,
    ItemRecord,
    prompt_hash,
    shown_answer,
    text_field,
)

if TYPE_CHECKING:
    from ..core.measurements import AccuracyStats

Prompting = Literal["chat", "completion"]
"""How a model of the sweep is prompted (its ``prompting`` in the sweep file)."""


@dataclass(frozen=True)
class EvalItem:
    """One item of an evaluation: its id, what is sent for it, and what a scorer needs.

    A chat model gets ``messages``; a completion model gets ``prompt``, or the messages as
    a transcript (:func:`render_completion_prompt`); an item with ``tools`` is sent as chat
    to every model. ``answer`` and ``data`` are for the scorer, not sent; ``extra_body``
    is any other request field. Items of two models pair by ``id`` and ``data_hash``
    (default: a hash of messages, prompt, tools and answer).
    """

    id: str
    messages: Sequence[Mapping[str, Any]] | None = None
    prompt: str | None = None
    answer: Any = None
    max_tokens: int = 256
    temperature: float = 0.0
    stop: Sequence[str] = ()
    tools: Sequence[Mapping[str, Any]] | None = None
    seed: int | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    data: Any = field(default=None, compare=False)
    data_hash: str = ""

    def __post_init__(self) -> None:
        where = f"item {self.id!r}"
        if not isinstance(self.id, str) or not self.id:
            raise DataError(f"item id {self.id!r}: expected a non-empty string")
        if self.messages is None and self.prompt is None:
            raise DataError(f"{where}: give messages (chat turns) or a prompt, or both")
        if self.prompt is not None and not isinstance(self.prompt, str):
            raise DataError(f"{where}: prompt must be a string, got {type(self.prompt).__name__}")
        if self.messages is not None:
            object.__setattr__(self, "messages", _checked_messages(self.messages, where))
        if self.tools is not None:
            if self.messages is None:
                raise DataError(f"{where}: tools are sent with chat messages; give messages too")
            object.__setattr__(self, "tools", tuple(dict(tool) for tool in self.tools))
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        if not all(isinstance(s, str) and s for s in stop):
            raise DataError(f"{where}: stop must be a list of non-empty strings, got {stop!r}")
        object.__setattr__(self, "stop", stop)
        check_positive(where, max_tokens=self.max_tokens)
        if (
            isinstance(self.temperature, bool)
            or not isinstance(self.temperature, int | float)
            or not self.temperature >= 0
        ):
            raise DataError(f"{where}: temperature must be a number >= 0, got {self.temperature!r}")
        object.__setattr__(self, "extra_body", dict(self.extra_body))
        if not self.data_hash:
            source = {
                "messages": self.messages and [dict(m) for m in self.messages],
                "prompt": self.prompt,
                "tools": self.tools and list(self.tools),
                "answer": self.answer,
            }
            try:
                object.__setattr__(self, "data_hash", prompt_hash(source))
            except (TypeError, ValueError):
                raise DataError(
                    f"{where}: its messages, tools and answer must be JSON data (strings, "
                    "numbers, lists, dicts) to be stored; keep other things in data="
                ) from None


def check_positive(where: str, **values: Any) -> None:
    """A one-line DataError unless every value is a positive integer (a bool is not)."""
    for what, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DataError(f"{where}: {what} must be a positive integer, got {value!r}")


def _checked_messages(
    messages: Sequence[Mapping[str, Any]], where: str
) -> tuple[dict[str, Any], ...]:
    if isinstance(messages, str | bytes) or not messages:
        raise DataError(
            f'{where}: messages must be a non-empty list of {{"role": ..., "content": ...}} turns'
        )
    checked = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise DataError(
                f'{where}: message {index} must be a dict with a string "role", got {message!r}'
            )
        checked.append(dict(message))
    return tuple(checked)


@dataclass(frozen=True)
class Score:
    """What a scorer says about one answer: ``value`` True/False or a credit in [0, 1]
    (correct only at 1.0), the extracted ``answer`` (JSON data), and other named
    right/wrong ``scores`` of it."""

    value: bool | float
    answer: Any = None
    scores: Mapping[str, bool] = field(default_factory=dict)


Scorer = Callable[[Completion, EvalItem], bool | float | Score]
"""A scorer: (completion, item) to a score; called only for answered items, and again
for stored answers on later runs."""

Summarise = Callable[[Sequence[ItemRecord]], Mapping[str, Any]]
"""Extra statistics of a benchmark from its scored records (e.g. GSM8K's per-filter rates)."""


def render_completion_prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    """Chat turns as one plain prompt: the system content, then ``"<Role>: <content>"``
    turns, blank lines between, ending ``"Assistant:"`` unless the last turn is the
    assistant's."""
    parts = []
    for index, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, str):
            raise DataError(
                f"message {index} has content {content!r}: a completion model "
                "needs text turns (or give the item a prompt)"
            )
        role = str(message["role"])
        parts.append(content if role == "system" else f"{role.capitalize()}: {content}")
    if messages and messages[-1]["role"] == "assistant":
        return "\n\n".join(parts)
    return "\n\n".join([*parts, "Assistant:"])


def request_for(item: EvalItem, prompting: Prompting) -> ApiRequest:
    """The request sent for ``item`` to a model prompted by ``prompting``."""
    settings: dict[str, Any] = {
        "max_tokens": item.max_tokens,
        "temperature": item.temperature,
        **({"stop": list(item.stop)} if item.stop else {}),
        **({"seed": item.seed} if item.seed is not None else {}),
        **item.extra_body,
    }
    messages = [dict(m) for m in item.messages] if item.messages is not None else None
    if messages is not None and (item.tools is not None or prompting == "chat"):
        tools = {} if item.tools is None else {"tools": [dict(tool) for tool in item.tools]}
        return ApiRequest(
            item.id, "/v1/chat/completions", {"messages": messages, **tools, **settings}
        )
    if item.prompt is not None:
        return ApiRequest(item.id, "/v1/completions", {"prompt": item.prompt, **settings})
    assert messages is not None  # EvalItem has messages or a prompt
    try:
        prompt = render_completion_prompt(messages)
    except DataError as error:
        raise DataError(f"item {item.id!r}: {error}") from None
    return ApiRequest(item.id, "/v1/completions", {"prompt": prompt, **settings})


PROMPT_FIELDS = ("messages", "prompt", "tools", "stop")
"""What a request's prompt is made of (per model format); the rest is its sampling."""


def sampling_params(items: Sequence[EvalItem], prompting: Prompting) -> dict[str, Any]:
    """What each item was sampled with: ``sampling`` (shared by every item) and, when some
    differ, ``sampling_by_item`` (each item's others)."""
    requests = {
        item.id: {
            k: v for k, v in request_for(item, prompting).payload.items() if k not in PROMPT_FIELDS
        }
        for item in items
    }
    listed = list(requests.values())

    def text(value: Any) -> str:
        return json.dumps(value, sort_keys=True, default=str)

    shared = {
        k: v
        for k, v in (listed[0].items() if listed else ())
        if all(k in r and text(r[k]) == text(v) for r in listed)
    }
    rest = {
        item_id: {k: v for k, v in r.items() if k not in shared} for item_id, r in requests.items()
    }
    return {"sampling": shared, **({"sampling_by_item": rest} if any(rest.values()) else {})}


def _scorer_name(scorer: Callable[..., Any]) -> str:
    return str(
        getattr(scorer, "__qualname__", None) or getattr(scorer, "__name__", None) or repr(scorer)
    )


def _checked_value(
    value: Any, scorer: Callable[..., Any], benchmark: str, item: EvalItem
) -> bool | float:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1:
        return float(value)
    raise ScorerError(
        f"scorer {_scorer_name(scorer)} returned {value!r} for {benchmark} item {item.id!r}: "
        "expected True/False, a number in [0, 1], or Score(value, answer=...) with one"
    )


def scored_record(
    benchmark: str,
    scorer: Scorer,
    item: EvalItem,
    request: ApiRequest,
    completion: Completion,
) -> ItemRecord:
    """The item's record: failed when there is no answer, else the scorer's checked score
    (a ScorerError for anything but a bool, a number in [0, 1] or a Score with JSON data)."""
    shown = completion.text or ""
    if item.tools is not None:  # its tool calls, when it made any
        shown = shown_answer(completion)
    failure = completion.error
    if failure is None and completion.text is None and item.tools is None:
        failure = f"{text_field(request.path)} is NoneType, not a string"

    record = partial(
        ItemRecord,
        item_id=item.id,
        prompt_hash=request.prompt_hash,
        response=shown,
        data_hash=item.data_hash,
        finish_reason=completion.finish_reason,
        completion=completion,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
    )
    if failure is not None:
        return record(correct=False, error=failure)
    result = scorer(completion, item)
    score = result if isinstance(result, Score) else Score(result)
    value = _checked_value(score.value, scorer, benchmark, item)
    try:
        json.dumps(score.answer)
    except (TypeError, ValueError):
        raise ScorerError(
            f"scorer {_scorer_name(scorer)} gave the answer {score.answer!r} for {benchmark} "
            f"item {item.id!r}: an answer must be JSON data (a string, number, list or dict)"
        ) from None
    scores = dict(score.scores) if isinstance(score.scores, Mapping) else None
    if scores is None or not all(
        isinstance(k, str) and isinstance(v, bool) for k, v in scores.items()
    ):
        raise ScorerError(
            f"scorer {_scorer_name(scorer)} gave scores {score.scores!r} for {benchmark} item "
            f"{item.id!r}: expected a dict of names to True/False"
        )
    if isinstance(value, bool):
        return record(correct=value, extracted=score.answer, scores=scores)
    return record(correct=value >= 1.0, extracted=score.answer, scores=scores, score=value)


def summarise_items(records: Sequence[ItemRecord]) -> dict[str, Any]:
    """n, items, failed, correct, accuracy (the mean score) and truncated_rate; all but
    items and failed count the answered items only."""
    answered = [r for r in records if not r.failed]
    n = len(answered)
    return {
        "n": n,
        "items": len(records),
        "failed": len(records) - n,
        "correct": sum(r.correct for r in answered),
        "accuracy": sum(r.credit for r in answered) / n if n else 0.0,
        "truncated_rate": sum(r.finish_reason == "length" for r in answered) / n if n else 0.0,
    }


@dataclass(frozen=True)
class EvaluationResult:
    """What ``evaluate`` measured for this test's model (also in the results file)."""

    benchmark: str
    model: str
    accuracy: float
    """The mean score of the answered items (the recorded value)."""
    n: int
    """Answered items (failed ones are not scored)."""
    correct: int
    failed: int
    sent: int
    """Items sent to the server in this run."""
    reused: int
    """Items whose stored answers were reused (and scored again)."""
    records: list[ItemRecord]
    stats: AccuracyStats
    """The measurement's statistics (also the benchmark's own ``summarise`` figures)."""


class Evaluate(Protocol):
    """The ``evaluate`` fixture's type: run an evaluation on this test's model
    (docs/writing-benchmarks.md)."""

    def __call__(
        self,
        benchmark: str,
        items: Iterable[EvalItem],
        scorer: Scorer,
        *,
        concurrency: int = 16,
        params: Mapping[str, Any] | None = None,
        summarise: Summarise | None = None,
    ) -> EvaluationResult:
        """Send ``items`` (the first ``--limit`` of them) with ``concurrency`` in flight, store
        each as it is scored, record the measurement; fail in one line on failed items."""


__all__ = [
    "EvalItem",
    "Evaluate",
    "EvaluationResult",
    "Prompting",
    "Score",
    "Scorer",
    "Summarise",
    "check_positive",
    "render_completion_prompt",
    "request_for",
    "scored_record",
    "summarise_items",
]
