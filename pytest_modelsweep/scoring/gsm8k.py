"""GSM8K answer extraction and exact match, as lm-evaluation-harness's ``gsm8k`` task scores it.

Reproduced from ``lm_eval/tasks/gsm8k/gsm8k.yaml`` (version 3.0),
``lm_eval/filters/extraction.py`` (``RegexFilter``) and
``lm_eval/api/metrics.py`` (``exact_match_hf_evaluate``):

* ``strict-match``: ``#### (\\-?[0-9\\.\\,]+)``, the first match (``group_select: 0``),
  stripped; no match gives lm-eval's fallback ``[invalid]``.
* ``flexible-extract``: ``(-?[$0-9.,]{2,})|(-?[0-9]+)`` with ``group_select: -1``:
  ``re.findall`` gives one tuple per match, the last tuple is taken and, as
  ``RegexFilter`` does for a tuple, its first non-empty group, stripped.
* ``exact_match`` with ``ignore_case: true``, ``ignore_punctuation: false`` and
  ``regexes_to_ignore: [",", "\\$", "(?s).*#### ", "\\.$"]``: each regex is removed
  (``re.sub``, in that order) from the filtered prediction and from the *whole*
  reference ``answer`` field, both are lower-cased, and the two strings must be equal.
  Nothing else is stripped or converted (``"18.00"`` does not match ``"18"``).

:func:`score_gsm8k_answer` is the scorer the bench hands to the public ``evaluate``
fixture (whose :func:`~..api.evaluation.scored_record` makes the item's record); the
conformance test runs it that way against lm-eval's own code.
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
    """Score a generation against the raw ``answer`` field (normalised here once, as lm-eval does).

    An invalid extraction is compared as lm-eval's ``[invalid]`` string, which
    never equals a reference.
    """
    gold = normalise(reference)
    strict = strict_match(text)
    flexible = flexible_extract(text)
    return Gsm8kScore(
        strict_correct=normalise(INVALID if strict is None else strict) == gold,
        flexible_correct=normalise(INVALID if flexible is None else flexible) == gold,
        strict_extracted=strict,
        flexible_extracted=flexible,
    )


def gsm8k_score(text: str, reference: str) -> Score:
    """One generation's score as items record it: ``value`` is the ``flexible-extract``
    verdict (the one accuracy and verdicts use); ``answer`` and ``scores`` hold both
    filters' extractions and verdicts."""
    score = score_gsm8k(text, reference)
    return Score(
        score.flexible_correct,
        answer={"strict-match": score.strict_extracted, "flexible-extract": score.flexible_extracted},
        scores={"strict-match": score.strict_correct, "flexible-extract": score.flexible_correct},
    )


def score_gsm8k_answer(completion: Completion, item: EvalItem) -> Score:
    """The GSM8K scorer of the public API: ``item.answer`` is the raw ``answer`` field
    (see :func:`~..workloads.gsm8k.gsm8k_eval_item`); the text is there (only answered
    items are scored)."""
    return gsm8k_score(completion.text or "", str(item.answer))


def summarise_gsm8k(records: Sequence[ItemRecord]) -> dict[str, Any]:
    """Accuracy of both filters, their invalid rates, the truncated rate, the failed count.

    A failed item (no usable answer) is never scored: ``n`` and every rate count the
    answered items only, and ``failed`` says how many of all ``items`` got no answer.
    ``accuracy`` is the ``flexible-extract`` accuracy (the one ``correct`` carries).
    """
    answered = [r for r in records if not r.failed]
    n = len(answered)

    def rate(count: int) -> float:
        return count / n if n else 0.0

    def extracted(record: ItemRecord, name: str) -> Any:
        return record.extracted.get(name) if isinstance(record.extracted, dict) else None

    strict = sum(bool(r.scores.get("strict-match")) for r in answered)
    flexible = sum(bool(r.scores.get("flexible-extract")) for r in answered)
    return {
        "n": n,
        "items": len(records),
        "failed": len(records) - n,
        "accuracy": rate(flexible),
        "strict_match_accuracy": rate(strict),
        "flexible_extract_accuracy": rate(flexible),
        "strict_match_invalid_rate": rate(sum(extracted(r, "strict-match") is None for r in answered)),
        "flexible_extract_invalid_rate": rate(sum(extracted(r, "flexible-extract") is None for r in answered)),
        "truncated_rate": rate(sum(r.finish_reason == "length" for r in answered)),
    }
