"""Paired verdicts: each candidate against the reference, item by item, on each accuracy benchmark.

``pytest -m gsm8k`` includes the GSM8K verdicts (they carry the benchmark's
marker), so it exits non-zero when a candidate is measurably worse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

ACCURACY_BENCHMARKS = [
    pytest.param("gsm8k", marks=pytest.mark.gsm8k, id="gsm8k"),
    pytest.param("bfcl", marks=pytest.mark.bfcl, id="bfcl"),
]


@pytest.mark.verdict
@pytest.mark.parametrize("metric", ACCURACY_BENCHMARKS)
def test_verdict(
    candidate_name: str, metric: str, judge_against_reference: Callable[[str], Any]
) -> None:
    judge_against_reference(metric)
