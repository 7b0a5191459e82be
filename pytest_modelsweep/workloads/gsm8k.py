"""GSM8K: loading the problems and building requests as lm-evaluation-harness's ``gsm8k`` task.

The prompt is lm-eval's ``gsm8k`` task (``lm_eval/tasks/gsm8k/gsm8k.yaml``,
version 3.0) run through an OpenAI-compatible server (lm-eval's
``local-completions`` / ``local-chat-completions`` models):

* ``doc_to_text``: ``"Question: {question}\\nAnswer:"``; ``doc_to_target``: the whole
  ``answer`` field; ``target_delimiter`` ``" "``; ``fewshot_delimiter`` ``"\\n\\n"``;
  no description or system prompt.
* 5-shot from the ``train`` split (``fewshot_split: train``, default sampler), see
  :class:`Gsm8kFewshot` for exactly how the exemplars are drawn.
* Generation: ``until: ["Question:", "</s>", "<|im_end|>"]`` sent as ``stop``,
  greedy (``temperature: 0.0``), and lm-eval's default request ``seed`` of 1234.
  ``max_tokens`` is this plugin's (2,048 by default, lm-eval's API default is 256).
* Completion models: one ``/v1/completions`` request whose prompt is the
  exemplars, each ``"Question: q\\nAnswer: " + answer + "\\n\\n"``, then
  ``"Question: q\\nAnswer:"``.
* Chat models: lm-eval's ``--apply_chat_template --fewshot_as_multiturn`` messages:
  per exemplar a user turn ``"Question: q\\nAnswer:"`` and an assistant turn with the
  worked answer (no delimiter), then the test question as the last user turn.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..evaluation import EvalItem, request_for
from ..records import ApiRequest, prompt_hash
from ..sweep import ModelSpec

HUB_DATASET = "openai/gsm8k"
HUB_CONFIG = "main"
FULL_TEST_SIZE = 1319
NUM_FEWSHOT = 5
FEWSHOT_SEED = 1234
"""lm-eval's default ``fewshot_random_seed``."""
STOP: tuple[str, ...] = ("Question:", "</s>", "<|im_end|>")
TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"
REQUEST_SEED = 1234
"""The ``seed`` lm-eval's API models put in every request."""
DEFAULT_MAX_TOKENS = 2048


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


def _jsonl_problems(path: Path, split: str) -> list[Gsm8kProblem]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(
            f"{path}: cannot read GSM8K file ({exc.strerror}); pass an existing JSONL file"
        ) from None
    problems: list[Gsm8kProblem] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{where}: not valid JSON ({exc.msg}); each line must be one JSON object "
                'with "question" and "answer"'
            ) from None
        problems.append(_problem(record, len(problems), split, where, str(path)))
    return problems


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
    """Load a GSM8K split: ``None`` from the Hub (``openai/gsm8k``, ``main``), else a JSONL file.

    A folder stands for ``<folder>/<split>.jsonl``. Ids are ``gsm8k-<split>-<index:04d>``
    with the 0-based record index, so they are stable across runs and sources.
    """
    if path is None:
        return _hub_problems(split)
    file = Path(path)
    if file.is_dir():
        file = file / f"{split}.jsonl"
    if not file.is_file():
        raise DataError(f"{file}: GSM8K file not found; pass the JSONL file of split {split!r} or its folder")
    return _jsonl_problems(file, split)


def _hub_problems(split: str) -> list[Gsm8kProblem]:
    source = f"hf:{HUB_DATASET}/{HUB_CONFIG}/{split}"
    try:
        import datasets

        rows = datasets.load_dataset(HUB_DATASET, HUB_CONFIG, split=split)
    except Exception as exc:  # noqa: BLE001 - network, missing split, cache problems: one line for the user
        raise DataError(
            f"{source}: could not load GSM8K from the Hugging Face Hub ({type(exc).__name__}: {exc}); "
            "pass a local JSONL path instead"
        ) from None
    return [_problem(dict(row), i, split, f"{source} record {i}", source) for i, row in enumerate(rows)]


def expect_full_test_set(problems: Sequence[Gsm8kProblem]) -> None:
    """Raise DataError unless a full (un-limited) test run has exactly 1,319 problems."""
    if len(problems) != FULL_TEST_SIZE:
        source = problems[0].source if problems else "GSM8K test set"
        raise DataError(
            f"{source}: {len(problems)} GSM8K test records, expected {FULL_TEST_SIZE}; "
            "use the complete test split (or limit the run explicitly)"
        )


def load_gsm8k_fewshot(test_path: str | Path | None) -> list[Gsm8kProblem]:
    """The train split for exemplars: ``train.jsonl`` beside a local test file, or the Hub's ``train``."""
    if test_path is None:
        return load_gsm8k(None, split="train")
    test = Path(test_path)
    folder = test if test.is_dir() else test.parent
    train = folder / "train.jsonl"
    if not train.is_file():
        raise DataError(
            f"{train}: GSM8K train split not found beside {test}; few-shot exemplars come from train.jsonl "
            "in the same folder"
        )
    return load_gsm8k(train, split="train")


@dataclass
class Gsm8kFewshot:
    """lm-eval's default few-shot sampler for ``gsm8k``, reproduced.

    lm-eval builds one ``random.Random(fewshot_random_seed)`` (1234 by default) per
    task, shares it across the task's documents, and for each evaluated document,
    in document order, calls ``rnd.sample(train_docs, 5)`` on the list of train
    records in file order (``ContextSampler.sample``); the draws come out in that
    sampled order. So the problem at test index ``i`` gets the ``i``-th draw of
    that generator, whatever subset of the test set this run evaluates. This matches
    a single-process lm-eval run (``--limit`` included); data-parallel ranks of
    lm-eval each restart the generator and so draw differently. If the evaluated
    split is the few-shot split, lm-eval draws one extra and drops the document
    itself; that is reproduced too.
    """

    train: Sequence[Gsm8kProblem]
    num_fewshot: int = NUM_FEWSHOT
    seed: int = FEWSHOT_SEED
    eval_split: str = "test"
    _draws: list[list[int]] = field(default_factory=list, init=False, repr=False)
    _rnd: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.train) < self.num_fewshot + 1:
            source = self.train[0].source if self.train else "GSM8K few-shot split"
            raise DataError(
                f"{source}: {len(self.train)} few-shot records, need at least {self.num_fewshot + 1}; "
                "use the GSM8K train split"
            )
        self._rnd = random.Random(self.seed)

    def _draw(self, index: int) -> list[int]:
        same_split = bool(self.train) and self.train[0].split == self.eval_split
        size = self.num_fewshot + 1 if same_split else self.num_fewshot
        population = list(range(len(self.train)))
        while len(self._draws) <= index:
            self._draws.append(self._rnd.sample(population, size))
        return self._draws[index]

    def exemplars(self, problem: Gsm8kProblem) -> tuple[Gsm8kProblem, ...]:
        """The exemplars lm-eval would show before ``problem``, in prompt order."""
        chosen = [self.train[i] for i in self._draw(problem.index)]
        kept = [p for p in chosen if (p.question, p.answer) != (problem.question, problem.answer)]
        return tuple(kept[: self.num_fewshot])


def doc_to_text(problem: Gsm8kProblem) -> str:
    """lm-eval's ``doc_to_text``: ``Question: {question}\\nAnswer:``."""
    return f"Question: {problem.question}\nAnswer:"


def completion_prompt(problem: Gsm8kProblem, exemplars: Sequence[Gsm8kProblem]) -> str:
    """The plain few-shot prompt lm-eval's ``fewshot_context`` builds without a chat template."""
    shots = "".join(
        doc_to_text(shot) + TARGET_DELIMITER + shot.answer + FEWSHOT_DELIMITER for shot in exemplars
    )
    return shots + doc_to_text(problem)


def chat_messages(problem: Gsm8kProblem, exemplars: Sequence[Gsm8kProblem]) -> list[dict[str, str]]:
    """lm-eval's ``--apply_chat_template --fewshot_as_multiturn`` transcript."""
    messages: list[dict[str, str]] = []
    for shot in exemplars:
        messages.append({"role": "user", "content": doc_to_text(shot)})
        messages.append({"role": "assistant", "content": shot.answer})
    messages.append({"role": "user", "content": doc_to_text(problem)})
    return messages


def gsm8k_eval_item(
    problem: Gsm8kProblem,
    exemplars: Sequence[Gsm8kProblem],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> EvalItem:
    """One problem as an item of the public API: lm-eval's plain few-shot prompt for
    completion models and its multi-turn transcript for chat models, greedy, lm-eval's
    stop strings and seed; ``answer`` is the raw ``answer`` field, ``data`` the problem."""
    return EvalItem(
        problem.item_id,
        messages=chat_messages(problem, exemplars),
        prompt=completion_prompt(problem, exemplars),
        answer=problem.answer,
        max_tokens=max_tokens,
        temperature=0.0,
        stop=STOP,
        seed=REQUEST_SEED,
        data=problem,
        data_hash=problem.data_hash,
    )


def build_gsm8k_request(
    problem: Gsm8kProblem,
    model: ModelSpec,
    fewshot: Gsm8kFewshot | Sequence[Gsm8kProblem],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> ApiRequest:
    """The request for one problem: completions for ``prompting == "completion"``, else chat.

    ``fewshot`` is the sampler (exemplars chosen as lm-eval does) or the exemplars
    themselves. It is the request the bench sends: :func:`gsm8k_eval_item` as the
    public API renders it for the model (:func:`~..evaluation.request_for`).
    """
    exemplars = fewshot.exemplars(problem) if isinstance(fewshot, Gsm8kFewshot) else tuple(fewshot)
    return request_for(gsm8k_eval_item(problem, exemplars, max_tokens=max_tokens), model.prompting)
