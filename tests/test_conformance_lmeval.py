"""GSM8K requests and scores against lm-evaluation-harness itself, run end to end.

``tests/reference/lmeval_gsm8k.py`` runs lm-eval 0.4.13's unmodified ``gsm8k`` task
(``local-completions`` / ``local-chat-completions``, default seeds) against a server that
records each request and answers problem ``i`` with ``responses[i]``. Here the same
problems go through the gsm8k bench's path (``gsm8k_eval_item`` rendered by ``request_for``,
answers read by the client's ``parse_completion`` and scored by ``scored_record`` with
``score_gsm8k_answer``, as the ``evaluate`` fixture does), and every request body, every
filtered answer and every ``exact_match`` must be identical.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.paths import SHARED_DATA
from support.reference_impls import run_reference

from pytest_modelsweep.api.evaluation import request_for, scored_record
from pytest_modelsweep.client import parse_completion
from pytest_modelsweep.core.sweep import ModelSource, ModelSpec, Prompting
from pytest_modelsweep.data.gsm8k import load_gsm8k
from pytest_modelsweep.scoring.gsm8k import INVALID, score_gsm8k_answer
from pytest_modelsweep.workloads.gsm8k import Gsm8kFewshot, build_gsm8k_request, gsm8k_eval_item

DATA = SHARED_DATA / "gsm8k"
MAX_TOKENS = 2048
FILTERS = ("strict-match", "flexible-extract")

# Generations chosen to exercise both filters and exact_match's normalisation; {g} is the
# gold number, {g1} a different one, {gc} the gold number with thousands separators.
RESPONSE_TEMPLATES: tuple[str, ...] = (
    "{worked}",  # the reference solution itself
    "The answer is {g}.",  # no ####: strict invalid; flexible takes "{g}." and drops the dot
    "So the total is {g1}.\n#### {g}",
    "#### {g}\n\nQuestion: What is 7 + 8?\nAnswer: 15",  # strict takes the first, flexible the last
    "I cannot tell.",  # no number at all
    "She pays ${gc}.00 in total.",  # "$...00": the cents survive normalisation
    "#### ${g}",  # strict's pattern has no "$": invalid
    "####{g}",  # no space after ####
    "It is -{g}.",  # a sign of its own
    "#### {g} #### {g1}",
    "Answer: {gc}",  # thousands separators are ignored
    "{g1}, then {g}, then 7",
    "#### {g}.",
    "First 3.5 then {g}...",
    "THE ANSWER IS {g}",
    "",
)
LIMIT_COMPLETION = 3 * len(RESPONSE_TEMPLATES)
LIMIT_CHAT = len(RESPONSE_TEMPLATES)


def model_spec(prompting: Prompting) -> ModelSpec:
    return ModelSpec(
        name="m",
        source=ModelSource("embedded", "m"),
        served_name="m",
        license="mit",
        prompting=prompting,
        tool_call_parser=None,
        bfcl_mode="prompt",
    )


def gold_number(answer: str) -> str:
    return answer.rsplit("#### ", 1)[1].strip()


def response_for(index: int, answer: str) -> str:
    gold = gold_number(answer)
    value = int(gold.replace(",", ""))
    return RESPONSE_TEMPLATES[index % len(RESPONSE_TEMPLATES)].format(
        worked=answer, g=value, g1=value + 1, gc=f"{value:,}"
    )


def openai_response(text: str, chat: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {"choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


@pytest.fixture(scope="module", params=["completion", "chat"])
def lmeval_run(request: pytest.FixtureRequest) -> tuple[Prompting, list[Any], dict[str, Any]]:
    """(prompting, problems, lm-eval's per-problem request and filter results) for one run."""
    prompting: Prompting = request.param
    if not (DATA / "test.jsonl").is_file():
        pytest.fail(f"shared GSM8K data not found at {DATA}; these tests read the real test split")
    limit = LIMIT_COMPLETION if prompting == "completion" else LIMIT_CHAT
    problems = load_gsm8k(DATA / "test.jsonl")[:limit]
    reference = run_reference(
        "lmeval_gsm8k.py",
        {
            "test": str(DATA / "test.jsonl"),
            "train": str(DATA / "train.jsonl"),
            "limit": limit,
            "prompting": prompting,
            "max_tokens": MAX_TOKENS,
            "responses": [response_for(p.index, p.answer) for p in problems],
        },
    )
    assert sorted(int(k) for k in reference) == list(range(limit)), (
        "lm-eval did not answer every problem"
    )
    return prompting, problems, reference


def test_requests_are_lm_evals_byte_for_byte(
    lmeval_run: tuple[Prompting, list[Any], dict[str, Any]],
) -> None:
    prompting, problems, reference = lmeval_run
    fewshot = Gsm8kFewshot(load_gsm8k(DATA / "train.jsonl", split="train"))
    for problem in problems:
        ours = build_gsm8k_request(problem, model_spec(prompting), fewshot, max_tokens=MAX_TOKENS)
        theirs = dict(reference[str(problem.index)]["request"])
        assert theirs.pop("model") == "m"
        assert ours.path == (
            "/v1/completions" if prompting == "completion" else "/v1/chat/completions"
        )
        assert ours.payload == theirs, f"{problem.item_id}: request differs from lm-eval's"


def test_scores_are_lm_evals(lmeval_run: tuple[Prompting, list[Any], dict[str, Any]]) -> None:
    prompting, problems, reference = lmeval_run
    fewshot = Gsm8kFewshot(load_gsm8k(DATA / "train.jsonl", split="train"))
    outcomes: dict[str, set[bool]] = {name: set() for name in FILTERS}
    invalid: dict[str, int] = dict.fromkeys(FILTERS, 0)
    for problem in problems:
        item = gsm8k_eval_item(problem, fewshot.exemplars(problem), max_tokens=MAX_TOKENS)
        request = request_for(item, prompting)
        text = response_for(problem.index, problem.answer)
        completion = parse_completion(request.path, openai_response(text, prompting == "chat"))
        record = scored_record("gsm8k", score_gsm8k_answer, item, request, completion)
        assert record.error is None, f"{problem.item_id}: {record.error}"
        for name in FILTERS:
            theirs = reference[str(problem.index)]["filters"][name]
            extracted = record.extracted[name]
            assert (INVALID if extracted is None else extracted) == theirs["filtered"], (
                f"{problem.item_id} {name} on {text!r}: we extract {extracted!r}, lm-eval {theirs['filtered']!r}"
            )
            assert record.scores[name] == bool(theirs["exact_match"]), (
                f"{problem.item_id} {name} on {text!r}: we score {record.scores[name]}, lm-eval {theirs['exact_match']}"
            )
            outcomes[name].add(record.scores[name])
            invalid[name] += theirs["filtered"] == INVALID
        assert record.correct == record.scores["flexible-extract"]
    # the cases must exercise both outcomes and an [invalid] of each filter, or they prove little
    assert outcomes == {name: {True, False} for name in FILTERS}
    assert all(invalid.values()), invalid
