"""BFCL "simple" records joined with their possible answers, from files or the Hub.

One JSON object a line (BFCL's ``load_file``); records and possible answers are
joined by ``id``. Every bad file or record fails in one line naming the file,
the line and the fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import DataError
from ..core.records import prompt_hash
from ..core.text_files import read_jsonl

HUB_REPO = "gorilla-llm/Berkeley-Function-Calling-Leaderboard"
RECORDS_FILE = "BFCL_v4_simple_python.json"
HUB_CANDIDATES: tuple[tuple[str, str], ...] = (
    ("BFCL_v4_simple_python.json", "possible_answer/BFCL_v4_simple_python.json"),
    ("BFCL_v3_simple.json", "possible_answer/BFCL_v3_simple.json"),
)
"""(records, answers) file names to try on the Hub dataset, newest first."""
FULL_SIZE = 400


@dataclass(frozen=True)
class BfclRecord:
    """One BFCL simple record joined with its possible answers: ``question`` is a list of
    turns of messages; ``ground_truth`` is ``[{function_name: {param: [accepted values]}}]``."""

    id: str
    question: list[list[dict[str, str]]] = field(hash=False)
    function: list[dict[str, Any]] = field(hash=False)
    ground_truth: list[dict[str, dict[str, list[Any]]]] = field(hash=False)
    source: str = field(default="", compare=False)

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


def _check_question(value: Any, where: str) -> list[list[dict[str, str]]]:
    shape = 'a list of turns, each a list of {"role", "content"} messages'
    if not isinstance(value, list) or not value:
        raise DataError(f'{where}: field "question" must be {shape}')
    for turn in value:
        if not isinstance(turn, list) or not turn:
            raise DataError(
                f'{where}: field "question" must be {shape}, got a turn of {type(turn).__name__}'
            )
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
            raise DataError(
                f'{where}: function {doc["name"]!r} has "required" that is not a list of names'
            )
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
            raise DataError(
                f'{where}: field "ground_truth" must be {shape}; accepted values must be lists'
            )
    return value


def _field(row: Any, key: str, where: str) -> Any:
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if key not in row:
        raise DataError(f'{where}: missing field "{key}"; fix or regenerate the BFCL file')
    return row[key]


def _rows(path: Path, seen: dict[str, int]) -> Iterator[tuple[str, str, Any]]:
    """Each row of a BFCL file as ``(id, "PATH:LINE", row)``, its id noted in ``seen`` (id →
    line); a non-string or repeated id fails."""
    lines = read_jsonl(
        path, "BFCL", "pass the BFCL data folder", "BFCL files hold one JSON object a line"
    )
    for lineno, _, row in lines:
        where = f"{path}:{lineno}"
        ident = _field(row, "id", where)
        if not isinstance(ident, str):
            raise DataError(f'{where}: field "id" must be a string')
        if ident in seen:
            raise DataError(f"{where}: duplicate id {ident!r} (first on line {seen[ident]})")
        seen[ident] = lineno
        yield ident, where, row


def _join(records_path: Path, answers_path: Path, source: str) -> list[BfclRecord]:
    answer_lines: dict[str, int] = {}
    answers = {
        ident: _check_ground_truth(_field(row, "ground_truth", where), where)
        for ident, where, row in _rows(answers_path, answer_lines)
    }
    records: list[BfclRecord] = []
    seen: dict[str, int] = {}
    for ident, where, row in _rows(records_path, seen):
        question = _check_question(_field(row, "question", where), where)
        functions = _check_functions(_field(row, "function", where), where)
        if ident not in answers:
            raise DataError(
                f"{where}: record {ident!r} has no possible answer in {answers_path}; use matching files"
            )
        records.append(BfclRecord(ident, question, functions, answers[ident], source))
    for ident, lineno in answer_lines.items():
        if ident not in seen:
            raise DataError(
                f"{answers_path}:{lineno}: answer {ident!r} has no record in {records_path}; use matching files"
            )
    return records


def _local_files(path: Path) -> tuple[Path, Path]:
    records, path = (path / RECORDS_FILE, path) if path.is_dir() else (path, path.parent)
    beside = path / f"possible_answer_{records.name}"
    answers = next(
        (
            answers
            for answers in (beside, path / "possible_answer" / records.name)
            if answers.is_file()
        ),
        beside,
    )
    if not records.is_file():
        raise DataError(
            f"{records}: BFCL records file not found; pass the folder holding {RECORDS_FILE}"
        )
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
        except Exception as exc:
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
    """Load BFCL simple-python records joined with their possible answers: ``path`` is the
    records file or its folder (answers beside it as ``possible_answer_NAME`` or
    ``possible_answer/NAME``); ``None`` downloads them from :data:`HUB_REPO`."""
    if path is None:
        records, answers, source = _hub_files()
    else:
        records, answers = _local_files(Path(path))
        source = str(records)
    return _join(records, answers, source)
