"""GSM8K answer extraction and exact match, as lm-evaluation-harness's ``gsm8k`` task scores it.

Reproduced from ``gsm8k.yaml`` (version 3.0), ``RegexFilter`` and ``exact_match_hf_evaluate``
(the conformance test runs lm-eval's own code): ``strict-match`` takes the first ``####``
number, ``flexible-extract`` the last number-like match's first non-empty group; no match
is ``[invalid]``. ``exact_match`` removes :data:`REGEXES_TO_IGNORE` from prediction and the
*whole* reference, lower-cases both, and compares (``"18.00"`` does not match ``"18"``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..api.evaluation import EvalItem, Score
from ..core.records import Completion, ItemRecord

STRICT_PATTERN = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_PATTERN = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
REGEXES_TO_IGNORE: tuple[str, ...] = (",", "\\$", "(?s).*#### ", "\\.$")
INVALID = "[invalid]"
"""lm-eval's ``RegexFilter`` fallback when nothing matches."""


def _regex_filter(pattern: re.Pattern[str], text: str, group_select: int) -> str | None:
    matches = pattern.findall(text)
    if not matches:
        return None
    match = matches[group_select]
    if isinstance(match, tuple):
        match = next(group for group in match if group)
    return str(match).strip()


def strict_match(text: str) -> str | None:
    """lm-eval's ``strict-match`` filter: the number after the first ``#### ``, or None."""
    return _regex_filter(STRICT_PATTERN, text, 0)


def flexible_extract(text: str) -> str | None:
    """lm-eval's ``flexible-extract`` filter: the last number-like token, or None."""
    return _regex_filter(FLEXIBLE_PATTERN, text, -1)


def normalise(text: str) -> str:
    """lm-eval's ``exact_match`` preprocessing for this task (regexes removed, lower-cased)."""
    for pattern in REGEXES_TO_IGNORE:
        text = re.sub(pattern, "", text)
    return text.lower()


@dataclass(frozen=True)
class Gsm8kScore:
    """Both filters' verdicts on one generation; an ``*_extracted`` of None means ``[invalid]``."""

    strict_correct: bool
    flexible_correct: bool
    strict_extracted: str | None
    flexible_extracted: str | None


def score_gsm8k(text: str, reference: str) -> Gsm8kScore:
    """Score a generation against the raw ``answer`` field; an invalid extraction compares
    as ``[invalid]``."""
    gold = normalise(reference)
    strict = strict_match(text)
    flexible = flexible_extract(text)
    return Gsm8kScore(
        normalise(INVALID if strict is None else strict) == gold,
        normalise(INVALID if flexible is None else flexible) == gold,
        strict,
        flexible,
    )


def score_gsm8k_answer(completion: Completion, item: EvalItem) -> Score:
    """The GSM8K scorer of the public API (``item.answer``: the raw ``answer`` field): ``value``
    is the ``flexible-extract`` verdict; ``answer`` and ``scores`` hold both filters'."""
    score = score_gsm8k(completion.text or "", str(item.answer))
    return Score(
        score.flexible_correct,
        answer={
            "strict-match": score.strict_extracted,
            "flexible-extract": score.flexible_extracted,
        },
        scores={"strict-match": score.strict_correct, "flexible-extract": score.flexible_correct},
    )


def summarise_gsm8k(records: Sequence[ItemRecord]) -> dict[str, Any]:
    """Accuracy of both filters (``accuracy``: flexible-extract), invalid and truncated rates,
    the failed count; ``n`` and the rates count answered items only."""
    answered = [r for r in records if not r.failed]
    n = len(answered)

    def rate(count: int) -> float:
        return count / n if n else 0.0

    flexible = sum(bool(r.scores.get("flexible-extract")) for r in answered)
    return {
        "n": n,
        "items": len(records),
        "failed": len(records) - n,
        "accuracy": rate(flexible),
        "strict_match_accuracy": rate(sum(bool(r.scores.get("strict-match")) for r in answered)),
        "flexible_extract_accuracy": rate(flexible),
        "strict_match_invalid_rate": rate(
            sum(r.extracted_value("strict-match") is None for r in answered)
        ),
        "flexible_extract_invalid_rate": rate(
            sum(r.extracted_value("flexible-extract") is None for r in answered)
        ),
        "truncated_rate": rate(sum(r.finish_reason == "length" for r in answered)),
    }
