"""GSM8K: building requests as lm-evaluation-harness's ``gsm8k`` task.

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
  ``max_tokens`` is the sweep's ``[benchmarks.gsm8k] max_tokens`` (2,048 where a sweep
  sets none; the embedded sweep uses lm-eval's API default, 256), or ``--gsm8k-max-tokens``.
* Completion models: one ``/v1/completions`` request whose prompt is the
  exemplars, each ``"Question: q\\nAnswer: " + answer + "\\n\\n"``, then
  ``"Question: q\\nAnswer:"``.
* Chat models: lm-eval's ``--apply_chat_template --fewshot_as_multiturn`` messages:
  per exemplar a user turn ``"Question: q\\nAnswer:"`` and an assistant turn with the
  worked answer (no delimiter), then the test question as the last user turn.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..api.evaluation import EvalItem, request_for
from ..core.errors import DataError
from ..core.records import ApiRequest
from ..core.sweep import DEFAULT_GSM8K_MAX_TOKENS, ModelSpec
from ..data.gsm8k import Gsm8kProblem

NUM_FEWSHOT = 5
FEWSHOT_SEED = 1234
"""lm-eval's default ``fewshot_random_seed``."""
STOP: tuple[str, ...] = ("Question:", "</s>", "<|im_end|>")
TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"
REQUEST_SEED = 1234
"""The ``seed`` lm-eval's API models put in every request."""
DEFAULT_MAX_TOKENS = DEFAULT_GSM8K_MAX_TOKENS


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
    public API renders it for the model (:func:`~..api.evaluation.request_for`).
    """
    exemplars = fewshot.exemplars(problem) if isinstance(fewshot, Gsm8kFewshot) else tuple(fewshot)
    return request_for(gsm8k_eval_item(problem, exemplars, max_tokens=max_tokens), model.prompting)
