"""BFCL decoding and the simple AST checker, rule by rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from support.requirements import SHARED_DATA_HINT, need

from pytest_modelsweep.api.evaluation import EvalItem, scored_record
from pytest_modelsweep.client import parse_completion
from pytest_modelsweep.core.records import ApiRequest, Completion, ItemRecord
from pytest_modelsweep.core.sweep import BfclMode, ModelSource, ModelSpec, Prompting
from pytest_modelsweep.data.bfcl import BfclRecord, load_bfcl
from pytest_modelsweep.scoring.bfcl import (
    BfclCheck,
    BfclDecodeError,
    check_simple,
    decode_prompt_output,
    decode_tool_calls,
    is_function_calling_format,
    score_bfcl_answer,
    standardize_string,
    summarise_bfcl,
)
from pytest_modelsweep.workloads.bfcl import bfcl_eval_item, build_bfcl_request

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bfcl"


def doc(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": "d",
        "parameters": {"type": "dict", "properties": properties, "required": required},
    }


HYPOT = doc(
    "math.hypot",
    {"x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"}},
    ["x", "y"],
)
HYPOT_GT: list[dict[str, dict[str, list[Any]]]] = [
    {"math.hypot": {"x": [4], "y": [5], "z": ["", 0]}}
]

MIXED = doc(
    "plan_trip",
    {
        "city": {"type": "string"},
        "rate": {"type": "float"},
        "days": {"type": "integer"},
        "coords": {"type": "tuple", "items": {"type": "float"}},
        "stops": {"type": "array", "items": {"type": "string"}},
        "flexible": {"type": "boolean"},
        "unit": {"type": "string"},
        "note": {"type": "string"},
    },
    ["city", "rate"],
)
MIXED_GT: list[dict[str, dict[str, list[Any]]]] = [
    {
        "plan_trip": {
            "city": ["New York City", "NYC"],
            "rate": [0.5],
            "days": [3, ""],
            "coords": [[40.7, -74.0]],
            "stops": [["Times Square", "Central Park"], ""],
            "flexible": [True, ""],
            "unit": ["miles"],
        }
    }
]

DB = doc(
    "db.fetch",
    {
        "conditions": {
            "type": "dict",
            "properties": {"department": {"type": "string"}, "school": {"type": "string"}},
        },
        "filters": {"type": "array", "items": {"type": "dict"}},
        "limit": {"type": "integer"},
    },
    ["conditions"],
)
DB_GT: list[dict[str, dict[str, list[Any]]]] = [
    {
        "db.fetch": {
            "conditions": [
                {"department": ["Science"], "school": ["Bluebird High School", "Bluebird HS", ""]}
            ],
            "filters": [[{"field": ["age"], "op": [">"]}, {"field": ["job"], "op": ["="]}], ""],
            "limit": ["", 0],
        }
    }
]


def check(function: dict[str, Any], gt: list[Any], call: dict[str, Any], **kw: bool) -> BfclCheck:
    return check_simple([function], [call], gt, **kw)


def mixed(**params: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"city": "NYC", "rate": 0.5, "coords": [40.7, -74.0], "unit": "miles"}
    base.update(params)
    return {"plan_trip": {k: v for k, v in base.items() if v is not None}}


def test_a_correct_call_is_valid() -> None:
    assert check(HYPOT, HYPOT_GT, {"math.hypot": {"x": 4, "y": 5}}) == BfclCheck(True, "", "")
    assert check(HYPOT, HYPOT_GT, {"math.hypot": {"x": 4, "y": 5, "z": 0}}).valid
    assert check(MIXED, MIXED_GT, mixed()).valid


def test_wrong_count() -> None:
    none = check_simple([HYPOT], [], HYPOT_GT)
    two = check_simple([HYPOT], [{"math.hypot": {"x": 4, "y": 5}}] * 2, HYPOT_GT)
    assert none.error_type == two.error_type == "simple_function_checker:wrong_count"
    assert not none.valid and not two.valid


def test_function_name_dot_and_underscore() -> None:
    underscored = {"math_hypot": {"x": 4, "y": 5}}
    dotted = {"math.hypot": {"x": 4, "y": 5}}
    assert check(HYPOT, HYPOT_GT, underscored, underscore_to_dot=True).valid  # tools mode
    assert check(HYPOT, HYPOT_GT, dotted).valid  # prompt mode
    assert (
        check(HYPOT, HYPOT_GT, underscored).error_type == "simple_function_checker:wrong_func_name"
    )
    assert check(HYPOT, HYPOT_GT, {"math.hypotenuse": {"x": 4, "y": 5}}).error_type == (
        "simple_function_checker:wrong_func_name"
    )


def test_missing_required() -> None:
    result = check(HYPOT, HYPOT_GT, {"math.hypot": {"x": 4}})
    assert (result.valid, result.error_type) == (False, "simple_function_checker:missing_required")
    assert "'y'" in result.error


def test_unexpected_parameter() -> None:
    outside_schema = check(HYPOT, HYPOT_GT, {"math.hypot": {"x": 4, "y": 5, "w": 1}})
    assert outside_schema.error_type == "simple_function_checker:unexpected_param"
    # in the schema but with no accepted answer at all
    no_answer = check(MIXED, MIXED_GT, mixed(note="hi"))
    assert no_answer.error_type == "simple_function_checker:unexpected_param"


def test_omitted_optional_with_and_without_empty_answer() -> None:
    assert check(MIXED, MIXED_GT, mixed()).valid  # days, stops, flexible allow ""
    no_unit = check(MIXED, MIXED_GT, mixed(unit=None))  # 'unit' has no "" among its answers
    assert (no_unit.valid, no_unit.error_type) == (
        False,
        "simple_function_checker:missing_optional",
    )


def test_int_for_float_accepted_float_for_int_rejected() -> None:
    assert check(
        MIXED, [{"plan_trip": {**MIXED_GT[0]["plan_trip"], "rate": [2.0]}}], mixed(rate=2)
    ).valid
    float_for_int = check(MIXED, MIXED_GT, mixed(days=3.0))
    assert (float_for_int.valid, float_for_int.error_type) == (False, "type_error:simple")
    bool_for_int = check(MIXED, MIXED_GT, mixed(days=True))
    assert bool_for_int.error_type == "type_error:simple"
    string_for_float = check(MIXED, MIXED_GT, mixed(rate="0.5"))
    assert string_for_float.error_type == "type_error:simple"


def test_tuple_accepted_as_list_and_as_tuple() -> None:
    assert check(MIXED, MIXED_GT, mixed(coords=(40.7, -74.0))).valid
    assert check(MIXED, MIXED_GT, mixed(coords=[40.7, -74.0])).valid
    assert (
        check(MIXED, MIXED_GT, mixed(coords=[-74.0, 40.7])).error_type == "value_error:list/tuple"
    )
    nested = check(MIXED, MIXED_GT, mixed(coords=["40.7", "-74.0"]))
    assert nested.error_type == "type_error:nested"


def test_string_standardisation() -> None:
    assert standardize_string("New York-City, U.S.A_*^/") == "newyorkcityusa"
    assert standardize_string("it's") == 'it"s'
    assert check(MIXED, MIXED_GT, mixed(city="new york city")).valid
    assert check(MIXED, MIXED_GT, mixed(city="New-York_City.")).valid
    assert check(MIXED, MIXED_GT, mixed(city="n.y.c.")).valid
    wrong = check(MIXED, MIXED_GT, mixed(city="Boston"))
    assert (wrong.valid, wrong.error_type) == (False, "value_error:string")


def test_lists_are_order_sensitive_and_standardised() -> None:
    assert check(MIXED, MIXED_GT, mixed(stops=["times square", "Central-Park"])).valid
    swapped = check(MIXED, MIXED_GT, mixed(stops=["Central Park", "Times Square"]))
    assert (swapped.valid, swapped.error_type) == (False, "value_error:list/tuple")
    assert check(MIXED, MIXED_GT, mixed(stops=[])).valid  # BFCL reads the "" answer as []


def test_other_values_compare_exactly() -> None:
    assert check(MIXED, MIXED_GT, mixed(flexible=True)).valid
    assert check(MIXED, MIXED_GT, mixed(flexible=False)).error_type == "value_error:others"
    assert check(MIXED, MIXED_GT, mixed(rate=0.25)).error_type == "value_error:others"
    assert (
        check(HYPOT, HYPOT_GT, {"math.hypot": {"x": 4, "y": 6}}).error_type == "value_error:others"
    )


def test_nested_dict() -> None:
    good = {"db.fetch": {"conditions": {"department": "science", "school": "Bluebird HS"}}}
    assert check(DB, DB_GT, good).valid
    optional_key = {"db.fetch": {"conditions": {"department": "Science"}}}
    assert check(DB, DB_GT, optional_key).valid
    wrong_value = {"db.fetch": {"conditions": {"department": "Arts", "school": "Bluebird HS"}}}
    assert check(DB, DB_GT, wrong_value).error_type == "value_error:dict_value"
    extra_key = {"db.fetch": {"conditions": {"department": "Science", "year": "2024"}}}
    assert check(DB, DB_GT, extra_key).error_type == "value_error:dict_key"
    missing_key = {"db.fetch": {"conditions": {"school": "Bluebird HS"}}}
    assert check(DB, DB_GT, missing_key).error_type == "value_error:dict_key"
    not_a_dict = {"db.fetch": {"conditions": "Science"}}
    assert check(DB, DB_GT, not_a_dict).error_type == "type_error:simple"


def test_list_of_dicts() -> None:
    rows = [{"field": "age", "op": ">"}, {"field": "job", "op": "="}]
    assert check(
        DB, DB_GT, {"db.fetch": {"conditions": {"department": "Science"}, "filters": rows}}
    ).valid
    reversed_rows = {"db.fetch": {"conditions": {"department": "Science"}, "filters": rows[::-1]}}
    # BFCL reports the last answer tried: here the "" answer, read as an empty list
    assert check(DB, DB_GT, reversed_rows).error_type == "value_error:list_dict_count"
    required_filters = [
        {"db.fetch": {**DB_GT[0]["db.fetch"], "filters": DB_GT[0]["db.fetch"]["filters"][:1]}}
    ]
    assert check(DB, required_filters, reversed_rows).error_type == "value_error:dict_value"
    one_row = {"db.fetch": {"conditions": {"department": "Science"}, "filters": rows[:1]}}
    assert check(DB, DB_GT, one_row).error_type == "value_error:list_dict_count"


# --- prompt-mode decoding -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[math.factorial(number=5)]", [{"math.factorial": {"number": 5}}]),
        ("math.factorial(number=5)", [{"math.factorial": {"number": 5}}]),  # missing brackets
        ("```\n[f(a=1)]\n```", [{"f": {"a": 1}}]),
        (
            "  [f(a=-1.5, b='x', c=\"y\", d=True, e=None)]\n",
            [{"f": {"a": -1.5, "b": "x", "c": "y", "d": True, "e": None}}],
        ),
        (
            "[f(a=[1, [2, 3]], b={'k': 'v'}, c=(1, 2))]",
            [{"f": {"a": [1, [2, 3]], "b": {"k": "v"}, "c": (1, 2)}}],
        ),
        ("[f(a=1), g.h.i(b=2)]", [{"f": {"a": 1}}, {"g.h.i": {"b": 2}}]),
        ("[f(5, a=1)]", [{"f": {"a": 1}}]),  # positional arguments are dropped, as BFCL does
        (
            "[f(a=my_data, b=np.array([1]), c=x[0])]",
            [{"f": {"a": "my_data", "b": "np.array([1])", "c": "x[0]"}}],
        ),
        ("[f(a=2*3, b=1/4, c='a'+'b')]", [{"f": {"a": 6, "b": 0.25, "c": "ab"}}]),
        ("[f(a=g(b=1))]", [{"f": {"a": {"g": {"b": 1}}}}]),
        ("[f()]", [{"f": {}}]),
        ("", []),
        # BFCL's quirks, kept: **x lands under the key None; "not"/"~" negate like "-"
        ("[f(a=1, **kw)]", [{"f": {"a": 1, None: "kw"}}]),
        ("[f(a=not True, b=~5)]", [{"f": {"a": -1, "b": -5}}]),
        (
            "[f(a=2**100, b=[1]+[2], c=1<<3, d=(1<2)+1)]",
            [{"f": {"a": 2**100, "b": [1, 2], "c": 8, "d": 2}}],
        ),
    ],
)
def test_decode_prompt_output(text: str, expected: Any) -> None:
    assert decode_prompt_output(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I cannot answer that.",
        "```python\n[f(a=1)]\n```",  # BFCL only strips backticks, so the 'python' tag breaks it
        "[f(a=1]",
        "[1, 2]",
        "[f(a=1), 'text']",
        "[f(a=10**100000)]",
        "[f(a='x'*10**9)]",
        "[f(a='%0999999999d' % 1)]",
        "[f(a='%*d' % (10**9, 1))]",  # a width taken from the arguments
        "[f(a=b'%.*f' % (10**9, 1.0))]",
        "[f(a=lambda: 1)]",
        "[f(a=abs(-2)+1)]",  # BFCL evals names in expressions; we evaluate literals only
        "[f(a={[1]: 2})]",
        "[f(a=not x)]",
        "[" * 500 + "f(a=1)" + "]" * 500,
    ],
)
def test_decode_prompt_output_rejects(text: str) -> None:
    with pytest.raises(BfclDecodeError):
        decode_prompt_output(text)


def test_is_function_calling_format() -> None:
    assert is_function_calling_format([]) and is_function_calling_format([{"f": {"a": 1}}])
    assert not is_function_calling_format([{"f": [1]}])
    assert not is_function_calling_format([{"f": {}, "g": {}}])
    assert not is_function_calling_format({"f": {}})


def tool_message(*calls: tuple[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls)
        ],
    }


def chat_answer(message: Any) -> Completion:
    """The completion the client reads from a chat response with this message."""
    return parse_completion("/v1/chat/completions", {"choices": [{"index": 0, "message": message}]})


def test_decode_tool_calls() -> None:
    message = tool_message(("math_hypot", '{"x": 4, "y": 5.0}'))
    assert decode_tool_calls(chat_answer(message)) == [{"math_hypot": {"x": 4, "y": 5.0}}]
    with pytest.raises(BfclDecodeError, match="not JSON"):
        decode_tool_calls(chat_answer(tool_message(("f", "{x: 1"))))
    with pytest.raises(BfclDecodeError, match="not a JSON string"):
        decode_tool_calls(chat_answer(tool_message(("f", {"x": 1}))))
    with pytest.raises(BfclDecodeError, match="has no function name"):
        decode_tool_calls(
            chat_answer({"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]})
        )
    with pytest.raises(
        BfclDecodeError, match=r"no tool calls in the response \(content: 'hello'\)"
    ):
        decode_tool_calls(chat_answer({"role": "assistant", "content": "hello"}))
    with pytest.raises(BfclDecodeError, match=r"no tool calls in the response \(content: None\)"):
        decode_tool_calls(chat_answer({"role": "assistant", "content": None}))
    # as BFCL's OpenAI handler: no calls at all, which the checker counts as the wrong number
    assert decode_tool_calls(chat_answer(tool_message())) == []
    assert decode_tool_calls(chat_answer({"role": "assistant", "content": ""})) == []


# --- scored records -----------------------------------------------------------------------

RECORD = BfclRecord(
    id="simple_python_2",
    question=[[{"role": "user", "content": "hypotenuse of 4 and 5?"}]],
    function=[HYPOT],
    ground_truth=HYPOT_GT,
)


class Asked(NamedTuple):
    """RECORD as the bfcl bench asks one kind of model: its item and the request sent for it."""

    item: EvalItem
    request: ApiRequest

    def answer(self, response: Any) -> Completion:
        """The completion the client reads from this response body."""
        return parse_completion(self.request.path, response)

    def scored(self, completion: Completion) -> ItemRecord:
        """The item's record as ``evaluate`` makes it with the BFCL scorer."""
        return scored_record("bfcl", score_bfcl_answer, self.item, self.request, completion)


def asked(mode: BfclMode, prompting: Prompting = "chat") -> Asked:
    model = ModelSpec(
        name="m",
        source=ModelSource("embedded", "m"),
        served_name="m",
        license="mit",
        prompting=prompting,
        tool_call_parser="hermes" if mode == "tools" else None,
        bfcl_mode=mode,
    )
    return Asked(bfcl_eval_item(RECORD, model), build_bfcl_request(RECORD, model))


TOOLS = asked("tools")
CHAT = asked("prompt")
TEXT = asked("prompt", "completion")


def reply(message: dict[str, Any], finish: str = "tool_calls") -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 12},
    }


def test_the_three_ways_of_asking_are_bfcls_modes() -> None:
    assert (TOOLS.request.path, "tools" in TOOLS.request.payload) == ("/v1/chat/completions", True)
    assert (CHAT.request.path, "tools" in CHAT.request.payload) == ("/v1/chat/completions", False)
    assert TEXT.request.path == "/v1/completions"


def test_tools_mode_correct() -> None:
    item = TOOLS.scored(TOOLS.answer(reply(tool_message(("math_hypot", '{"x": 4, "y": 5}')))))
    assert item.correct and item.scores == {"ast": True} and item.error is None
    assert item.extracted == {
        "calls": [{"math_hypot": {"x": 4, "y": 5}}],
        "error_type": "",
        "error": "",
    }
    assert item.item_id == "simple_python_2" and item.data_hash == RECORD.data_hash
    assert item.prompt_hash == TOOLS.request.prompt_hash
    assert (item.prompt_tokens, item.completion_tokens, item.finish_reason) == (
        300,
        12,
        "tool_calls",
    )
    assert json.loads(item.response) == [
        {
            "id": "c0",
            "type": "function",
            "function": {"name": "math_hypot", "arguments": '{"x": 4, "y": 5}'},
        }
    ]


@pytest.mark.parametrize(
    ("message", "error_type"),
    [
        (tool_message(("math_hypot", "{x: 4}")), "ast_decoder:decoder_failed"),
        ({"role": "assistant", "content": "[math.hypot(x=4, y=5)]"}, "ast_decoder:decoder_failed"),
        (tool_message(("math_hypot", "[4, 5]")), "ast_decoder:decoder_wrong_output_format"),
        (
            tool_message(("math_hypot", '{"x": 4, "y": 5}'), ("math_hypot", '{"x": 4, "y": 5}')),
            "simple_function_checker:wrong_count",
        ),
        (
            tool_message(("math.hypot", '{"x": 4, "y": 5}')),
            "simple_function_checker:wrong_func_name",
        ),
        (tool_message(), "simple_function_checker:wrong_count"),
    ],
)
def test_tools_mode_wrong(message: dict[str, Any], error_type: str) -> None:
    item = TOOLS.scored(TOOLS.answer(reply(message)))
    assert item.correct is False and item.error is None
    assert item.extracted["error_type"] == error_type


def test_prompt_mode_chat_and_completion() -> None:
    good = reply({"role": "assistant", "content": "[math.hypot(x=4, y=5)]"}, "stop")
    item = CHAT.scored(CHAT.answer(good))
    assert item.correct and item.response == "[math.hypot(x=4, y=5)]"
    assert item.extracted["calls"] == [{"math.hypot": {"x": 4, "y": 5}}]

    text = {"choices": [{"text": " math.hypot(x=4, y=5)]", "finish_reason": "stop"}]}
    assert TEXT.scored(TEXT.answer(text)).correct

    underscored = reply({"role": "assistant", "content": "[math_hypot(x=4, y=5)]"}, "stop")
    wrong_name = CHAT.scored(CHAT.answer(underscored))
    assert wrong_name.extracted["error_type"] == "simple_function_checker:wrong_func_name"

    prose = reply({"role": "assistant", "content": "The hypotenuse is 6.4"}, "stop")
    unparsed = CHAT.scored(CHAT.answer(prose))
    assert (unparsed.correct, unparsed.error) == (False, None)
    assert unparsed.extracted["error_type"] == "ast_decoder:decoder_failed"
    assert unparsed.extracted["calls"] is None and unparsed.response == "The hypotenuse is 6.4"


@pytest.mark.parametrize(
    ("asked_", "completion", "error_kind"),
    [
        (CHAT, Completion.failed("connection reset"), "request"),
        (CHAT, CHAT.answer({"choices": []}), "response"),
        (CHAT, CHAT.answer("not json"), "response"),
        # an answer without the text prompt mode needs: the client read it, the item has no answer
        (CHAT, CHAT.answer(reply({"role": "assistant", "content": None})), None),
        (TEXT, TEXT.answer(reply({"role": "assistant", "content": "[f()]"})), "response"),
    ],
)
def test_garbage_is_an_errored_wrong_item(
    asked_: Asked, completion: Completion, error_kind: str | None
) -> None:
    item = asked_.scored(completion)
    assert item.correct is False and item.error and item.outcome == "failed"
    # a failed item is never scored; why it failed is its completion's (BFCL's request_error /
    # response_error), kept so that it is sent again
    assert (item.extracted, item.scores) == (None, {})
    assert item.completion is not None and item.completion.error_kind == error_kind


def test_tools_mode_without_message_is_an_error() -> None:
    item = TOOLS.scored(TOOLS.answer({"choices": [{"text": "x"}]}))
    assert item.error == "choices[0].message is not an object"
    assert item.completion is not None and item.completion.error_kind == "response"


def test_summarise() -> None:
    items = [
        CHAT.scored(CHAT.answer(reply({"role": "assistant", "content": c})))
        for c in [
            "[math.hypot(x=4, y=5)]",
            "[math.hypot(x=4, y=5)]",
            "nope",
            "[math.hypot(x=4)]",
            "[]",
        ]
    ]
    items.append(CHAT.scored(Completion.failed("timeout")))
    # the timed-out item got no answer: failed, never scored (no request_error type)
    assert summarise_bfcl(items) == {
        "n": 5,
        "items": 6,
        "failed": 1,
        "correct": 2,
        "accuracy": 2 / 5,
        "error_types": {
            "ast_decoder:decoder_failed": 1,
            "simple_function_checker:missing_required": 1,
            "simple_function_checker:wrong_count": 1,
        },
        "parse_failures": 1,
    }
    assert [r.outcome for r in items].count("failed") == 1


def test_ground_truth_passes_on_every_real_record() -> None:
    need(DATA.is_dir(), f"shared BFCL data not found at {DATA}; {SHARED_DATA_HINT}")

    def concrete(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: concrete(next(a for a in v if a != ""))
                for k, v in value.items()
                if any(a != "" for a in v)
            }
        if isinstance(value, list):
            return [concrete(item) for item in value]
        return value

    failures = []
    for record in load_bfcl(DATA):
        name, answers = next(iter(record.ground_truth[0].items()))
        params = {
            k: concrete(next(a for a in v if a != ""))
            for k, v in answers.items()
            if any(a != "" for a in v)
        }
        result = check_simple(record.function, [{name: params}], record.ground_truth)
        if not result.valid:
            failures.append((record.id, result))
    assert failures == []
