"""Stored answers are scored again by the current scorer when a run reuses them."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from support.paths import SHARED_DATA

from pytest_modelsweep.api.evaluation import EvalItem, request_for, scored_record
from pytest_modelsweep.client import parse_completion
from pytest_modelsweep.core.records import ApiRequest, Completion, ItemRecord
from pytest_modelsweep.core.sweep import ModelSource, ModelSpec, Prompting
from pytest_modelsweep.data.bfcl import BfclRecord, load_bfcl
from pytest_modelsweep.data.gsm8k import Gsm8kProblem
from pytest_modelsweep.scoring.bfcl import score_bfcl_answer
from pytest_modelsweep.scoring.gsm8k import score_gsm8k_answer
from pytest_modelsweep.serving.endpoint import Endpoint, Provenance
from pytest_modelsweep.store.database import Store
from pytest_modelsweep.workloads.accuracy import run_accuracy
from pytest_modelsweep.workloads.bfcl import bfcl_eval_item, build_bfcl_request
from pytest_modelsweep.workloads.gsm8k import build_gsm8k_request, gsm8k_eval_item

PROBLEM = Gsm8kProblem("gsm8k-test-0000", 0, "test", "How many?", "2 + 3 = 5\n#### 5")
EXEMPLARS = (Gsm8kProblem("gsm8k-train-0000", 0, "train", "One?", "#### 1"),)
ITEM = gsm8k_eval_item(PROBLEM, EXEMPLARS)


def spec(
    prompting: Prompting = "chat", bfcl_mode: str = "prompt", parser: str | None = None
) -> ModelSpec:
    return ModelSpec(
        name="m",
        source=ModelSource("embedded", "m"),
        served_name="m",
        license="mit",
        prompting=prompting,
        tool_call_parser=parser,
        bfcl_mode=bfcl_mode,
    )  # type: ignore[arg-type]


def openai(
    text: str | None, *, chat: bool, finish: str = "stop", tool_calls: Any = None
) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
        if tool_calls is not None:
            choice["message"]["tool_calls"] = tool_calls
    else:
        choice["text"] = text
    return {"choices": [choice], "usage": {"prompt_tokens": 11, "completion_tokens": 7}}


def answer(request: ApiRequest, response: Any) -> Completion:
    """The completion the client reads from this response body."""
    return parse_completion(request.path, response)


def stored(record: ItemRecord) -> ItemRecord:
    """The record as a store gives it back (through JSON)."""
    return ItemRecord.from_dict(json.loads(json.dumps(record.to_dict())))


def stored_by_the_previous_version(record: ItemRecord) -> ItemRecord:
    """The record as a store written before records kept their completion gives it back (such a
    record had its answer in ``response`` only)."""
    older = {**record.to_dict(), "response": record.response}
    del older["completion"]
    return ItemRecord.from_dict(json.loads(json.dumps(older)))


def score_gsm8k(item: EvalItem, request: ApiRequest, completion: Completion) -> ItemRecord:
    """The gsm8k bench's scoring, as ``evaluate`` hands it to run_accuracy."""
    return scored_record("gsm8k", score_gsm8k_answer, item, request, completion)


def score_bfcl(item: EvalItem, request: ApiRequest, completion: Completion) -> ItemRecord:
    """The bfcl bench's scoring, as ``evaluate`` hands it to run_accuracy."""
    return scored_record("bfcl", score_bfcl_answer, item, request, completion)


def verdict(record: ItemRecord) -> tuple[Any, ...]:
    return record.correct, record.scores, record.extracted, record.error


@pytest.fixture(scope="module")
def bfcl_record() -> BfclRecord:
    return load_bfcl(SHARED_DATA / "bfcl")[0]


@pytest.mark.parametrize("prompting", ["chat", "completion"])
@pytest.mark.parametrize(
    "text,finish",
    [
        ("So 2 + 3 = 5.\n#### 5", "stop"),
        ("The answer is 6.", "stop"),
        ("", "length"),
        ("#### $1,000.", "stop"),
    ],
)
def test_gsm8k_records_rescore_to_themselves(prompting: Prompting, text: str, finish: str) -> None:
    request = build_gsm8k_request(PROBLEM, spec(prompting), EXEMPLARS)
    record = score_gsm8k(
        ITEM, request, answer(request, openai(text, chat=prompting == "chat", finish=finish))
    )
    again = stored(record)
    assert again.completion is not None
    assert score_gsm8k(ITEM, request, again.completion) == record
    older = stored_by_the_previous_version(record)
    assert older.completion is not None
    rescored = score_gsm8k(ITEM, request, older.completion)
    assert verdict(rescored) == verdict(record) and rescored.response == record.response


def tool_call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}


def bfcl_cases(record: BfclRecord) -> list[tuple[str, dict[str, Any]]]:
    name = record.function[0]["name"]
    params = {
        k: next(v for v in accepted if v != "")
        for k, accepted in record.ground_truth[0][name].items()
        if any(v != "" for v in accepted)
    }
    call_text = f"[{name}(" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + ")]"
    return [
        ("prompt", openai(call_text, chat=True)),
        ("prompt", openai("I cannot help.", chat=True)),
        ("prompt", openai("[f(a=1), g(b=2)]", chat=True, finish="length")),
        (
            "tools",
            openai(
                None, chat=True, tool_calls=[tool_call(name.replace(".", "_"), json.dumps(params))]
            ),
        ),
        ("tools", openai(None, chat=True, tool_calls=[tool_call(name, "{not json")])),
        ("tools", openai("No tool needed.", chat=True)),
        ("tools", openai("", chat=True)),
        ("tools", openai(None, chat=True, tool_calls=[tool_call("a", "{}"), tool_call("b", "{}")])),
    ]


def test_bfcl_records_rescore_to_themselves(bfcl_record: BfclRecord) -> None:
    verdicts = set()
    for mode, response in bfcl_cases(bfcl_record):
        model = spec(bfcl_mode=mode, parser="hermes" if mode == "tools" else None)
        item, request = bfcl_eval_item(bfcl_record, model), build_bfcl_request(bfcl_record, model)
        record = score_bfcl(item, request, answer(request, response))
        completion = stored(record).completion
        assert completion is not None
        again = score_bfcl(item, request, completion)
        assert again == record, (mode, response)
        older = stored_by_the_previous_version(record).completion
        assert older is not None
        rescored = score_bfcl(item, request, older)
        assert verdict(rescored) == verdict(record) and rescored.response == record.response, (
            mode,
            response,
        )
        verdicts.add((mode, record.correct))
    assert verdicts == {("prompt", True), ("prompt", False), ("tools", True), ("tools", False)}


def test_a_reused_answer_gets_the_current_verdict_and_the_store_is_updated(tmp_path: Any) -> None:
    store = Store(tmp_path / "s.sqlite")
    endpoint = Endpoint(
        spec(), "http://127.0.0.1:9", "m", 4096, "llamacpp", Provenance("test", "0", "m")
    )
    request = build_gsm8k_request(PROBLEM, spec(), EXEMPLARS)
    key = endpoint.provenance.cache_key()
    right = score_gsm8k(ITEM, request, answer(request, openai("#### 5", chat=True)))
    # as an older scorer might have stored it: the same answer, the opposite verdict
    stale = ItemRecord.from_dict(
        {
            **right.to_dict(),
            "correct": False,
            "scores": {"strict-match": False, "flexible-extract": False},
        }
    )
    store.add_item("run-1", "m", "gsm8k", key, stale)
    lines: list[str] = []
    run = run_accuracy(
        endpoint,
        "gsm8k",
        [ITEM],
        lambda item: request_for(item, "chat"),
        score_gsm8k,
        store=store,
        run_id="run-2",
        progress=lines.append,
    )
    assert (run.sent, run.reused) == (0, 1)  # nothing was sent: port 9 would have refused it
    assert run.records == [right]
    assert (
        store.stored_items(key, "gsm8k", [(PROBLEM.item_id, request.prompt_hash)])[PROBLEM.item_id]
        == right
    )
    assert store.run_items("run-2", "m", "gsm8k") == [right]
    assert lines[0] == "gsm8k m: reused 1 stored items (1 scored differently now), sending 0"


def test_bfcl_rescoring_keeps_an_answer_without_content_or_calls(bfcl_record: BfclRecord) -> None:
    """A tools-mode answer with null content and no calls (BFCL: decoder_failed) scores the same again."""
    model = spec(bfcl_mode="tools", parser="hermes")
    item, request = bfcl_eval_item(bfcl_record, model), build_bfcl_request(bfcl_record, model)
    record = score_bfcl(item, request, answer(request, openai(None, chat=True)))
    assert (record.correct, record.error) == (False, None)
    assert record.extracted["error_type"] == "ast_decoder:decoder_failed"
    completion = stored(record).completion
    assert completion is not None and completion.text is None
    assert score_bfcl(item, request, completion) == record


PREVIOUS_TOOLS_ITEM: dict[str, Any] = {
    "item_id": "simple_python_0",
    "prompt_hash": "0123456789abcdef",
    "correct": True,
    "response": json.dumps(
        [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "calculate_triangle_area", "arguments": '{"base": 10}'},
            }
        ]
    ),
    "data_hash": "",
    "extracted": {
        "calls": [{"calculate_triangle_area": {"base": 10}}],
        "error_type": "",
        "error": "",
    },
    "finish_reason": "tool_calls",
    "prompt_tokens": 11,
    "completion_tokens": 7,
    "scores": {"ast": True},
    "error": None,
}
"""A tools-mode item as the previous version stored it: the calls' JSON in ``response``, no completion."""


def test_an_item_stored_by_the_previous_version_gets_its_completion_rebuilt() -> None:
    record = ItemRecord.from_dict(PREVIOUS_TOOLS_ITEM)
    assert record.completion == Completion(
        text=PREVIOUS_TOOLS_ITEM["response"],
        tool_calls=[
            {"id": "call_0", "name": "calculate_triangle_area", "arguments": '{"base": 10}'}
        ],
        finish_reason="tool_calls",
        prompt_tokens=11,
        completion_tokens=7,
    )
    text_item = {**PREVIOUS_TOOLS_ITEM, "response": "[calculate_triangle_area(base=10)]"}
    text = ItemRecord.from_dict(text_item).completion
    assert text is not None and (text.text, text.tool_calls) == (
        "[calculate_triangle_area(base=10)]",
        None,
    )
    failed = ItemRecord.from_dict(
        {
            **PREVIOUS_TOOLS_ITEM,
            "response": "",
            "error": "timed out after 5 s",
            "extracted": {"calls": None, "error_type": "request_error", "error": "x"},
        }
    )
    assert failed.completion == Completion(
        text="",
        finish_reason="tool_calls",
        prompt_tokens=11,
        completion_tokens=7,
        error="timed out after 5 s",
        error_kind="request",
    )


@pytest.mark.parametrize("mode", ["tools", "prompt"])
def test_a_store_written_by_the_previous_version_is_reused_with_the_same_verdicts(
    tmp_path: Any, bfcl_record: BfclRecord, mode: str
) -> None:
    model = spec(bfcl_mode=mode, parser="hermes" if mode == "tools" else None)
    item, request = bfcl_eval_item(bfcl_record, model), build_bfcl_request(bfcl_record, model)
    store = Store(tmp_path / "s.sqlite")
    cases = [response for case_mode, response in bfcl_cases(bfcl_record) if case_mode == mode]
    for index, response in enumerate(cases):
        # each case under a server version of its own: one stored item per serving key
        endpoint = Endpoint(
            model, "http://127.0.0.1:9", "m", 4096, "llamacpp", Provenance("test", str(index), "m")
        )
        record = score_bfcl(item, request, answer(request, response))
        store.add_item("run-1", "m", "bfcl", endpoint.provenance.cache_key(), record)
        older = {**record.to_dict(), "response": record.response}  # as that version wrote it
        del older["completion"]
        with sqlite3.connect(tmp_path / "s.sqlite") as db:
            db.execute(
                "UPDATE items SET record_json = ? WHERE serving_key = ?",
                (json.dumps(older), endpoint.provenance.cache_key()),
            )
        lines: list[str] = []
        run = run_accuracy(
            endpoint,
            "bfcl",
            [item],
            lambda each: request_for(each, model.prompting),
            score_bfcl,
            store=store,
            run_id=f"run-{index + 2}",
            progress=lines.append,
        )
        assert (run.sent, run.reused) == (0, 1)  # nothing was sent: port 9 would have refused it
        (rescored,) = run.records
        assert verdict(rescored) == verdict(record) and rescored.response == record.response, (
            response
        )
        assert lines[0] == "bfcl m: reused 1 stored items, sending 0"
        upgraded = store.stored_items(
            endpoint.provenance.cache_key(), "bfcl", [(record.item_id, record.prompt_hash)]
        )
        assert upgraded[record.item_id] == rescored  # written back with its completion
    assert len(cases) == {"tools": 5, "prompt": 3}[mode]


def test_a_stored_item_without_a_completion_is_sent_again(tmp_path: Any) -> None:
    store = Store(tmp_path / "s.sqlite")
    endpoint = Endpoint(
        spec(), "http://127.0.0.1:9", "m", 4096, "llamacpp", Provenance("test", "0", "m")
    )
    request = build_gsm8k_request(PROBLEM, spec(), EXEMPLARS)
    right = score_gsm8k(ITEM, request, answer(request, openai("#### 5", chat=True)))
    store.add_item(
        "run-1",
        "m",
        "gsm8k",
        endpoint.provenance.cache_key(),
        ItemRecord.from_dict({**right.to_dict(), "completion": None}),
    )
    run = run_accuracy(
        endpoint,
        "gsm8k",
        [ITEM],
        lambda item: request_for(item, "chat"),
        score_gsm8k,
        store=store,
        run_id="run-2",
        timeout_s=5,
    )
    assert (run.sent, run.reused, run.errors) == (1, 0, 1)  # port 9 refused it
    (record,) = run.records
    assert record.completion is not None and record.completion.error_kind == "request"
    assert (record.error or "").startswith("request to /v1/chat/completions failed: ConnectError")
