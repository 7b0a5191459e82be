"""GSM8K's records: ``question`` and a worked ``answer``, from a JSONL file or the Hub.

The test split has 1,319 problems, the train split (few-shot exemplars) 7,473. Every bad
file or record fails in one line naming the file, the line and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import DataError
from ..core.records import prompt_hash
from ..core.text_files import read_jsonl

HUB_DATASET = "openai/gsm8k"
HUB_CONFIG = "main"
FULL_TEST_SIZE = 1319


@dataclass(frozen=True)
class Gsm8kProblem:
    """One GSM8K record: ``question`` and the worked ``answer`` ending in ``#### <number>``."""

    item_id: str
    index: int
    split: str
    question: str
    answer: str
    source: str = ""

    @property
    def data_hash(self) -> str:
        """Hash of the source record (question and answer), for pairing items across models."""
        return prompt_hash({"question": self.question, "answer": self.answer})


def _problem(record: Any, index: int, split: str, where: str, source: str) -> Gsm8kProblem:
    if not isinstance(record, dict):
        raise DataError(
            f'{where}: expected a JSON object with "question" and "answer", got {type(record).__name__}'
        )
    for key in ("question", "answer"):
        if key not in record:
            raise DataError(
                f'{where}: missing field "{key}"; each record needs "question" and "answer" strings'
            )
        if not isinstance(record[key], str):
            raise DataError(
                f'{where}: field "{key}" must be a string, got {type(record[key]).__name__}; fix the record'
            )
    return Gsm8kProblem(
        item_id=f"gsm8k-{split}-{index:04d}",
        index=index,
        split=split,
        question=record["question"],
        answer=record["answer"],
        source=source,
    )


def load_gsm8k(path: str | Path | None, *, split: str = "test") -> list[Gsm8kProblem]:
    """Load a GSM8K split: ``None`` from the Hub, else a JSONL file (a folder stands for
    ``<folder>/<split>.jsonl``); ids ``gsm8k-<split>-<index:04d>`` are stable across sources."""
    if path is None:
        return _hub_problems(split)
    file = Path(path)
    if file.is_dir():
        file = file / f"{split}.jsonl"
    if not file.is_file():
        raise DataError(
            f"{file}: GSM8K file not found; pass the JSONL file of split {split!r} or its folder"
        )
    lines = read_jsonl(
        file,
        "GSM8K",
        "pass an existing JSONL file",
        'each line must be one JSON object with "question" and "answer"',
    )
    return [
        _problem(record, index, split, f"{file}:{lineno}", str(file))
        for index, (lineno, _, record) in enumerate(lines)
    ]


def _hub_problems(split: str) -> list[Gsm8kProblem]:
    source = f"hf:{HUB_DATASET}/{HUB_CONFIG}/{split}"
    try:
        import datasets

        rows = datasets.load_dataset(HUB_DATASET, HUB_CONFIG, split=split)
    except Exception as exc:
        raise DataError(
            f"{source}: could not load GSM8K from the Hugging Face Hub ({type(exc).__name__}: {exc}); "
            "pass a local JSONL path instead"
        ) from None
    return [
        _problem(dict(row), i, split, f"{source} record {i}", source) for i, row in enumerate(rows)
    ]


def load_gsm8k_fewshot(test_path: str | Path | None) -> list[Gsm8kProblem]:
    """The train split for exemplars: ``train.jsonl`` beside a local test file, or the Hub's ``train``."""
    if test_path is None:
        return load_gsm8k(None, split="train")
    test = Path(test_path)
    train = (test if test.is_dir() else test.parent) / "train.jsonl"
    if not train.is_file():
        raise DataError(
            f"{train}: GSM8K train split not found beside {test}; few-shot exemplars come from train.jsonl "
            "in the same folder"
        )
    return load_gsm8k(train, split="train")
