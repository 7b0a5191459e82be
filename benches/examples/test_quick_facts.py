"""Quick facts: your own accuracy benchmark in one file, the example to copy.

30 short questions with exact answers (``quick_facts.jsonl``, written for this example),
scored by exact match of the normalized answer. ``pytest benches/examples -m quick_facts``
measures every model of the sweep, stores each answer, and judges each candidate against
the reference item by item (``test_verdict[<candidate>-quick_facts]``). The walk-through
is docs/writing-benchmarks.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_modelsweep import Completion, EvalItem, Evaluate, Score

FACTS = Path(__file__).with_name("quick_facts.jsonl")
# An instruction and two worked examples before each question: a base (completion) model
# sees the answer format in its plain-text transcript, a chat model in its turns.
TURNS = [{"role": "system", "content": "Answer with one word or number only."},
         {"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"},
         {"role": "user", "content": "What is the capital of Italy?"},
         {"role": "assistant", "content": "Rome"}]


def normalized(text: str) -> str:
    """The answer's first non-empty line, lower-cased, without surrounding spaces or punctuation."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0].strip().strip(".!?\"'").lower() if lines else ""


def exact_match(completion: Completion, item: EvalItem) -> Score:
    """Right when the normalized answer is one of the item's accepted answers."""
    answer = normalized(completion.text or "")
    return Score(answer in {normalized(accepted) for accepted in item.answer}, answer=answer)


def quick_facts() -> list[EvalItem]:
    records = [json.loads(line) for line in FACTS.read_text(encoding="utf-8").splitlines()]
    return [EvalItem(r["id"], messages=[*TURNS, {"role": "user", "content": r["question"]}],
                     answer=r["answers"], max_tokens=16, stop=["\n\n"]) for r in records]


@pytest.mark.modelsweep_benchmark("quick_facts")
def test_quick_facts(evaluate: Evaluate) -> None:
    evaluate("quick_facts", quick_facts(), exact_match, concurrency=8)
