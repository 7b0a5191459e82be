"""BFCL's own code (``bfcl-eval``) run on a list of operations: the reference for tests/test_conformance_bfcl.py.

Reads one JSON document on stdin::

    {"data_dir": "<folder with BFCL_v4_simple_python.json and its possible answers>",
     "extra_entries": [{"id", "question", "function", "ground_truth"}, ...],   # optional
     "ops": [op, ...]}

and writes ``[result, ...]``, one per op and in order, on stdout. Records are loaded with
BFCL's ``load_file``; request building sees them with BFCL's language hint
(``add_language_specific_hint_to_function_doc``, as generation loads them), the checker
without it (as evaluation does). The ops:

* ``{"op": "check", "id", "calls", "underscore_to_dot"}``: ``ast_checker`` on ``calls``, a
  Python literal (so tuples survive the trip) of the decoded ``[{name: {param: value}}]``
  -> ``{"valid", "error_type"}``.
* ``{"op": "decode_prompt", "text"}``: ``default_decode_ast_prompting`` ->
  ``{"decoded": repr(output), "format_ok": is_function_calling_format_output(output)}``.
* ``{"op": "score_prompt", "id", "text"}``: the evaluation of one prompt-mode answer,
  ``_evaluate_single_ast_entry`` with ``OpenAICompletionsHandler`` as a prompting model
  -> ``{"valid", "error_type"}``.
* ``{"op": "decode_tools", "message"}``: ``choices[0].message`` (JSON) of a tools-mode
  response through ``OpenAICompletionsHandler._parse_query_response_FC``, the result
  file's JSON round trip, then the handler's ``decode_ast`` as an FC model ->
  ``{"decoded", "format_ok"}`` as for ``decode_prompt``.
* ``{"op": "score_tools", "id", "message"}``: the same, evaluated by
  ``_evaluate_single_ast_entry`` -> ``{"valid", "error_type"}``.
* ``{"op": "tools_request", "id"}``: the FC request BFCL's OpenAI completions handler
  builds -> ``{"messages", "tools"}``.
* ``{"op": "prompt_messages", "id"}``: the messages BFCL's prompting path sends.

An exception raised by BFCL's code is a result too: ``{"error": "<type name>"}``.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORDS_FILE = "BFCL_v4_simple_python.json"
ANSWERS_FILE = "possible_answer_BFCL_v4_simple_python.json"
CATEGORY = "simple_python"
# Registry names in the stand-in MODEL_CONFIG_MAPPING (no "_": BFCL maps "_" to "/" first).
PROMPT_MODEL = "dots"
FC_MODEL = "underscores"


@dataclass(frozen=True)
class _ModelConfig:
    underscore_to_dot: bool


def _install_model_registry() -> None:
    """The one module of BFCL's replaced here: its model registry.

    ``bfcl_eval.constants.model_config`` imports every vendor's SDK. The checker reads
    only ``MODEL_CONFIG_MAPPING[name].underscore_to_dot`` from it (``convert_func_name``),
    so this registry maps one name to each value of that flag.
    """
    config = types.ModuleType("bfcl_eval.constants.model_config")
    config.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
        PROMPT_MODEL: _ModelConfig(underscore_to_dot=False),
        FC_MODEL: _ModelConfig(underscore_to_dot=True),
    }
    sys.modules[config.__name__] = config


def _sdk_response(message: dict[str, Any]) -> Any:
    """The OpenAI SDK's ``ChatCompletion`` for a response with this ``choices[0].message``."""
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    "message": {"role": "assistant", **message},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


class Reference:
    """BFCL's modules, imported once, and the records by id."""

    def __init__(self, data_dir: str, extra_entries: list[dict[str, Any]]) -> None:
        from bfcl_eval.constants.enums import Language, ModelStyle, ReturnFormat
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        from bfcl_eval.eval_checker.eval_runner import _evaluate_single_ast_entry
        from bfcl_eval.model_handler.api_inference.openai_completion import (
            OpenAICompletionsHandler,
        )
        from bfcl_eval.model_handler.utils import default_decode_ast_prompting
        from bfcl_eval.utils import (
            add_language_specific_hint_to_function_doc,
            is_function_calling_format_output,
            load_file,
            make_json_serializable,
        )

        self.language, self.return_format = Language.PYTHON, ReturnFormat.PYTHON
        self.ast_checker = ast_checker
        self.evaluate = _evaluate_single_ast_entry
        self.decode_prompting = default_decode_ast_prompting
        self.is_format_ok = is_function_calling_format_output
        self.make_json_serializable = make_json_serializable

        folder = Path(data_dir)
        prompts = load_file(folder / RECORDS_FILE, use_lock=False)
        answers = load_file(folder / ANSWERS_FILE, use_lock=False)
        for extra in extra_entries:
            prompts.append({key: extra[key] for key in ("id", "question", "function")})
            answers.append({"id": extra["id"], "ground_truth": extra["ground_truth"]})
        self.prompts = {entry["id"]: entry for entry in prompts}
        self.answers = {entry["id"]: entry["ground_truth"] for entry in answers}
        hinted = add_language_specific_hint_to_function_doc(copy.deepcopy(prompts))
        self.hinted = {entry["id"]: entry for entry in hinted}

        # The handler's __init__ only builds the OpenAI client; the methods used here need
        # just these attributes.
        def handler(is_fc_model: bool, registry_name: str) -> Any:
            made = object.__new__(OpenAICompletionsHandler)
            made.model_name = made.registry_name = registry_name
            made.is_fc_model = is_fc_model
            made.temperature = 0.001
            made.model_style = ModelStyle.OPENAI_COMPLETIONS
            return made

        self.prompt_handler = handler(False, PROMPT_MODEL)
        self.fc_handler = handler(True, FC_MODEL)

    def _verdict(self, result: dict[str, Any]) -> dict[str, Any]:
        return {"valid": bool(result["valid"]), "error_type": result.get("error_type")}

    def check(self, op: dict[str, Any]) -> dict[str, Any]:
        model = FC_MODEL if op["underscore_to_dot"] else PROMPT_MODEL
        calls = ast.literal_eval(op["calls"])
        result = self.ast_checker(
            self.prompts[op["id"]]["function"],
            calls,
            self.answers[op["id"]],
            self.language,
            CATEGORY,
            model,
        )
        return self._verdict(result)

    def decode_prompt(self, op: dict[str, Any]) -> dict[str, Any]:
        decoded = self.decode_prompting(op["text"], self.return_format, False)
        return {"decoded": repr(decoded), "format_ok": self.is_format_ok(decoded)}

    def _score(self, handler: Any, ident: str, model_result: Any, model: str) -> dict[str, Any]:
        result = self.evaluate(
            handler,
            ident,
            model_result,
            self.answers[ident],
            self.prompts[ident],
            model,
            CATEGORY,
            language=self.language,
            return_format=self.return_format,
            has_tool_call_tag=False,
        )
        return self._verdict(result)

    def score_prompt(self, op: dict[str, Any]) -> dict[str, Any]:
        # The text is stored as is (a JSON string, or null) in BFCL's result file.
        return self._score(self.prompt_handler, op["id"], op["text"], PROMPT_MODEL)

    def _stored_tools_result(self, message: dict[str, Any]) -> Any:
        parsed = self.fc_handler._parse_query_response_FC(_sdk_response(message))
        # As BaseHandler.write and the evaluation's load_file: the result goes through a JSON file.
        return json.loads(json.dumps(self.make_json_serializable(parsed["model_responses"])))

    def decode_tools(self, op: dict[str, Any]) -> dict[str, Any]:
        decoded = self.fc_handler.decode_ast(
            self._stored_tools_result(op["message"]), self.return_format, False
        )
        return {"decoded": repr(decoded), "format_ok": self.is_format_ok(decoded)}

    def score_tools(self, op: dict[str, Any]) -> dict[str, Any]:
        return self._score(
            self.fc_handler, op["id"], self._stored_tools_result(op["message"]), FC_MODEL
        )

    def tools_request(self, op: dict[str, Any]) -> dict[str, Any]:
        entry = copy.deepcopy(self.hinted[op["id"]])
        handler = self.fc_handler
        data = handler._pre_query_processing_FC({}, entry)
        data = handler._compile_tools(data, entry)
        data = handler.add_first_turn_message_FC(data, entry["question"][0])
        return {"messages": data["message"], "tools": data["tools"]}

    def prompt_messages(self, op: dict[str, Any]) -> dict[str, Any]:
        entry = copy.deepcopy(self.hinted[op["id"]])
        handler = self.prompt_handler
        data = handler._pre_query_processing_prompting(entry)
        data = handler.add_first_turn_message_prompting(data, entry["question"][0])
        return {"messages": data["message"]}

    def run(self, op: dict[str, Any]) -> dict[str, Any]:
        method = getattr(self, op["op"])
        try:
            return method(op)  # type: ignore[no-any-return]
        except Exception as exc:
            return {"error": type(exc).__name__}


def main() -> None:
    payload = json.load(sys.stdin)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # BFCL prints while importing and working
    # eval_config creates result/, score/ and .file_locks/ under BFCL_PROJECT_ROOT on import.
    project_root = tempfile.mkdtemp(prefix="bfcl-reference-")
    os.environ["BFCL_PROJECT_ROOT"] = project_root
    try:
        _install_model_registry()
        reference = Reference(payload["data_dir"], payload.get("extra_entries", []))
        results = [reference.run(op) for op in payload["ops"]]
    finally:
        shutil.rmtree(project_root, ignore_errors=True)
        sys.stdout = real_stdout
    json.dump(results, real_stdout)


if __name__ == "__main__":
    main()
