"""BFCL "simple" (single Python function): loading the records and building requests as BFCL does.

Reproduced from the gorilla repository's ``berkeley-function-call-leaderboard/bfcl_eval``:

* Loading: one JSON object a line (``bfcl_eval/utils.py`` ``load_file``); records and
  possible answers joined by ``id``. Every function description gets BFCL's Python
  hint, ``" Note that the provided function is in Python 3 syntax."``
  (``add_language_specific_hint_to_function_doc``), in both modes.
* Tools mode (BFCL's ``OpenAICompletionsHandler`` FC path): the question's messages,
  and ``tools`` from ``convert_to_tool`` / ``_cast_to_openai_type`` with
  ``GORILLA_TO_OPENAPI`` (``constants/type_mappings.py``), names' dots turned into
  underscores (``underscore_to_dot``), no ``tool_choice``.
* Prompt mode (``system_prompt_pre_processing_chat_model`` with the default
  ``DEFAULT_SYSTEM_PROMPT_FORMAT``: python return format, no tool-call tag, JSON
  function docs, plaintext, classic style, ``constants/default_prompts.py``): the
  system prompt below, prepended as a system message (merged into an existing one
  with ``"\\n\\n"``). Completion models get the same text as one plain prompt.

BFCL's own default temperature is 0.001; this workload sends 0 (greedy).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..evaluation import EvalItem, request_for
from ..records import ApiRequest, prompt_hash
from ..sweep import ModelSpec

HUB_REPO = "gorilla-llm/Berkeley-Function-Calling-Leaderboard"
RECORDS_FILE = "BFCL_v4_simple_python.json"
ANSWERS_FILE = "possible_answer_BFCL_v4_simple_python.json"
"""The shared data folder's flat name for the possible answers."""
HUB_CANDIDATES: tuple[tuple[str, str], ...] = (
    ("BFCL_v4_simple_python.json", "possible_answer/BFCL_v4_simple_python.json"),
    ("BFCL_v3_simple.json", "possible_answer/BFCL_v3_simple.json"),
)
"""(records, answers) file names to try on the Hub dataset, newest first."""
FULL_SIZE = 400
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
_OUTPUT_FORMAT = "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"
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


@dataclass(frozen=True)
class BfclRecord:
    """One BFCL simple record joined with its possible answers.

    ``question`` is BFCL's list of turns, each a list of ``{"role", "content"}``
    messages; ``ground_truth`` is ``[{function_name: {param: [accepted values]}}]``.
    """

    id: str
    question: list[list[dict[str, str]]] = field(hash=False)
    function: list[dict[str, Any]] = field(hash=False)
    ground_truth: list[dict[str, dict[str, list[Any]]]] = field(hash=False)
    source: str = field(default="", compare=False)

    @property
    def item_id(self) -> str:
        return self.id

    @property
    def data_hash(self) -> str:
        """Hash of the source record and its answers, for pairing items across models."""
        return prompt_hash(
            {
                "id": self.id,
                "question": self.question,
                "function": self.function,
                "ground_truth": self.ground_truth,
            }
        )

    @property
    def messages(self) -> list[dict[str, str]]:
        """The question's messages, all turns in order (the simple category has one turn)."""
        return [dict(message) for turn in self.question for message in turn]


# --- loading -------------------------------------------------------------------------------


def _read_lines(path: Path) -> list[tuple[int, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(
            f"{path}: cannot read BFCL file ({exc.strerror}); pass the BFCL data folder"
        ) from None
    rows: list[tuple[int, Any]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((lineno, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{path}:{lineno}: not valid JSON ({exc.msg}); BFCL files hold one JSON object a line"
            ) from None
    return rows


def _check_question(value: Any, where: str) -> list[list[dict[str, str]]]:
    shape = 'a list of turns, each a list of {"role", "content"} messages'
    if not isinstance(value, list) or not value:
        raise DataError(f'{where}: field "question" must be {shape}')
    for turn in value:
        if not isinstance(turn, list) or not turn:
            raise DataError(f'{where}: field "question" must be {shape}, got a turn of {type(turn).__name__}')
        for message in turn:
            if not (
                isinstance(message, dict)
                and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)
            ):
                raise DataError(
                    f'{where}: field "question" has a message without string "role" and "content"'
                )
    return value


def _check_functions(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise DataError(f'{where}: field "function" must be a non-empty list of function docs')
    for doc in value:
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            raise DataError(f'{where}: field "function" has an entry without a string "name"')
        params = doc.get("parameters")
        if not isinstance(params, dict) or not isinstance(params.get("properties"), dict):
            raise DataError(
                f'{where}: function {doc["name"]!r} needs "parameters" with a "properties" object'
            )
        required = params.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise DataError(f'{where}: function {doc["name"]!r} has "required" that is not a list of names')
    return value


def _check_ground_truth(value: Any, where: str) -> list[dict[str, dict[str, list[Any]]]]:
    shape = "a list of {function_name: {param: [accepted values]}}"
    if not isinstance(value, list) or not value:
        raise DataError(f'{where}: field "ground_truth" must be {shape}')
    for call in value:
        if not isinstance(call, dict) or len(call) != 1:
            raise DataError(
                f'{where}: field "ground_truth" must be {shape}; an entry has not exactly one name'
            )
        params = next(iter(call.values()))
        if not isinstance(params, dict) or not all(isinstance(v, list) for v in params.values()):
            raise DataError(f'{where}: field "ground_truth" must be {shape}; accepted values must be lists')
    return value


def _field(row: Any, key: str, where: str) -> Any:
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if key not in row:
        raise DataError(f'{where}: missing field "{key}"; fix or regenerate the BFCL file')
    return row[key]


def _join(records_path: Path, answers_path: Path, source: str) -> list[BfclRecord]:
    answers: dict[str, tuple[int, list[dict[str, dict[str, list[Any]]]]]] = {}
    for lineno, row in _read_lines(answers_path):
        where = f"{answers_path}:{lineno}"
        ident = _field(row, "id", where)
        if not isinstance(ident, str):
            raise DataError(f'{where}: field "id" must be a string')
        if ident in answers:
            raise DataError(f"{where}: duplicate id {ident!r} (first on line {answers[ident][0]})")
        answers[ident] = (lineno, _check_ground_truth(_field(row, "ground_truth", where), where))

    records: list[BfclRecord] = []
    seen: dict[str, int] = {}
    for lineno, row in _read_lines(records_path):
        where = f"{records_path}:{lineno}"
        ident = _field(row, "id", where)
        if not isinstance(ident, str):
            raise DataError(f'{where}: field "id" must be a string')
        if ident in seen:
            raise DataError(f"{where}: duplicate id {ident!r} (first on line {seen[ident]})")
        seen[ident] = lineno
        question = _check_question(_field(row, "question", where), where)
        functions = _check_functions(_field(row, "function", where), where)
        if ident not in answers:
            raise DataError(
                f"{where}: record {ident!r} has no possible answer in {answers_path}; use matching files"
            )
        records.append(BfclRecord(ident, question, functions, answers[ident][1], source))
    for ident, (lineno, _) in answers.items():
        if ident not in seen:
            raise DataError(
                f"{answers_path}:{lineno}: answer {ident!r} has no record in {records_path}; use matching files"
            )
    return records


def _local_files(path: Path) -> tuple[Path, Path]:
    if path.is_dir():
        records = path / RECORDS_FILE
    else:
        records, path = path, path.parent
    for answers in (path / f"possible_answer_{records.name}", path / "possible_answer" / records.name):
        if answers.is_file():
            break
    else:
        answers = path / f"possible_answer_{records.name}"
    if not records.is_file():
        raise DataError(f"{records}: BFCL records file not found; pass the folder holding {RECORDS_FILE}")
    if not answers.is_file():
        raise DataError(
            f"{answers}: BFCL possible answers not found; put {answers.name} (or possible_answer/{records.name}) "
            f"beside {records.name}"
        )
    return records, answers


def _hub_files() -> tuple[Path, Path, str]:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    tried: list[str] = []
    for records_name, answers_name in HUB_CANDIDATES:
        try:
            records = hf_hub_download(repo_id=HUB_REPO, repo_type="dataset", filename=records_name)
            answers = hf_hub_download(repo_id=HUB_REPO, repo_type="dataset", filename=answers_name)
        except EntryNotFoundError:
            tried.append(f"{records_name} + {answers_name}")
            continue
        except Exception as exc:  # noqa: BLE001 - network, auth, cache: one line for the user
            raise DataError(
                f"hf:{HUB_REPO}: could not download BFCL data ({type(exc).__name__}: {exc}); "
                "pass a local BFCL data folder instead"
            ) from None
        return Path(str(records)), Path(str(answers)), f"hf:{HUB_REPO}/{records_name}"
    raise DataError(
        f"hf:{HUB_REPO}: none of the BFCL simple-python files exist in the dataset (tried {'; '.join(tried)}); "
        "pass a local BFCL data folder instead"
    )


def load_bfcl(path: str | Path | None) -> list[BfclRecord]:
    """Load BFCL simple-python records joined with their possible answers.

    ``path`` is a folder holding ``BFCL_v4_simple_python.json`` and
    ``possible_answer_BFCL_v4_simple_python.json`` (or BFCL's
    ``possible_answer/BFCL_v4_simple_python.json``), or the records file itself;
    ``None`` downloads the same files from the Hub dataset
    ``gorilla-llm/Berkeley-Function-Calling-Leaderboard`` (v4 names first, then
    the v3 ``BFCL_v3_simple.json``).
    """
    if path is None:
        records, answers, source = _hub_files()
    else:
        records, answers = _local_files(Path(path))
        source = str(records)
    return _join(records, answers, source)


def expect_full_bfcl_set(records: Sequence[BfclRecord]) -> None:
    """Raise DataError unless a full (un-limited) run has exactly 400 records."""
    if len(records) != FULL_SIZE:
        source = records[0].source if records else "BFCL simple set"
        raise DataError(
            f"{source}: {len(records)} BFCL simple records, expected {FULL_SIZE}; "
            "use the complete simple_python category (or limit the run explicitly)"
        )


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
            value["description"] = str(value.get("description", "")) + " This is a float type value."
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
    functions: Sequence[dict[str, Any]], *, underscore_to_dot: bool = True
) -> list[dict[str, Any]]:
    """BFCL function docs to OpenAI ``tools`` as BFCL's OpenAI handler converts them.

    ``"dict"`` becomes ``"object"``, ``"float"`` ``"number"`` (with ``format: float``
    and a note in the description), ``"tuple"`` ``"array"``, ``"any"`` ``"string"``;
    the top-level ``parameters`` become ``"type": "object"``; with
    ``underscore_to_dot`` (as for OpenAI-style servers) dots in names become underscores.
    """
    tools: list[dict[str, Any]] = []
    for doc in copy.deepcopy(list(functions)):
        if underscore_to_dot and "." in doc["name"]:
            doc["name"] = doc["name"].replace(".", "_")
        params = doc.setdefault("parameters", {})
        params["type"] = "object"
        params["properties"] = _cast_properties(params.get("properties", {}))
        tools.append({"type": "function", "function": doc})
    return tools


# --- prompts and requests ------------------------------------------------------------------


def bfcl_system_prompt(functions: Sequence[dict[str, Any]]) -> str:
    """BFCL's default prompt-mode system prompt for these function docs (listed as indented JSON)."""
    available = (
        "Here is a list of functions in json format that you can invoke.\n"
        + json.dumps(list(functions), indent=4)
        + "\n"
    )
    return f"{_PERSONA}{_TASK}\n\n{_TOOL_CALL_FORMAT}\n\n{_MULTITURN}\n\n{available}"


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
    messages = prompt_mode_messages(record)
    parts = [messages[0]["content"].rstrip("\n")]
    parts += [f"{m['role'].capitalize()}: {m['content']}" for m in messages[1:]]
    return "\n\n".join(parts) + "\n\nAssistant:"


def bfcl_skip_reason(model: ModelSpec) -> str | None:
    """Why BFCL cannot run for this model as configured, or None."""
    if model.bfcl_mode == "tools" and not model.tool_call_parser:
        return f'no tool-call parser for {model.name} (set bfcl_mode = "prompt" to use BFCL\'s prompt mode)'
    return None


def bfcl_eval_item(
    record: BfclRecord, model: ModelSpec, *, max_tokens: int = DEFAULT_MAX_TOKENS
) -> EvalItem:
    """One record as an item of the public API, in the model's ``bfcl_mode``, greedy.

    Tools mode: the question's messages with the record's functions as ``tools``. Prompt
    mode: BFCL's system prompt with the question, as a plain prompt (with
    :data:`COMPLETION_STOP`) for a completion model, as messages for a chat model. The
    item differs between models, so its ``data_hash`` is the record's; ``data`` is the record.
    """
    common: dict[str, Any] = {"max_tokens": max_tokens, "temperature": 0.0, "data": record,
                              "data_hash": record.data_hash}
    if model.bfcl_mode == "tools":
        return EvalItem(record.id, messages=record.messages,
                        tools=to_openai_tools(bfcl_function_docs(record)), **common)
    if model.prompting == "completion":
        return EvalItem(record.id, prompt=prompt_mode_completion(record), stop=COMPLETION_STOP,
                        **common)
    return EvalItem(record.id, messages=prompt_mode_messages(record), **common)


def build_bfcl_request(
    record: BfclRecord, model: ModelSpec, *, max_tokens: int = DEFAULT_MAX_TOKENS
) -> ApiRequest:
    """The request for one record, in the model's ``bfcl_mode`` (payload without ``model``):
    :func:`bfcl_eval_item` as the public API renders it (what the bench sends)."""
    return request_for(bfcl_eval_item(record, model, max_tokens=max_tokens), model.prompting)
