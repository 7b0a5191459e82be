"""GSM8K: requests as lm-evaluation-harness's ``gsm8k`` task (``gsm8k.yaml`` version 3.0)
sends them from its ``local-completions`` / ``local-chat-completions`` models: 5-shot from
``train`` (:class:`Gsm8kFewshot`), greedy, its ``until`` strings as ``stop``, request ``seed``
1234; a completion model gets the plain few-shot prompt, a chat model the
``--fewshot_as_multiturn`` transcript.
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
    """lm-eval's default few-shot sampler for ``gsm8k``: one ``random.Random(seed)`` per task,
    ``rnd.sample(train_docs, 5)`` per document in order (one extra from the evaluated split,
    the document dropped): test index ``i`` gets the ``i``-th draw, whatever subset runs."""

    train: Sequence[Gsm8kProblem]
    num_fewshot: int = NUM_FEWSHOT
    seed: int = FEWSHOT_SEED
    eval_split: str = "test"
    _draws: list[list[int]] = field(default_factory=list, init=False, repr=False)
    _rnd: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.train) < self.num_fewshot + 1:
            raise DataError(
                f"{self.train[0].source if self.train else 'GSM8K few-shot split'}: {len(self.train)} few-shot records, need at least {self.num_fewshot + 1}; "
                "use the GSM8K train split"
            )
        self._rnd = random.Random(self.seed)

    def _draw(self, index: int) -> list[int]:
        same_split = bool(self.train) and self.train[0].split == self.eval_split
        size = self.num_fewshot + 1 if same_split else self.num_fewshot
        while len(self._draws) <= index:
            self._draws.append(self._rnd.sample(range(len(self.train)), size))
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
    return "".join(
        doc_to_text(shot) + TARGET_DELIMITER + shot.answer + FEWSHOT_DELIMITER for shot in exemplars
    ) + doc_to_text(problem)


def chat_messages(problem: Gsm8kProblem, exemplars: Sequence[Gsm8kProblem]) -> list[dict[str, str]]:
    """lm-eval's ``--apply_chat_template --fewshot_as_multiturn`` transcript."""
    return [
        *(
            message
            for shot in exemplars
            for message in (
                {"role": "user", "content": doc_to_text(shot)},
                {"role": "assistant", "content": shot.answer},
            )
        ),
        {"role": "user", "content": doc_to_text(problem)},
    ]


def gsm8k_eval_item(
    problem: Gsm8kProblem,
    exemplars: Sequence[Gsm8kProblem],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> EvalItem:
    """One problem as an item of the public API; ``answer`` is the raw ``answer`` field."""
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
    """The request the bench sends for one problem; ``fewshot``: the sampler or the
    exemplars themselves."""
    exemplars = fewshot.exemplars(problem) if isinstance(fewshot, Gsm8kFewshot) else tuple(fewshot)
    return request_for(gsm8k_eval_item(problem, exemplars, max_tokens=max_tokens), model.prompting)
