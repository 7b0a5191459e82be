"""BFCL "simple" scoring and requests against BFCL's own code (bfcl-eval 2026.3.23), case by case.

``tests/reference/bfcl_reference.py`` runs BFCL's unmodified checker, decoders, evaluation
step and request building on the same inputs, once for the whole module. The inputs are
the 400 real records and model outputs generated from their possible answers with a
seeded ``random.Random``: the accepted values, then each kind of mistake the checker
distinguishes. Our verdicts must equal BFCL's: ``valid`` always, ``error_type`` whenever the
answer is wrong (error messages are ours by design).
"""

from __future__ import annotations

import copy
import functools
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from support.paths import SHARED_DATA
from support.reference_impls import run_reference
from support.requirements import SHARED_DATA_HINT, module_needs

from pytest_modelsweep.api.evaluation import EvalItem, scored_record
from pytest_modelsweep.client import parse_completion
from pytest_modelsweep.core.records import ApiRequest, Completion, ItemRecord
from pytest_modelsweep.core.sweep import BfclMode, ModelSource, ModelSpec, Prompting
from pytest_modelsweep.data.bfcl import BfclRecord, load_bfcl
from pytest_modelsweep.scoring.bfcl import (
    BfclDecodeError,
    Mode,
    check_simple,
    decode_prompt_output,
    decode_tool_calls,
    is_function_calling_format,
    score_bfcl_answer,
)
from pytest_modelsweep.workloads.bfcl import bfcl_eval_item, build_bfcl_request

DATA = SHARED_DATA / "bfcl"
module_requirement = module_needs(
    DATA.is_dir(), f"shared BFCL data not found at {DATA}; {SHARED_DATA_HINT}"
)
SEED = 20260323
MISSING = object()
"""A parameter left out of the call."""


# --- model outputs generated from the possible answers --------------------------------------


def first_accepted(accepted: list[Any]) -> Any:
    """The first accepted value that is not BFCL's "may be omitted" marker ``""``, or MISSING."""
    return next((value for value in accepted if value != ""), MISSING)


def concrete(answer: Any, schema: dict[str, Any]) -> Any:
    """A possible answer as a model would give it: nested dict answers hold lists of accepted values."""
    kind = schema.get("type")
    if kind == "dict" and isinstance(answer, dict):
        picked = {key: first_accepted(values) for key, values in answer.items()}
        return {key: value for key, value in picked.items() if value is not MISSING}
    items = schema.get("items") or {}
    if kind == "array" and items.get("type") == "dict" and isinstance(answer, list):
        return [concrete(item, items) for item in answer]
    return answer


def canonical_params(record: BfclRecord) -> dict[str, Any]:
    """The first accepted value of every parameter (parameters whose only answer is "" left out)."""
    properties = record.function[0]["parameters"]["properties"]
    params: dict[str, Any] = {}
    for name, accepted in answers_of(record).items():
        value = first_accepted(accepted)
        if value is not MISSING:
            params[name] = concrete(value, properties[name])
    return params


def answers_of(record: BfclRecord) -> dict[str, list[Any]]:
    return next(iter(record.ground_truth[0].values()))


def string_variants(text: str) -> Iterator[tuple[str, Any]]:
    yield "upper case", text.upper()
    yield "lower case", text.lower()
    yield "spaces removed", text.replace(" ", "")
    yield "spaces doubled", text.replace(" ", "  ")
    yield "punctuation BFCL ignores", f"-{text}_,./*^"
    yield "punctuation BFCL keeps", f"{text}!"
    yield "single quotes", text.replace('"', "'") + "'s"
    yield "another word", f"{text} extra"
    yield "empty", ""
    if text.strip().lstrip("-").replace(".", "", 1).isdigit():
        number = float(text) if "." in text else int(text)
        yield "number for a numeric string", number


def number_variants(value: float) -> Iterator[tuple[str, Any]]:
    if isinstance(value, int):
        yield "float for int", float(value)
        yield "bool for int", value != 0
    else:
        yield "int for float", int(value)
        yield "rounded", round(value, 1)
    yield "number as string", str(value)
    yield "off by one", value + 1
    yield "negated", -value


def list_variants(value: list[Any]) -> Iterator[tuple[str, Any]]:
    yield "tuple", tuple(value)
    yield "reversed", value[::-1]
    yield "truncated", value[:-1]
    yield "empty list", []
    yield "duplicated last", [*value, value[-1]] if value else [None]
    yield "as a string", str(value)
    yield "nested", [value]
    if value and all(isinstance(item, str) for item in value):
        yield "items upper case", [item.upper() for item in value]
        yield "items as numbers", list(range(len(value)))
    if value and all(type(item) is int for item in value):
        yield "items as floats", [float(item) for item in value]
        yield "items as strings", [str(item) for item in value]
    if value and all(type(item) is float for item in value):
        yield "items as ints", [int(item) for item in value]


def dict_variants(value: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    keys = list(value)
    if keys:
        yield "key dropped", {k: v for k, v in value.items() if k != keys[-1]}
        yield "value changed", {**value, keys[0]: "something else"}
        first = value[keys[0]]
        if isinstance(first, str):
            yield "value case changed", {**value, keys[0]: first.upper()}
            yield "value punctuated", {**value, keys[0]: f"{first}."}
        yield "value as list", {**value, keys[0]: [first]}
    yield "key added", {**value, "extra_key": "x"}
    yield "empty dict", {}
    yield "as a string", json.dumps(value)
    yield "in a list", [value]


def list_of_dicts_variants(value: list[Any]) -> Iterator[tuple[str, Any]]:
    yield "dicts reversed", value[::-1]
    yield "one dict dropped", value[:-1]
    yield "empty list", []
    yield "not dicts", ["x"] * len(value)
    if value:
        for label, changed in dict_variants(value[0]):
            yield f"first dict {label}", [changed, *value[1:]]


def value_variants(value: Any, schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Values for one parameter near ``value``: what a model might give instead."""
    yield "None", None
    items = schema.get("items") or {}
    if type(value) is bool:
        yield "negated bool", not value
        yield "bool as int", int(value)
        yield "bool as string", str(value).lower()
    elif isinstance(value, (int, float)):
        yield from number_variants(value)
    elif isinstance(value, str):
        yield from string_variants(value)
    elif isinstance(value, list) and items.get("type") == "dict":
        yield from list_of_dicts_variants(value)
    elif isinstance(value, list):
        yield from list_variants(value)
    elif isinstance(value, dict):
        yield from dict_variants(value)


OMITTED_PARAM_VALUES: dict[str, Any] = {
    "string": "x",
    "integer": 1,
    "float": 1.5,
    "boolean": True,
    "array": [],
    "tuple": [],
    "dict": {},
}
"""A value for a parameter whose only accepted answer is omission ("")."""


@dataclass(frozen=True)
class Output:
    """One decoded model output for a record: ``[{name: {param: value}}]``."""

    label: str
    calls: list[dict[str, dict[str, Any]]]


def outputs_for(record: BfclRecord, rng: random.Random) -> list[Output]:
    """The accepted answers and many wrong ones, each labelled with what was changed."""
    function = record.function[0]
    name = function["name"]
    properties: dict[str, Any] = function["parameters"]["properties"]
    base = canonical_params(record)

    def output(label: str, params: dict[str, Any], called: str = name) -> Output:
        return Output(label, [{called: params}])

    made = [output("first accepted values", base)]
    for param, accepted in answers_of(record).items():
        if param not in base:  # only omission is accepted
            sample = OMITTED_PARAM_VALUES[properties[param]["type"]]
            made.append(
                output(f"{param}: given though only omission is accepted", {**base, param: sample})
            )
        for index, value in enumerate(accepted[1:4], start=1):
            if value != "":
                changed = {**base, param: concrete(value, properties[param])}
                made.append(output(f"{param}: accepted value {index}", changed))
    made += [
        output(f"{param}: dropped", {k: v for k, v in base.items() if k != param}) for param in base
    ]
    made += [
        output("unexpected parameter", {**base, "unexpected_param": 1}),
        output("no parameters", {}),
        output("wrong function name", base, name + "_v2"),
        output("name with underscores", base, name.replace(".", "_")),
        Output("no calls", []),
        Output("two calls", [{name: base}, {name: base}]),
    ]
    changes = [
        (param, label, changed)
        for param, value in base.items()
        for label, changed in value_variants(value, properties[param])
    ]
    made += [
        output(f"{param}: {label}", {**base, param: changed}) for param, label, changed in changes
    ]
    if len(changes) > 1:
        for _ in range(4):
            (p1, l1, v1), (p2, l2, v2) = rng.sample(changes, 2)
            made.append(output(f"{p1}: {l1} + {p2}: {l2}", {**base, p1: v1, p2: v2}))
    return made


# --- prompt-mode texts ----------------------------------------------------------------------


def render_call(name: str, params: dict[str, Any]) -> str:
    """A call as BFCL asks prompt-mode models to write it: ``name(a=1, b='x')``."""
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in params.items())})"


def render(calls: list[dict[str, dict[str, Any]]]) -> str:
    return (
        "["
        + ", ".join(render_call(name, params) for call in calls for name, params in call.items())
        + "]"
    )


WRAPPERS: tuple[tuple[str, str], ...] = (
    ("as is", "{}"),
    ("backticks", "```{}```"),
    ("backticks and newlines", "```\n{}\n```"),
    ("surrounding spaces", "  {}\n"),
    ("wrapping quotes", "'{}'"),
    ("python fence", "```python\n{}\n```"),
)


def wrap(text: str, how: str) -> str:
    if how == "without brackets":
        return text[1:-1]
    return dict(WRAPPERS)[how].format(text)


EDGE_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "[]",
    "```\n```",
    "hello world",
    "I cannot help with that.",
    "The answer is 42.",
    "[1, 2]",
    "[f(a=1), 'text']",
    "[f(a=1)][0]",
    "[f(a=1)], [g(b=2)]",
    "[[f(a=1)]]",
    "f(a=1)]",
    "[f(a=1)",
    "[f(a=1]",
    "[f(a=1)]]",
    "[f(a=1) g(b=2)]",
    "[f(a=1);]",
    "[f(a=1,)]",
    "[f(a=1, a=2)]",
    "'f(a=1)'",
    '"[f(a=1)]"',
    "'''[f(a=1)]'''",
    "`f(a=1)`",
    "<tool>[f(a=1)]</tool>",
    "[f(a=1)]\n\nThat is all.",
    "[f()]",
    "[f()()]",
    "[a[0].b(x=1)]",
    "[math.factorial(n=5)]",
    "[a.b.c.d(x=1)]",
    "[f(a=1), g.h(b=2)]",
    "[f(a=-5)]",
    "[f(a=-2.5e3)]",
    "[f(a=-0.0)]",
    "[f(a=-True)]",
    "[f(a=not True)]",
    "[f(a=not 0)]",
    "[f(a=~5)]",
    "[f(a=~1.5)]",
    "[f(a=-'x')]",
    "[f(a=-None)]",
    "[f(a=-...)]",
    "[f(a=-x)]",
    "[f(a=-x.y)]",
    "[f(a=-(1+2))]",
    "[f(a=-1j)]",
    "[f(a=2*3)]",
    "[f(a=2*-3)]",
    "[f(a=-2**2)]",
    "[f(a=7//2)]",
    "[f(a=7%3)]",
    "[f(a=7/2)]",
    "[f(a=1/0)]",
    "[f(a=2**0.5)]",
    "[f(a=2**100)]",
    "[f(a=10**-2)]",
    "[f(a=1e308*10)]",
    "[f(a=1e999)]",
    "[f(a=2.0**10000)]",
    "[f(a=(-8)**(1/3))]",
    "[f(a=1|2)]",
    "[f(a=1<<3)]",
    "[f(a=5^3)]",
    "[f(a=6&3)]",
    "[f(a=8>>1)]",
    "[f(a=1@2)]",
    "[f(a=True+1)]",
    "[f(a=None+1)]",
    "[f(a='a'*3)]",
    "[f(a='a'+'b')]",
    "[f(a='%s!'%5)]",
    "[f(a=b'x'+b'y')]",
    "[f(a=1j*2)]",
    "[f(a=[1]+[2])]",
    "[f(a=(1,2)+(3,))]",
    "[f(a=[1,2]*2)]",
    "[f(a={'k': 1}|{'j': 2})]",
    "[f(a={1}|{2})]",
    "[f(a=(not True)+1)]",
    "[f(a=(~2)*3)]",
    "[f(a=[...]+[1])]",
    "[f(a=x*2)]",
    "[f(a=x.y*2)]",
    "[f(a=[1,x]*2)]",
    "[f(a=g(b=1)+1)]",
    "[f(a=x[0]+1)]",
    "[f(a=(1<2)+1)]",
    "[f(a=(1<2<3)*2)]",
    "[f(a=(1 in [1])+(2 not in (3,)))]",
    "[f(a=(0 and 1/0)+1)]",
    "[f(a=(None or 'x')+'y')]",
    "[f(a=(1 if 0 else 2)*3)]",
    "[f(a=[1,2,3][0]+[1,2,3][::-1][0])]",
    "[f(a='abc'[1:]+'d')]",
    "[f(a=(1 is 1)+0)]",
    "[f(a={**d}|{})]",
    "[f(a=[*x]+[1])]",
    "[f(a=1 < 2)]",
    "[f(a=True and False)]",
    "[f(a=1 if x else 2)]",
    "[f(a={1, 2})]",
    "[f(a=[i for i in x])]",
    "[f(a=lambda: 1)]",
    "[f(a=f'x{y}')]",
    "[f(a=(x:=5))]",
    "[f(a=(yield 1))]",
    "[f(a=await x)]",
    "[f(a=x[0])]",
    "[f(a=x[1:2])]",
    "[f(a=x['k'])]",
    "[f(a=my_data)]",
    "[f(a=np.array([1]))]",
    "[f(a=math.pi)]",
    "[f(a=g(b=1))]",
    "[f(a=g(1))]",
    "[f(a=g(1, b=2))]",
    "[f(a=[g(b=1), 2])]",
    "[f(5, a=1)]",
    "[f(5)]",
    "[f(*x)]",
    "[f(**d)]",
    "[f(a=1, **d)]",
    "[f(**{'a': 1})]",
    "[f(a=...)]",
    "[f(a=None)]",
    "[f(a=())]",
    "[f(a=(1,))]",
    "[f(a={})]",
    "[f(a=[])]",
    "[f(a=[-1, -2.5, 3])]",
    "[f(a={'x': -1, -2: 'y'})]",
    "[f(a={[1]: 2})]",
    "[f(a={(1, 2): 3})]",
    "[f(a={'k': [1, (2, 3)]})]",
    "[f(a=((1, 2), [3]))]",
    "[f(a=0x10, b=1_000, c=0o7, d=1e3)]",
    "[f(a='it''s')]",
    "[f(a='''x''')]",
    "[f(a='\\n')]",
    "[f(a='\\x00')]",
    '[f(a="é")]',
    "[f(a=1)]\x00",
    "[" * 300 + "f(a=1)" + "]" * 300,
    "[f(a=" + "[" * 300 + "]" * 300 + ")]",
)
"""Texts for the decoder alone; results beyond our documented differences must equal BFCL's."""

PLUS_TEXTS: dict[str, tuple[Any, Any]] = {
    "[f(a=+5)]": ([{"f": {"a": 5}}], [{"f": {"a": -5}}]),
    "[f(a=+2.5)]": ([{"f": {"a": 2.5}}], [{"f": {"a": -2.5}}]),
    "[f(a=[+1, -1])]": ([{"f": {"a": [1, -1]}}], [{"f": {"a": [-1, -1]}}]),
}
"""``+x``, decoded by us and by BFCL, which negates the operand of every unary operator (documented)."""

UNEVALUATED_TEXTS: tuple[str, ...] = (
    "[f(a=abs(-2)+1)]",
    "[f(a=len('ab')*2)]",
    "[f(a=dict(b=1)|dict(c=2))]",
    "[f(a=str(1)+'x')]",
    "[f(a=int('3')*2)]",
    "[f(a=MAXIMUM_STEP_LIMIT*2)]",
)
"""Expressions BFCL ``eval``\\ s with names it can resolve; we evaluate literals only (documented)."""

OVERSIZED_TEXTS: tuple[str, ...] = (
    "[f(a='x'*(10**6+1))]",
    "[f(a=[0]*(10**6+1))]",
    "[f(a=2**20000)]",
)
"""Results we refuse for their size; BFCL builds them (documented)."""


# --- tools-mode responses -------------------------------------------------------------------


def tool_call(name: str, arguments: str, index: int = 0) -> dict[str, Any]:
    return {
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def tool_message(*calls: dict[str, Any], content: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def tools_messages_for(
    record: BfclRecord, outputs: list[Output]
) -> list[tuple[str, dict[str, Any]]]:
    """``choices[0].message`` of tools-mode responses: the outputs as tool calls, then malformed ones."""
    name = record.function[0]["name"].replace(".", "_")
    made: list[tuple[str, dict[str, Any]]] = []
    for output in outputs:
        calls = [
            tool_call(called.replace(".", "_"), json.dumps(params), index)
            for index, call in enumerate(output.calls)
            for called, params in call.items()
        ]
        made.append((output.label, tool_message(*calls)))
    arguments = json.dumps(canonical_params(record))
    made += [
        ("dotted name", tool_message(tool_call(record.function[0]["name"], arguments))),
        ("text content and the call", tool_message(tool_call(name, arguments), content="Sure.")),
        ("arguments not JSON", tool_message(tool_call(name, "{" + arguments))),
        ("arguments a JSON list", tool_message(tool_call(name, "[1, 2]"))),
        ("arguments JSON null", tool_message(tool_call(name, "null"))),
        ("arguments an empty object", tool_message(tool_call(name, "{}"))),
        ("empty tool_calls", tool_message()),
        ("empty tool_calls and text", tool_message(content="I cannot.")),
        ("no tool_calls, empty content", {"role": "assistant", "content": ""}),
        ("no tool_calls, text content", {"role": "assistant", "content": "I cannot."}),
        ("no tool_calls, no content", {"role": "assistant", "content": None}),
        (
            "no tool_calls, a call as text",
            {"role": "assistant", "content": render(outputs[0].calls)},
        ),
    ]
    return made


# --- records made here ----------------------------------------------------------------------


def with_system_message(record: BfclRecord) -> BfclRecord:
    """The record with a system message of its own, which BFCL merges with its system prompt."""
    question = [
        [{"role": "system", "content": "Answer briefly."}, *copy.deepcopy(record.question[0])]
    ]
    return BfclRecord(
        "simple_python_9000",
        question,
        copy.deepcopy(record.function),
        copy.deepcopy(record.ground_truth),
    )


ROW_SCHEMA = {"type": "array", "items": {"type": "dict", "properties": {"k": {"type": "string"}}}}
OPTIONAL_ROWS = BfclRecord(
    id="simple_python_9001",
    question=[[{"role": "user", "content": "Store the rows."}]],
    function=[
        {
            "name": "store",
            "description": "Store rows.",
            "parameters": {"type": "dict", "properties": {"rows": ROW_SCHEMA}, "required": []},
        }
    ],
    ground_truth=[{"store": {"rows": [[{"k": ["v"]}], ""]}}],
)
"""A list of dictionaries that may be omitted: BFCL's checker raises on ``rows=["x"]``."""
NOT_DICTS = [{"store": {"rows": ["x"]}}]
OPTIONAL_ROWS_CALLS: dict[str, list[dict[str, dict[str, Any]]]] = {
    "rows given": [{"store": {"rows": [{"k": "V"}]}}],
    "rows omitted": [{"store": {}}],
    "rows empty": [{"store": {"rows": []}}],
    "wrong row": [{"store": {"rows": [{"k": "w"}]}}],
    "two rows": [{"store": {"rows": [{"k": "v"}, {"k": "v"}]}}],
    "row with another key": [{"store": {"rows": [{"j": "v"}]}}],
}
"""Calls for OPTIONAL_ROWS on which BFCL's checker does give a verdict."""


# --- the cases, and BFCL's results for them -------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One comparison: its record and label, our side's input, and the op the reference runs."""

    record_id: str
    label: str
    given: Any
    op: dict[str, Any]

    def named(self) -> str:
        return f"{self.record_id} [{self.label}]"


def check_case(record_id: str, output: Output, underscore_to_dot: bool) -> Case:
    op = {
        "op": "check",
        "id": record_id,
        "calls": repr(output.calls),
        "underscore_to_dot": underscore_to_dot,
    }
    return Case(record_id, f"{output.label}, underscore_to_dot={underscore_to_dot}", output, op)


def build_cases(records: list[BfclRecord]) -> dict[str, list[Case]]:
    """Every comparison, by kind; the reference runs them all in one call."""
    rng = random.Random(SEED)
    cases: dict[str, list[Case]] = {
        kind: []
        for kind in (
            "check",
            "decode_prompt",
            "score_prompt",
            "decode_tools",
            "score_tools",
            "requests",
            "documented",
        )
    }
    for record in records:
        outputs = outputs_for(record, rng)
        cases["check"] += [
            check_case(record.id, out, dots) for out in outputs for dots in (False, True)
        ]
        for output in rng.sample(outputs, min(8, len(outputs))):
            how = rng.choice([*(name for name, _ in WRAPPERS), "without brackets"])
            text = wrap(render(output.calls), how)
            label = f"{output.label}, {how}"
            cases["decode_prompt"].append(
                Case(record.id, label, text, {"op": "decode_prompt", "text": text})
            )
            cases["score_prompt"].append(
                Case(record.id, label, text, {"op": "score_prompt", "id": record.id, "text": text})
            )
        for label, message in tools_messages_for(record, rng.sample(outputs, min(6, len(outputs)))):
            cases["decode_tools"].append(
                Case(record.id, label, message, {"op": "decode_tools", "message": message})
            )
            cases["score_tools"].append(
                Case(
                    record.id,
                    label,
                    message,
                    {"op": "score_tools", "id": record.id, "message": message},
                )
            )
    cases["check"] += [
        check_case(OPTIONAL_ROWS.id, Output(label, calls), False)
        for label, calls in OPTIONAL_ROWS_CALLS.items()
    ]
    cases["decode_prompt"] += [
        Case("edge text", repr(text)[:80], text, {"op": "decode_prompt", "text": text})
        for text in EDGE_TEXTS
    ]
    for record in [*records, with_system_message(records[0])]:
        for kind in ("tools_request", "prompt_messages"):
            cases["requests"].append(Case(record.id, kind, record, {"op": kind, "id": record.id}))
    cases["documented"] += [
        Case("edge text", text, text, {"op": "decode_prompt", "text": text})
        for text in [*PLUS_TEXTS, *UNEVALUATED_TEXTS, *OVERSIZED_TEXTS]
    ]
    cases["documented"].append(
        Case(
            records[0].id,
            "no content",
            None,
            {"op": "score_prompt", "id": records[0].id, "text": None},
        )
    )
    cases["documented"].append(check_case(OPTIONAL_ROWS.id, Output("not dicts", NOT_DICTS), False))
    return cases


@dataclass
class Conformance:
    """The records by id, and every case by kind with BFCL's result."""

    records: dict[str, BfclRecord]
    results: dict[str, list[tuple[Case, Any]]]


@pytest.fixture(scope="module")
def conformance() -> Conformance:
    records = load_bfcl(DATA)
    extras = [with_system_message(records[0]), OPTIONAL_ROWS]
    cases = build_cases(records)
    ordered = [(kind, case) for kind, kind_cases in cases.items() for case in kind_cases]
    entries = [
        {"id": r.id, "question": r.question, "function": r.function, "ground_truth": r.ground_truth}
        for r in extras
    ]
    payload = {
        "data_dir": str(DATA),
        "extra_entries": entries,
        "ops": [case.op for _, case in ordered],
    }
    answers = run_reference("bfcl_reference.py", payload)
    results: dict[str, list[tuple[Case, Any]]] = {kind: [] for kind in cases}
    for (kind, case), answer in zip(ordered, answers, strict=True):
        results[kind].append((case, answer))
    return Conformance({record.id: record for record in [*records, *extras]}, results)


def verdict(valid: bool, error_type: str | None) -> tuple[bool, str | None]:
    """What is compared: validity, and the error type of a wrong answer."""
    return (valid, None if valid else error_type)


def reference_verdict(answer: dict[str, Any]) -> Any:
    if "error" in answer:
        return f"BFCL raised {answer['error']}"
    return verdict(answer["valid"], answer["error_type"])


def reference_decoding(answer: dict[str, Any]) -> dict[str, Any]:
    return {"error": "decoder failed"} if "error" in answer else answer


def our_decoding(decode: Callable[[Any], Any], given: Any) -> dict[str, Any]:
    try:
        decoded = decode(given)
    except BfclDecodeError:
        return {"error": "decoder failed"}
    return {"decoded": repr(decoded), "format_ok": is_function_calling_format(decoded)}


def assert_no_mismatches(mismatches: list[str], compared: int) -> None:
    shown = "\n".join(mismatches[:40])
    assert not mismatches, f"{len(mismatches)} of {compared} cases differ from BFCL:\n{shown}"


def chat_answer(message: dict[str, Any]) -> Completion:
    """A chat response with this ``choices[0].message``, read as the client reads it."""
    response = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return parse_completion("/v1/chat/completions", response)


def spec(mode: BfclMode, prompting: Prompting = "chat") -> ModelSpec:
    return ModelSpec(
        name="m",
        source=ModelSource("embedded", "m"),
        served_name="m",
        license="mit",
        prompting=prompting,
        tool_call_parser="hermes" if mode == "tools" else None,
        bfcl_mode=mode,
    )


@functools.cache
def asked(record: BfclRecord, mode: Mode) -> tuple[EvalItem, ApiRequest]:
    """The record as the bfcl bench asks a chat model in ``mode``: its item and request."""
    model = spec(mode)
    return bfcl_eval_item(record, model), build_bfcl_request(record, model)


def score(record: BfclRecord, message: dict[str, Any], mode: Mode) -> ItemRecord:
    """Our scoring of one chat response with this ``choices[0].message``, as the bfcl bench
    scores it: ``evaluate``'s ``scored_record`` with ``score_bfcl_answer``."""
    item, request = asked(record, mode)
    return scored_record("bfcl", score_bfcl_answer, item, request, chat_answer(message))


def error_type_of(item: ItemRecord) -> str | None:
    """BFCL's error type of a scored item (None for a failed one, which was never scored)."""
    return item.extracted["error_type"] if item.extracted is not None else None


# --- the checker ----------------------------------------------------------------------------


def test_checker_matches_bfcl(conformance: Conformance) -> None:
    mismatches: list[str] = []
    counts = {True: 0, False: 0}
    for case, answer in conformance.results["check"]:
        record = conformance.records[case.record_id]
        result = check_simple(
            record.function,
            case.given.calls,
            record.ground_truth,
            underscore_to_dot=case.op["underscore_to_dot"],
        )
        ours, theirs = verdict(result.valid, result.error_type), reference_verdict(answer)
        if ours != theirs:
            mismatches.append(f"{case.named()}: ours {ours}, BFCL {theirs}")
        counts[result.valid] += 1
    assert_no_mismatches(mismatches, sum(counts.values()))
    assert counts[True] >= 6000 and counts[False] >= 20000, counts


def test_checker_cases_reach_every_error_type(conformance: Conformance) -> None:
    """The generated outputs get every verdict BFCL's simple checker can give."""
    seen = {
        answer.get("error_type")
        for _, answer in conformance.results["check"]
        if not answer.get("valid")
    }
    assert seen >= {
        "simple_function_checker:wrong_count",
        "simple_function_checker:wrong_func_name",
        "simple_function_checker:missing_required",
        "simple_function_checker:unexpected_param",
        "simple_function_checker:missing_optional",
        "type_error:simple",
        "type_error:nested",
        "value_error:string",
        "value_error:list/tuple",
        "value_error:others",
        "value_error:dict_key",
        "value_error:dict_value",
        "value_error:list_dict_count",
    }, seen


# --- prompt mode ----------------------------------------------------------------------------


def test_prompt_decoding_matches_bfcl(conformance: Conformance) -> None:
    mismatches: list[str] = []
    counts = {"decoded": 0, "failed": 0}
    for case, answer in conformance.results["decode_prompt"]:
        ours = our_decoding(decode_prompt_output, case.given)
        if ours != reference_decoding(answer):
            mismatches.append(f"{case.named()}: ours {ours}, BFCL {answer}")
        counts["failed" if "error" in ours else "decoded"] += 1
    assert_no_mismatches(mismatches, sum(counts.values()))
    assert counts["decoded"] >= 2000 and counts["failed"] >= 600, counts


def test_prompt_scoring_matches_bfcl(conformance: Conformance) -> None:
    """The whole evaluation of a prompt-mode answer: decoding, format check, checker."""
    mismatches: list[str] = []
    counts = {True: 0, False: 0}
    for case, answer in conformance.results["score_prompt"]:
        message = {"role": "assistant", "content": case.given}
        item = score(conformance.records[case.record_id], message, "prompt")
        ours = verdict(item.correct, error_type_of(item))
        if item.error is not None or ours != reference_verdict(answer):
            mismatches.append(f"{case.named()}: ours {ours} (error {item.error}), BFCL {answer}")
        counts[item.correct] += 1
    assert_no_mismatches(mismatches, sum(counts.values()))
    assert counts[True] >= 300 and counts[False] >= 2000, counts


def requests_of(conformance: Conformance, kind: str) -> list[tuple[Case, Any]]:
    found = [
        (case, answer) for case, answer in conformance.results["requests"] if case.label == kind
    ]
    assert len(found) == 401
    return found


def test_prompt_requests_match_bfcl(conformance: Conformance) -> None:
    """Chat prompting sends BFCL's messages: its system prompt (merged with the record's), the question."""
    mismatches: list[str] = []
    for case, answer in requests_of(conformance, "prompt_messages"):
        payload = build_bfcl_request(case.given, spec("prompt")).payload
        if payload["messages"] != answer["messages"]:
            mismatches.append(
                f"{case.named()}: ours {payload['messages']!r:.300}, BFCL {answer!r:.300}"
            )
        assert set(payload) == {"messages", "max_tokens", "temperature"}
    assert_no_mismatches(mismatches, 401)


def test_completion_prompt_is_bfcls_messages_as_text(conformance: Conformance) -> None:
    """Completion prompting (BFCL's own is each model's chat template): the same messages, labelled."""
    mismatches: list[str] = []
    for case, answer in requests_of(conformance, "prompt_messages"):
        system, *turns = answer["messages"]
        labelled = [f"{message['role'].capitalize()}: {message['content']}" for message in turns]
        expected = "\n\n".join([system["content"].rstrip("\n"), *labelled, "Assistant:"])
        prompt = build_bfcl_request(case.given, spec("prompt", "completion")).payload["prompt"]
        if prompt != expected:
            mismatches.append(
                f"{case.named()}: ours {prompt[-200:]!r}, expected {expected[-200:]!r}"
            )
    assert_no_mismatches(mismatches, 401)


# --- tools mode -----------------------------------------------------------------------------


def test_tools_decoding_matches_bfcl(conformance: Conformance) -> None:
    """Tool calls as BFCL's OpenAI completions handler parses, stores and decodes them."""
    mismatches: list[str] = []
    counts = {"decoded": 0, "failed": 0}
    for case, answer in conformance.results["decode_tools"]:
        ours = our_decoding(lambda message: decode_tool_calls(chat_answer(message)), case.given)
        if ours != reference_decoding(answer):
            mismatches.append(f"{case.named()}: ours {ours}, BFCL {answer}")
        counts["failed" if "error" in ours else "decoded"] += 1
    assert_no_mismatches(mismatches, sum(counts.values()))
    assert counts["decoded"] >= 5000 and counts["failed"] >= 1000, counts


def test_tools_scoring_matches_bfcl(conformance: Conformance) -> None:
    mismatches: list[str] = []
    counts = {True: 0, False: 0}
    for case, answer in conformance.results["score_tools"]:
        item = score(conformance.records[case.record_id], case.given, "tools")
        ours = verdict(item.correct, error_type_of(item))
        if item.error is not None or ours != reference_verdict(answer):
            mismatches.append(f"{case.named()}: ours {ours} (error {item.error}), BFCL {answer}")
        counts[item.correct] += 1
    assert_no_mismatches(mismatches, sum(counts.values()))
    assert counts[True] >= 1000 and counts[False] >= 5000, counts


def test_tools_requests_match_bfcl(conformance: Conformance) -> None:
    """The question's messages, and BFCL's tools (``convert_to_tool`` for OpenAI completions)."""
    mismatches: list[str] = []
    for case, answer in requests_of(conformance, "tools_request"):
        payload = build_bfcl_request(case.given, spec("tools")).payload
        for key in ("messages", "tools"):
            if payload[key] != answer[key]:
                shown = f"ours {payload[key]!r:.300}, BFCL {answer[key]!r:.300}"
                mismatches.append(f"{case.named()} {key}: {shown}")
        assert set(payload) == {"messages", "tools", "max_tokens", "temperature"}
    assert_no_mismatches(mismatches, 401)


# --- documented differences -----------------------------------------------------------------


@pytest.fixture(scope="module")
def documented(conformance: Conformance) -> dict[str, Any]:
    """BFCL's results for the inputs where we deliberately differ, by label."""
    return {case.label: answer for case, answer in conformance.results["documented"]}


def test_plus_sign_is_kept_where_bfcl_negates(documented: dict[str, Any]) -> None:
    for text, (ours, bfcls) in PLUS_TEXTS.items():
        assert decode_prompt_output(text) == ours, text
        assert documented[text]["decoded"] == repr(bfcls), text


def test_names_and_calls_in_expressions_are_not_evaluated(documented: dict[str, Any]) -> None:
    for text in UNEVALUATED_TEXTS:
        assert "decoded" in documented[text], (text, documented[text])
        with pytest.raises(BfclDecodeError, match="not a literal"):
            decode_prompt_output(text)


def test_oversized_results_are_refused(documented: dict[str, Any]) -> None:
    for text in OVERSIZED_TEXTS:
        # BFCL builds them (a 20000-bit integer is then too long for repr: ValueError).
        assert documented[text].get("format_ok") or documented[text] == {"error": "ValueError"}, (
            text
        )
        with pytest.raises(BfclDecodeError, match=r"too (large|long)"):
            decode_prompt_output(text)


def test_no_content_is_an_errored_item_where_bfcl_fails_to_decode(
    conformance: Conformance, documented: dict[str, Any]
) -> None:
    """A chat answer without content: BFCL's decoder fails on None; ours flags the item as errored."""
    assert documented["no content"] == {"valid": False, "error_type": "ast_decoder:decoder_failed"}
    item = score(
        conformance.records["simple_python_0"], {"role": "assistant", "content": None}, "prompt"
    )
    assert (item.correct, item.outcome) == (False, "failed")
    assert item.error == "choices[0].message.content is NoneType, not a string"


def test_a_crash_of_bfcls_checker_is_a_verdict_here(documented: dict[str, Any]) -> None:
    """``rows=["x"]`` passes BFCL's type check (an answer may omit the list), then its dict check raises."""
    assert documented["not dicts, underscore_to_dot=False"] == {"error": "AttributeError"}
    result = check_simple(OPTIONAL_ROWS.function, NOT_DICTS, OPTIONAL_ROWS.ground_truth)
    assert (result.valid, result.error_type) == (False, "value_error:list_dict_count")
