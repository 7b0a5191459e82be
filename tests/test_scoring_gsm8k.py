"""GSM8K extraction and exact match, case by case against lm-eval's rules."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_modelsweep.api.evaluation import request_for, scored_record
from pytest_modelsweep.client import parse_completion
from pytest_modelsweep.core.records import ApiRequest, Completion, ItemRecord
from pytest_modelsweep.data.gsm8k import Gsm8kProblem
from pytest_modelsweep.scoring.gsm8k import (
    flexible_extract,
    normalise,
    score_gsm8k,
    score_gsm8k_answer,
    strict_match,
    summarise_gsm8k,
)
from pytest_modelsweep.workloads.gsm8k import gsm8k_eval_item

ANSWER = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18"
BIG_ANSWER = "Total is 600+400 = <<600+400=1000>>1000 dollars.\n#### 1,000"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so she makes 18 dollars.\n#### 18", "18"),
        ("#### 1,000", "1,000"),
        ("#### -5", "-5"),
        ("#### 3.50.", "3.50."),
        ("#### 7\nQuestion: ... #### 9", "7"),  # first match
        ("The answer is 18", None),  # strict needs '#### '
        ("####18", None),  # ... with its space
        ("#### $18", None),  # '$' is not in the strict class
    ],
)
def test_strict_match(text: str, expected: str | None) -> None:
    assert strict_match(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3 apples and 5 pears make 8", "8"),  # last match, from the single-digit group
        ("She paid $1,234.50 in total", "$1,234.50"),
        ("It fell to -7 degrees", "-7"),
        ("The answer is 42.", "42."),
        ("18 eggs, minus 3, leaves 15 eggs", "15"),
        ("The answer is 42. Wait...", "..."),  # lm-eval takes '...' as the last 2+ char token
        ("no number here", None),
        ("", None),
    ],
)
def test_flexible_extract(text: str, expected: str | None) -> None:
    assert flexible_extract(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,000", "1000"),
        ("$18.", "18"),
        ("18..", "18."),  # only the one final period goes
        ("ABC", "abc"),
        (ANSWER, "18"),
        ("step one #### 5 and #### 6", "6"),  # greedy up to the last '#### '
        (" 18 ", " 18 "),  # nothing is stripped
    ],
)
def test_normalise(text: str, expected: str) -> None:
    assert normalise(text) == expected


def test_the_reference_is_the_whole_answer_field_normalised() -> None:
    assert normalise(ANSWER) == "18"
    assert normalise(BIG_ANSWER) == "1000"
    assert score_gsm8k("#### 1000", BIG_ANSWER).strict_correct


def test_score_strict_and_flexible() -> None:
    both = score_gsm8k("9 * 2 = 18\n#### 18", ANSWER)
    assert (both.strict_correct, both.flexible_correct) == (True, True)
    assert (both.strict_extracted, both.flexible_extracted) == ("18", "18")

    flexible_only = score_gsm8k("She makes $18.", ANSWER)
    assert (flexible_only.strict_correct, flexible_only.flexible_correct) == (False, True)
    assert flexible_only.strict_extracted is None and flexible_only.flexible_extracted is not None

    commas = score_gsm8k("#### 1,000", BIG_ANSWER)
    assert commas.strict_correct and commas.flexible_correct

    decimals = score_gsm8k("#### 18.00", ANSWER)  # no numeric conversion in lm-eval
    assert not decimals.strict_correct and not decimals.flexible_correct

    last_number_wins = score_gsm8k("#### 18\nQuestion: 5 more", ANSWER)
    assert last_number_wins.strict_correct and not last_number_wins.flexible_correct

    nothing = score_gsm8k("I don't know", ANSWER)
    assert nothing.strict_extracted is None and nothing.flexible_extracted is None  # [invalid]
    assert not nothing.strict_correct and not nothing.flexible_correct


PROBLEM = Gsm8kProblem(
    item_id="gsm8k-test-0000", index=0, split="test", question="Q?", answer=ANSWER
)
ITEM = gsm8k_eval_item(PROBLEM, ())
CHAT = request_for(ITEM, "chat")
COMPLETION = request_for(ITEM, "completion")


def chat_response(content: Any, finish: str = "stop") -> dict[str, Any]:
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30},
    }


def answer(request: ApiRequest, response: Any) -> Completion:
    """The completion the client reads from this response body."""
    return parse_completion(request.path, response)


def scored(request: ApiRequest, completion: Completion) -> ItemRecord:
    """The item's record as the gsm8k bench makes it: ``evaluate``'s scored_record with
    the GSM8K scorer."""
    return scored_record("gsm8k", score_gsm8k_answer, ITEM, request, completion)


def test_score_chat_response_fills_the_record() -> None:
    record = scored(CHAT, answer(CHAT, chat_response("2 * 9 = 18\n#### 18")))
    assert record == ItemRecord(
        item_id="gsm8k-test-0000",
        prompt_hash=CHAT.prompt_hash,
        correct=True,
        response="2 * 9 = 18\n#### 18",
        data_hash=PROBLEM.data_hash,
        extracted={"strict-match": "18", "flexible-extract": "18"},
        finish_reason="stop",
        prompt_tokens=120,
        completion_tokens=30,
        scores={"strict-match": True, "flexible-extract": True},
        error=None,
        completion=Completion(
            text="2 * 9 = 18\n#### 18",
            finish_reason="stop",
            prompt_tokens=120,
            completion_tokens=30,
        ),
    )


def test_correct_follows_flexible_extract() -> None:
    record = scored(CHAT, answer(CHAT, chat_response("The total is 18", "length")))
    assert record.correct is True
    assert record.scores == {"strict-match": False, "flexible-extract": True}
    assert record.extracted == {"strict-match": None, "flexible-extract": "18"}
    assert record.finish_reason == "length"


def test_score_completion_response_reads_text() -> None:
    response = {"choices": [{"text": " 9 * 2 = 18\n#### 18", "finish_reason": "stop"}]}
    record = scored(COMPLETION, answer(COMPLETION, response))
    assert record.correct and record.response == " 9 * 2 = 18\n#### 18"
    assert (record.prompt_tokens, record.completion_tokens) == (None, None)
    assert record.prompt_hash == COMPLETION.prompt_hash != CHAT.prompt_hash


@pytest.mark.parametrize(
    ("request_", "completion", "reason"),
    [
        (CHAT, Completion.failed("connection refused"), "connection refused"),
        (CHAT, answer(CHAT, {"choices": []}), "response has no choices"),
        (CHAT, answer(CHAT, {"error": {"message": "boom"}}), "response has no choices"),
        (
            CHAT,
            answer(CHAT, chat_response(None)),
            "choices[0].message.content is NoneType, not a string",
        ),
        (CHAT, answer(CHAT, chat_response(18)), "choices[0].message.content is int, not a string"),
        (
            COMPLETION,
            answer(COMPLETION, chat_response("#### 18")),
            "choices[0].text is NoneType, not a string",
        ),
        (CHAT, answer(CHAT, {"choices": ["#### 18"]}), "choices[0] is not an object"),
        (
            CHAT,
            Completion(text="#### 18", error="HTTP 500"),
            "HTTP 500",
        ),  # an error wins over a text
    ],
)
def test_garbage_gives_an_errored_wrong_record(
    request_: ApiRequest, completion: Completion, reason: str
) -> None:
    record = scored(request_, completion)
    assert record.correct is False and record.outcome == "failed"
    assert record.error == reason
    assert (record.scores, record.extracted) == (
        {},
        None,
    )  # never scored: no verdict of either filter
    assert record.item_id == PROBLEM.item_id and record.data_hash == PROBLEM.data_hash


def test_summarise() -> None:
    records = [
        scored(CHAT, answer(CHAT, chat_response("#### 18"))),
        scored(CHAT, answer(CHAT, chat_response("it is 18", "length"))),
        scored(CHAT, answer(CHAT, chat_response("no idea"))),
        scored(CHAT, Completion.failed("timeout")),
    ]
    # the timed-out item got no answer: it is counted as failed and never scored, so the
    # rates are over the 3 answered items
    assert summarise_gsm8k(records) == {
        "n": 3,
        "items": 4,
        "failed": 1,
        "accuracy": 2 / 3,
        "strict_match_accuracy": 1 / 3,
        "flexible_extract_accuracy": 2 / 3,
        "strict_match_invalid_rate": 2 / 3,
        "flexible_extract_invalid_rate": 1 / 3,
        "truncated_rate": 1 / 3,
    }
    assert [r.outcome for r in records] == ["correct", "correct", "wrong", "failed"]
    assert summarise_gsm8k([])["n"] == 0
