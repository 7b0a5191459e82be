"""BFCL simple-category scoring: decoding the model's calls and BFCL's AST checker.

Reproduced from gorilla's ``bfcl_eval``; ``tests/test_conformance_bfcl.py`` runs bfcl-eval
2026.3.23 on the same inputs and requires the same verdicts, with BFCL's error type names.
Decoding, and where ours differs: docs/architecture.md, "BFCL's rules, and where ours differ".
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from ..api.evaluation import EvalItem, Score
from ..core.records import Completion, ItemRecord
from ..data.bfcl import BfclRecord

Mode = Literal["tools", "prompt"]
Calls = list[dict[str, dict[str, Any]]]

PYTHON_TYPE_MAPPING: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
"""BFCL's ``PYTHON_TYPE_MAPPING``; a type not listed is checked as ``"any"`` here."""
NESTED_TYPES = ("array", "tuple")


@dataclass(frozen=True)
class BfclCheck:
    """A verdict with BFCL's ``error_type`` (empty when valid) and a one-line reason."""

    valid: bool
    error_type: str = ""
    error: str = ""


VALID = BfclCheck(True)


class BfclDecodeError(ValueError):
    """The model's answer could not be decoded into function calls."""


# --- decoding ------------------------------------------------------------------------------

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
    ast.MatMult: operator.matmul,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}
_MAX_INT_BITS = 14_000
"""Integer results are refused above this (about 4,200 digits: Python will not print more)."""
_MAX_LENGTH = 10**6
"""Strings, bytes and containers made by ``*`` are refused above this length."""
_WIDE_FORMAT = re.compile(r"%(\([^)]*\))?[-+ #0]*(\*|\d{7,}|\d*\.(\*|\d{7,}))")
"""A ``%`` conversion with a width or precision of 7 digits or more, or taken from the arguments (``*``)."""


def _refuse(node: ast.expr, why: str) -> BfclDecodeError:
    return BfclDecodeError(f"cannot evaluate {ast.unparse(node)!r}: {why}")


def _guard_operands(node: ast.BinOp, left: Any, right: Any) -> None:
    """Refuse what would take unbounded time or memory before computing it."""
    ints = type(left) in (int, bool) and type(right) in (int, bool)
    too_large = (
        ints
        and right > 0
        and (
            (
                isinstance(node.op, ast.Pow)
                and abs(left) > 1
                and (right > _MAX_INT_BITS or right * math.log2(abs(left)) > _MAX_INT_BITS)
            )
            or (
                isinstance(node.op, ast.LShift)
                and left != 0
                and right + abs(left).bit_length() > _MAX_INT_BITS
            )
        )
    )
    if too_large:
        raise _refuse(node, "result too large")
    if isinstance(node.op, ast.Mult):
        for sequence, count in ((left, right), (right, left)):
            repeated = isinstance(sequence, (str, bytes, list, tuple)) and type(count) in (
                int,
                bool,
            )
            if repeated and len(sequence) * count > _MAX_LENGTH:
                raise _refuse(node, "result too long")
    if isinstance(node.op, ast.Mod) and isinstance(left, (str, bytes)):
        text = left.decode("latin-1") if isinstance(left, bytes) else left
        if _WIDE_FORMAT.search(text):
            raise _refuse(node, "format width too large")


_DISPLAYS: dict[type[ast.expr], Callable[[Any], Any]] = {
    ast.List: list,
    ast.Tuple: tuple,
    ast.Set: set,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def _evaluate(node: ast.expr) -> Any:
    """What ``eval`` gives for literals, displays, operators, conditionals and subscripts;
    anything else (names, calls, attributes, ...) is refused."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return _DISPLAYS[type(node)](_evaluate(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise _refuse(node, "** in a dictionary")
        return {
            _evaluate(cast(ast.expr, k)): _evaluate(v)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        _guard_operands(node, left, right)
        result = _BINARY[type(node.op)](left, right)
        if isinstance(result, int) and result.bit_length() > _MAX_INT_BITS:
            raise _refuse(node, "result too large")
        return result
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _evaluate(comparator)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        value: Any = None
        for operand in node.values:
            value = _evaluate(operand)
            if bool(value) == isinstance(node.op, ast.Or):  # and: stop at falsy; or: at truthy
                return value
        return value
    if isinstance(node, ast.IfExp):
        return _evaluate(node.body) if _evaluate(node.test) else _evaluate(node.orelse)
    if isinstance(node, ast.Subscript):
        container = _evaluate(node.value)
        if isinstance(node.slice, ast.Slice):
            bounds = (node.slice.lower, node.slice.upper, node.slice.step)
            return container[slice(*(None if b is None else _evaluate(b) for b in bounds))]
        return container[_evaluate(node.slice)]
    raise _refuse(node, f"{type(node).__name__} is not a literal (BFCL would eval it)")


def _resolve_unary(node: ast.UnaryOp) -> Any:
    """BFCL negates the operand's value whatever the operator; only a literal has one."""
    if not isinstance(node.operand, ast.Constant):
        raise BfclDecodeError(f"unsupported unary expression {ast.unparse(node)!r}")
    if isinstance(node.op, ast.UAdd):
        return _evaluate(node)  # deliberately +x, not BFCL's -x
    return operator.neg(cast(Any, node.operand.value))


_RESOLVERS: dict[type, Callable[[Any], Any]] = {
    ast.Constant: lambda node: "..." if node.value is Ellipsis else node.value,
    ast.UnaryOp: _resolve_unary,
    ast.List: lambda node: [_resolve_value(v) for v in node.elts],
    ast.Dict: lambda node: {
        _resolve_value(k): _resolve_value(v) for k, v in zip(node.keys, node.values, strict=True)
    },
    ast.BinOp: _evaluate,
    ast.Name: lambda node: node.id,
    ast.Call: lambda node: ast.unparse(node) if not node.keywords else _resolve_call(node),
    ast.Tuple: lambda node: tuple(_resolve_value(v) for v in node.elts),
    ast.Subscript: lambda node: f"{ast.unparse(node.value)}[{ast.unparse(node.slice)}]",
}
"""BFCL's ``resolve_ast_by_type``, by the value's node type."""


def _resolve_value(node: ast.expr | None) -> Any:
    """BFCL's ``resolve_ast_by_type`` on one argument value (:data:`_RESOLVERS`)."""
    resolve = _RESOLVERS.get(type(node))
    if resolve is None:
        raise BfclDecodeError(
            f"unsupported AST type: {'nothing' if node is None else type(node).__name__}"
        )
    return resolve(node)


def _resolve_call(node: ast.Call) -> dict[str, dict[Any, Any]]:
    """BFCL's ``resolve_ast_call``: dotted name and keyword arguments only (``**x`` under the key None)."""
    parts: list[str] = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return {
        ".".join(reversed(parts)): {
            keyword.arg: _resolve_value(keyword.value) for keyword in node.keywords
        }
    }


def decode_prompt_output(text: str) -> Calls:
    """Decode ``[func(a=1, b="x")]`` as ``default_decode_ast_prompting``; BfclDecodeError
    where BFCL's decoder raises."""
    # in one pair of brackets: BFCL adds each that is missing
    result = "[" + text.strip("`\n ").removeprefix("[").removesuffix("]") + "]"
    try:
        body = ast.parse(result.strip().strip("'"), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise BfclDecodeError(f"invalid syntax: {exc}") from None
    if isinstance(body, ast.Call):
        elements: list[ast.expr] = [body]
    elif isinstance(body, (ast.List, ast.Tuple, ast.Set)):
        elements = list(body.elts)
    else:
        raise BfclDecodeError(f"expected a list of calls, got {type(body).__name__}")
    calls: Calls = []
    for element in elements:
        if not isinstance(element, ast.Call):
            raise BfclDecodeError(f"expected a function call, got {type(element).__name__}")
        try:
            calls.append(_resolve_call(element))
        except BfclDecodeError:
            raise
        except Exception as exc:
            raise BfclDecodeError(f"cannot resolve {type(exc).__name__}: {exc}") from None
    return calls


def decode_tool_calls(completion: Completion) -> list[Any]:
    """Decode a tools-mode answer into ``[{name: arguments}]`` as ``OpenAICompletionsHandler``;
    BfclDecodeError for text without tool calls, a nameless call or non-JSON arguments."""
    tool_calls = completion.tool_calls
    if tool_calls is None:
        if completion.text == "":
            return []
        raise BfclDecodeError(
            f"no tool calls in the response (content: {repr(completion.text)[:120]})"
        )
    decoded: list[Any] = []
    for index, call in enumerate(tool_calls):
        name, arguments = call["name"], call["arguments"]
        if name is None:
            raise BfclDecodeError(f"tool call {index} has no function name")
        if arguments is None:
            raise BfclDecodeError(
                f"tool call {index} ({name}) has arguments that are not a JSON string"
            )
        try:
            decoded.append({name: json.loads(arguments)})
        except json.JSONDecodeError as exc:
            raise BfclDecodeError(
                f"tool call {index} ({name}) has arguments that are not JSON: {exc.msg}"
            ) from None
    return decoded


def is_function_calling_format(decoded: Any) -> bool:
    """BFCL's ``is_function_calling_format_output``: ``[{name: {param: value}}, ...]`` (``[]`` allowed)."""
    return type(decoded) is list and all(
        type(item) is dict and len(item) == 1 and type(next(iter(item.values()))) is dict
        for item in decoded
    )


# --- checker -------------------------------------------------------------------------------


def standardize_string(text: str) -> str:
    """BFCL's ``standardize_string``: drop spaces and ``,./-_*^``, lower-case, ``'`` -> ``"``."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def _type_checker(
    param: str,
    value: Any,
    possible: Sequence[Any],
    expected_description: str,
    expected: type,
    nested: type | None,
) -> tuple[BfclCheck, bool]:
    """BFCL's ``type_checker`` (one level of nesting): its check, and whether the value is a
    variable name (of the accepted answers' type rather than the schema's)."""
    answer_type = next((type(answer) for answer in possible if answer != ""), None)
    is_variable = answer_type is not None and answer_type != expected
    failure: BfclCheck | None = None
    if type(value) is expected:
        if nested is None:
            return VALID, is_variable
        for answer_item in possible:
            if type(answer_item) is not list or all(
                _type_checker(param, v, answer_item, nested.__name__, nested, None)[0].valid
                for v in cast(list[Any], value)
            ):
                return VALID, is_variable
        failure = BfclCheck(
            False,
            "type_error:nested",
            f"nested type check failed for {param!r}: expected "
            f"{expected_description} of {nested.__name__}, got {value!r}",
        )
    if answer_type is not None and type(value) is answer_type:
        return failure or VALID, True
    return (
        BfclCheck(
            False,
            "type_error:simple",
            f"wrong type for {param!r}: expected {expected_description}, "
            f"got {type(value).__name__} ({value!r})",
        ),
        is_variable,
    )


def _wrong_value(kind: str, param: str, value: Any, possible: Sequence[Any]) -> BfclCheck:
    return BfclCheck(
        False,
        f"value_error:{kind}",
        f"wrong value for {param!r}: {value!r}, expected one of {list(possible)!r}",
    )


def _standardize_item(item: Any) -> Any:
    return standardize_string(item) if type(item) is str else item


def _standardized_checker(
    kind: str, answers: tuple[type, ...], standardize: Callable[[Any], Any]
) -> Callable[[str, Any, Sequence[Any]], BfclCheck]:
    """BFCL's string or list checker: the value, standardized, must be one of the answers
    of the ``answers`` types, standardized alike."""

    def check(param: str, value: Any, possible: Sequence[Any]) -> BfclCheck:
        accepted = [standardize(answer) for answer in possible if type(answer) in answers]
        return (
            VALID if standardize(value) in accepted else _wrong_value(kind, param, value, possible)
        )

    return check


def _dict_checker(param: str, value: Mapping[str, Any], possibles: Sequence[Any]) -> BfclCheck:
    result = BfclCheck(False, "dict_checker:unclear", f"no accepted dictionary for {param!r}")
    for possible in possibles:
        if not isinstance(possible, dict):
            continue
        result = VALID
        for key, item in value.items():
            if key not in possible:
                result = BfclCheck(
                    False, "value_error:dict_key", f"unexpected key {key!r} in {param!r}"
                )
                break
            accepted = [_standardize_item(a) for a in possible[key]]
            if _standardize_item(item) not in accepted:
                result = BfclCheck(
                    False,
                    "value_error:dict_value",
                    f"wrong value for key {key!r} of {param!r}: {item!r}, "
                    f"expected one of {accepted!r}",
                )
                break
        for key, accepted_values in possible.items():
            if key not in value and "" not in accepted_values:
                result = BfclCheck(
                    False, "value_error:dict_key", f"missing key {key!r} in {param!r}"
                )
                break
        if result.valid:
            return VALID
    return result


def _list_dict_checker(param: str, value: list[Any], possibles: Sequence[Any]) -> BfclCheck:
    result = BfclCheck(
        False, "list_dict_checker:unclear", f"no accepted list of dictionaries for {param!r}"
    )
    for possible in possibles:
        if possible == "":
            possible = []  # BFCL takes len("") == 0: only an empty list matches
        if not isinstance(possible, list) or len(value) != len(possible):
            result = BfclCheck(
                False, "value_error:list_dict_count", f"wrong number of dictionaries in {param!r}"
            )
            continue
        for item, accepted in zip(value, possible, strict=True):
            if not isinstance(item, dict):
                result = BfclCheck(
                    False, "type_error:nested", f"{param!r} holds {item!r}, not a dictionary"
                )
                break
            result = _dict_checker(param, item, [accepted])
            if not result.valid:
                break
        else:
            return VALID
    return result


_CHECKERS: dict[type, Callable[[str, Any, Sequence[Any]], BfclCheck]] = {
    dict: _dict_checker,
    str: _standardized_checker("string", (str,), standardize_string),
    list: _standardized_checker(
        "list/tuple", (list, str), lambda items: [_standardize_item(item) for item in items]
    ),
}
"""The value checker of a parameter by its schema type (others: the value is an answer)."""


def simple_function_checker(
    function: Mapping[str, Any],
    call: Mapping[str, Any],
    ground_truth: Mapping[str, Mapping[str, Sequence[Any]]],
    *,
    underscore_to_dot: bool = False,
) -> BfclCheck:
    """BFCL's ``simple_function_checker`` for Python: one decoded call against its answers;
    ``underscore_to_dot``: the expected name's dots compare as underscores."""
    possible = next(iter(ground_truth.values()))
    name = str(function["name"])
    properties: Mapping[str, Any] = function["parameters"]["properties"]
    required: Sequence[str] = function["parameters"].get("required", [])
    if underscore_to_dot and "." in name:
        name = name.replace(".", "_")
    if name not in call:
        return BfclCheck(
            False,
            "simple_function_checker:wrong_func_name",
            f"expected {name!r}, got {', '.join(repr(k) for k in call) or 'nothing'}",
        )
    params = call[name]
    for param in required:
        if param not in params:
            return BfclCheck(
                False, "simple_function_checker:missing_required", f"missing required {param!r}"
            )

    for param, value in params.items():
        if param not in properties or param not in possible:
            return BfclCheck(
                False, "simple_function_checker:unexpected_param", f"unexpected parameter {param!r}"
            )
        details = properties[param]
        description = str(details.get("type", "any"))
        expected = PYTHON_TYPE_MAPPING.get(description, str)
        nested: type | None = None
        if description in NESTED_TYPES:
            items = details.get("items")
            item_type = items.get("type") if isinstance(items, dict) else None
            nested = PYTHON_TYPE_MAPPING.get(item_type, str) if isinstance(item_type, str) else None
        if description == "tuple" and type(value) is tuple:
            value = list(value)
        if description == "float" and type(value) is int:
            value = float(value)

        typed, is_variable = _type_checker(
            param, value, possible[param], description, expected, nested
        )
        if not typed.valid:
            return typed
        checker = (
            None
            if is_variable
            else (
                _list_dict_checker
                if expected is list and nested is dict
                else _CHECKERS.get(expected)
            )
        )
        if checker is not None:
            check = checker(param, value, possible[param])
            if not check.valid:
                return check
        elif value not in possible[param]:
            return _wrong_value("others", param, value, possible[param])

    for param, accepted in possible.items():
        if param not in params and "" not in accepted:
            return BfclCheck(
                False,
                "simple_function_checker:missing_optional",
                f"optional parameter {param!r} omitted but no answer allows omitting it",
            )
    return VALID


def check_simple(
    functions: Sequence[Mapping[str, Any]],
    decoded: Calls,
    ground_truth: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]],
    *,
    underscore_to_dot: bool = False,
) -> BfclCheck:
    """BFCL's ``ast_checker`` for the simple category: exactly one call, then the function checker."""
    if len(decoded) != 1:
        return BfclCheck(
            False,
            "simple_function_checker:wrong_count",
            f"expected 1 function call, got {len(decoded)}",
        )
    return simple_function_checker(
        functions[0], decoded[0], ground_truth[0], underscore_to_dot=underscore_to_dot
    )


# --- the scorer ----------------------------------------------------------------------------


def check_bfcl_answer(
    record: BfclRecord, completion: Completion, mode: Mode
) -> tuple[BfclCheck, Any]:
    """BFCL's verdict on an answered item (prompt mode: one with text), and the decoded calls
    (JSON data; None when the answer could not be decoded). Never raises."""
    try:
        decoded: Any = (
            decode_tool_calls(completion)
            if mode == "tools"
            else decode_prompt_output(completion.text or "")
        )
    except BfclDecodeError as exc:
        return BfclCheck(
            False, "ast_decoder:decoder_failed", f"failed to decode the answer: {exc}"
        ), None
    try:
        calls = json.loads(json.dumps(decoded))  # the decoded calls as JSON data
    except (TypeError, ValueError):
        calls = repr(decoded)
    if not is_function_calling_format(decoded):
        return BfclCheck(
            False,
            "ast_decoder:decoder_wrong_output_format",
            "decoded output is not [{name: {param: value}}]",
        ), calls
    try:
        check = check_simple(
            record.function, decoded, record.ground_truth, underscore_to_dot=mode == "tools"
        )
    except Exception as exc:
        check = BfclCheck(
            False, "simple_function_checker:unclear", f"checker failed: {type(exc).__name__}: {exc}"
        )
    return check, calls


def score_bfcl_answer(completion: Completion, item: EvalItem) -> Score:
    """The BFCL scorer of the public API: ``item.data`` is the :class:`BfclRecord`; an item
    with tools is tools mode, else prompt mode. ``answer``: decoded calls, ``error_type``,
    reason; ``scores``: ``{"ast": valid}``."""
    record: BfclRecord = item.data
    check, calls = check_bfcl_answer(
        record, completion, "tools" if item.tools is not None else "prompt"
    )
    return Score(
        check.valid,
        answer={"calls": calls, "error_type": check.error_type, "error": check.error},
        scores={"ast": check.valid},
    )


def summarise_bfcl(records: Sequence[ItemRecord]) -> dict[str, Any]:
    """n, accuracy, counts per BFCL error type, parse failures and the failed count; ``n``,
    ``correct`` and the error types count answered items only."""
    answered = [r for r in records if not r.failed]
    n = len(answered)
    correct = sum(r.correct for r in answered)
    types = Counter(
        str(r.extracted_value("error_type") or "unknown") for r in answered if not r.correct
    )
    return {
        "n": n,
        "items": len(records),
        "failed": len(records) - n,
        "correct": correct,
        "accuracy": correct / n if n else 0.0,
        "error_types": dict(sorted(types.items())),
        "parse_failures": sum(
            count for kind, count in types.items() if kind.startswith("ast_decoder:")
        ),
    }
