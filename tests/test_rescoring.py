"""Stored answers are scored again by the current scorer when a run reuses them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from paths import SHARED_DATA

from pytest_modelsweep.records import ItemRecord
from pytest_modelsweep.scoring import response_from_record
from pytest_modelsweep.scoring.bfcl import score_bfcl_response
from pytest_modelsweep.scoring.gsm8k import score_gsm8k_response
from pytest_modelsweep.serving.endpoint import Endpoint, Provenance
from pytest_modelsweep.store import Store
from pytest_modelsweep.sweep import ModelSource, ModelSpec, Prompting
from pytest_modelsweep.workloads.accuracy import run_accuracy
from pytest_modelsweep.workloads.bfcl import BfclRecord, build_bfcl_request, load_bfcl
from pytest_modelsweep.workloads.gsm8k import Gsm8kProblem, build_gsm8k_request

PROBLEM = Gsm8kProblem("gsm8k-test-0000", 0, "test", "How many?", "2 + 3 = 5\n#### 5")
EXEMPLARS = (Gsm8kProblem("gsm8k-train-0000", 0, "train", "One?", "#### 1"),)


def spec(prompting: Prompting = "chat", bfcl_mode: str = "prompt", parser: str | None = None) -> ModelSpec:
    return ModelSpec(name="m", source=ModelSource("embedded", "m"), served_name="m", license="mit",
                     prompting=prompting, tool_call_parser=parser, bfcl_mode=bfcl_mode)  # type: ignore[arg-type]


def openai(text: str | None, *, chat: bool, finish: str = "stop", tool_calls: Any = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
        if tool_calls is not None:
            choice["message"]["tool_calls"] = tool_calls
    else:
        choice["text"] = text
    return {"choices": [choice], "usage": {"prompt_tokens": 11, "completion_tokens": 7}}


@pytest.fixture(scope="module")
def bfcl_record() -> BfclRecord:
    return load_bfcl(SHARED_DATA / "bfcl")[0]


@pytest.mark.parametrize("prompting", ["chat", "completion"])
@pytest.mark.parametrize("text,finish", [
    ("So 2 + 3 = 5.\n#### 5", "stop"), ("The answer is 6.", "stop"), ("", "length"), ("#### $1,000.", "stop"),
])
def test_gsm8k_records_rescore_to_themselves(prompting: Prompting, text: str, finish: str) -> None:
    request = build_gsm8k_request(PROBLEM, spec(prompting), EXEMPLARS)
    record = score_gsm8k_response(PROBLEM, request, openai(text, chat=prompting == "chat", finish=finish), None)
    assert score_gsm8k_response(PROBLEM, request, response_from_record(request, record), None) == record


def tool_call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}


def bfcl_cases(record: BfclRecord) -> list[tuple[str, dict[str, Any]]]:
    name = record.function[0]["name"]
    params = {k: next(v for v in accepted if v != "") for k, accepted in record.ground_truth[0][name].items()
              if any(v != "" for v in accepted)}
    call_text = f"[{name}(" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + ")]"
    return [
        ("prompt", openai(call_text, chat=True)),
        ("prompt", openai("I cannot help.", chat=True)),
        ("prompt", openai("[f(a=1), g(b=2)]", chat=True, finish="length")),
        ("tools", openai(None, chat=True, tool_calls=[tool_call(name.replace(".", "_"), json.dumps(params))])),
        ("tools", openai(None, chat=True, tool_calls=[tool_call(name, "{not json")])),
        ("tools", openai("No tool needed.", chat=True)),
        ("tools", openai("", chat=True)),
        ("tools", openai(None, chat=True, tool_calls=[tool_call("a", "{}"), tool_call("b", "{}")])),
    ]


def test_bfcl_records_rescore_to_themselves(bfcl_record: BfclRecord) -> None:
    verdicts = set()
    for mode, response in bfcl_cases(bfcl_record):
        model = spec(bfcl_mode=mode, parser="hermes" if mode == "tools" else None)
        request = build_bfcl_request(bfcl_record, model)
        record = score_bfcl_response(bfcl_record, request, response, None, mode=mode)  # type: ignore[arg-type]
        again = score_bfcl_response(bfcl_record, request, response_from_record(request, record), None,
                                    mode=mode)  # type: ignore[arg-type]
        assert again == record, (mode, response)
        verdicts.add((mode, record.correct))
    assert verdicts == {("prompt", True), ("prompt", False), ("tools", True), ("tools", False)}


def test_a_reused_answer_gets_the_current_verdict_and_the_store_is_updated(tmp_path: Any) -> None:
    store = Store(tmp_path / "s.sqlite")
    endpoint = Endpoint(spec(), "http://127.0.0.1:9", "m", 4096, "llamacpp", Provenance("test", "0", "m"))
    request = build_gsm8k_request(PROBLEM, spec(), EXEMPLARS)
    key = endpoint.provenance.cache_key()
    right = score_gsm8k_response(PROBLEM, request, openai("#### 5", chat=True), None)
    # as an older scorer might have stored it: the same answer, the opposite verdict
    stale = ItemRecord(**{**right.to_dict(), "correct": False,
                          "scores": {"strict-match": False, "flexible-extract": False}})
    store.add_item("run-1", "m", "gsm8k", key, stale)
    lines: list[str] = []
    run = run_accuracy(endpoint, "gsm8k", [PROBLEM], lambda p: build_gsm8k_request(p, spec(), EXEMPLARS),
                       score_gsm8k_response, store=store, run_id="run-2", progress=lines.append)
    assert (run.sent, run.reused) == (0, 1)  # nothing was sent: port 9 would have refused it
    assert run.records == [right]
    assert store.stored_items(key, "gsm8k", [(PROBLEM.item_id, request.prompt_hash)])[PROBLEM.item_id] == right
    assert store.run_items("run-2", "m", "gsm8k") == [right]
    assert lines[0] == "gsm8k m: reused 1 stored items (1 scored differently now), sending 0"
