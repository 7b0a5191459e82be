"""BFCL "simple" (single Python function): building requests as BFCL does.

Reproduced from gorilla's ``bfcl_eval``: every function description gets BFCL's Python
hint; tools mode sends ``tools`` as its ``OpenAICompletionsHandler`` converts them (dots in
names as underscores, no ``tool_choice``); prompt mode prepends its default system prompt
(plain prompt for completion models). Greedy, where BFCL's default temperature is 0.001.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from ..api.evaluation import EvalItem, request_for
from ..core.records import ApiRequest
from ..core.sweep import ModelSpec
from ..data.bfcl import BfclRecord

DEFAULT_MAX_TOKENS = 1024
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."

GORILLA_TO_OPENAPI: dict[str, str] = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}
"""BFCL's ``GORILLA_TO_OPENAPI`` type mapping (``bfcl_eval/constants/type_mappings.py``)."""

# BFCL's default prompt-mode system prompt, assembled as its plaintext/classic template does:
# "{persona}{task}\n\n{tool_call_format}\n\n{multiturn_behavior}\n\n{available_tools}".
_PERSONA = "You are an expert in composing functions."
_TASK = (
    "You are given a question and a set of possible functions. Based on the question, you will need "
    "to make one or more function/tool calls to achieve the purpose. If none of the functions can be "
    "used, point it out. If the given question lacks the parameters required by the function, also "
    "point it out."
)
_OUTPUT_FORMAT = (
    "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"
)
_TOOL_CALL_FORMAT = (
    "You should only return the function calls in your response.\n\n"
    f"If you decide to invoke any of the function(s), you MUST put it in the format of {_OUTPUT_FORMAT}. "
    " You SHOULD NOT include any other text in the response."
)
_MULTITURN = (
    "At each turn, you should try your best to complete the tasks requested by the user within the "
    "current turn. Continue to output functions to call until you have fulfilled the user's request "
    "to the best of your ability. Once you have no more functions to call, the system will consider "
    "the current turn complete and proceed to the next turn or task."
)
COMPLETION_STOP: tuple[str, ...] = ("\n\n", "\nUser:", "</s>", "<|im_end|>")


# --- function docs and tools ---------------------------------------------------------------
def bfcl_function_docs(record: BfclRecord) -> list[dict[str, Any]]:
    """The record's function docs as BFCL shows them: a copy with the Python hint on each description."""
    docs = copy.deepcopy(record.function)
    for doc in docs:
        doc["description"] = str(doc.get("description", "")) + PYTHON_HINT
    return docs


def _openapi_type(name: Any) -> str:
    return GORILLA_TO_OPENAPI.get(name, "string") if isinstance(name, str) else "string"


def _cast_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """BFCL's ``_cast_to_openai_type`` with ``GORILLA_TO_OPENAPI``, in place, unknown types as strings."""
    for value in properties.values():
        if not isinstance(value, dict):
            continue
        gorilla = value.get("type")
        if gorilla == "float":
            value["format"] = "float"
            value["description"] = (
                str(value.get("description", "")) + " This is a float type value."
            )
        value["type"] = _openapi_type(gorilla) if "type" in value else "string"
        if value["type"] not in ("array", "object"):
            continue
        if isinstance(value.get("properties"), dict):
            value["properties"] = _cast_properties(value["properties"])
        elif isinstance(value.get("items"), dict):
            items = value["items"]
            items["type"] = _openapi_type(items.get("type"))
            if items["type"] == "array" and isinstance(items.get("items"), dict):
                items["items"]["type"] = _openapi_type(items["items"].get("type"))
            elif items["type"] == "object" and isinstance(items.get("properties"), dict):
                items["properties"] = _cast_properties(items["properties"])
    return properties


def to_openai_tools(
    functions: Sequence[dict[str, Any]],
    *,
    underscore_to_dot: bool = True,
) -> list[dict[str, Any]]:
    """BFCL function docs to OpenAI ``tools`` as BFCL's OpenAI handler converts them; with
    ``underscore_to_dot`` dots in names become underscores."""
    docs = copy.deepcopy(list(functions))
    for doc in docs:
        if underscore_to_dot and "." in doc["name"]:
            doc["name"] = doc["name"].replace(".", "_")
        params = doc.setdefault("parameters", {})
        params["type"] = "object"
        params["properties"] = _cast_properties(params.get("properties", {}))
    return [{"type": "function", "function": doc} for doc in docs]


# --- prompts and requests ------------------------------------------------------------------
def bfcl_system_prompt(functions: Sequence[dict[str, Any]]) -> str:
    """BFCL's default prompt-mode system prompt for these function docs (listed as indented JSON)."""
    return (
        f"{_PERSONA}{_TASK}\n\n{_TOOL_CALL_FORMAT}\n\n{_MULTITURN}\n\n"
        "Here is a list of functions in json format that you can invoke.\n"
        + json.dumps(list(functions), indent=4)
        + "\n"
    )


def prompt_mode_messages(record: BfclRecord) -> list[dict[str, str]]:
    """The question's messages with BFCL's system prompt first (merged into a leading system message)."""
    system = bfcl_system_prompt(bfcl_function_docs(record))
    messages = record.messages
    if messages and messages[0]["role"] == "system":
        messages[0] = {"role": "system", "content": system + "\n\n" + messages[0]["content"]}
    else:
        messages.insert(0, {"role": "system", "content": system})
    return messages


def prompt_mode_completion(record: BfclRecord) -> str:
    """Prompt mode for a completion model: the system prompt, the turns labelled, then ``Assistant:``."""
    system, *turns = prompt_mode_messages(record)
    return (
        "\n\n".join(
            [
                system["content"].rstrip("\n"),
                *(f"{m['role'].capitalize()}: {m['content']}" for m in turns),
            ]
        )
        + "\n\nAssistant:"
    )


def bfcl_skip_reason(model: ModelSpec) -> str | None:
    """Why BFCL cannot run for this model as configured, or None."""
    return (
        f'no tool-call parser for {model.name} (set bfcl_mode = "prompt" to use BFCL\'s prompt mode)'
        if model.bfcl_mode == "tools" and not model.tool_call_parser
        else None
    )


def bfcl_eval_item(
    record: BfclRecord, model: ModelSpec, *, max_tokens: int = DEFAULT_MAX_TOKENS
) -> EvalItem:
    """One record as an item of the public API, in the model's ``bfcl_mode``, greedy; the
    item differs between models, so its ``data_hash`` is the record's."""
    common: dict[str, Any] = {
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "data": record,
        "data_hash": record.data_hash,
    }
    if model.bfcl_mode == "tools":
        return EvalItem(
            record.id,
            messages=record.messages,
            tools=to_openai_tools(bfcl_function_docs(record)),
            **common,
        )
    if model.prompting == "completion":
        return EvalItem(
            record.id, prompt=prompt_mode_completion(record), stop=COMPLETION_STOP, **common
        )
    return EvalItem(record.id, messages=prompt_mode_messages(record), **common)


def build_bfcl_request(
    record: BfclRecord, model: ModelSpec, *, max_tokens: int = DEFAULT_MAX_TOKENS
) -> ApiRequest:
    """The request the bench sends for one record (payload without ``model``)."""
    return request_for(bfcl_eval_item(record, model, max_tokens=max_tokens), model.prompting)
