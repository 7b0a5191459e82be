"""Accuracy benchmarks: GSM8K (lm-evaluation-harness's rules) and BFCL simple (BFCL's AST rules).

Both are written with the public API a user's own benchmark uses
(docs/writing-benchmarks.md): a declared test hands its items and scorer to
``evaluate``, which stores every item as it is scored (a re-run sends only what is
not stored) and records the measurement; the declaration gives each candidate its
paired verdict, ``test_verdict[<candidate>-gsm8k]``, beside the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_modelsweep import Evaluate
from pytest_modelsweep.pytest.state import BenchSettings
from pytest_modelsweep.scoring.bfcl import score_bfcl_answer, summarise_bfcl
from pytest_modelsweep.scoring.gsm8k import score_gsm8k_answer, summarise_gsm8k
from pytest_modelsweep.workloads.bfcl import bfcl_eval_item, bfcl_skip_reason
from pytest_modelsweep.workloads.gsm8k import NUM_FEWSHOT, gsm8k_eval_item

CONCURRENCY = 16


@pytest.mark.modelsweep_benchmark("gsm8k", builtin=True)
def test_gsm8k(
    evaluate: Evaluate,
    gsm8k_problems: list[Any],
    gsm8k_fewshot: Any,
    bench_settings: BenchSettings,
) -> None:
    max_tokens = bench_settings.gsm8k_max_tokens
    items = [
        gsm8k_eval_item(p, gsm8k_fewshot.exemplars(p), max_tokens=max_tokens)
        for p in gsm8k_problems
    ]
    params = {"metric": "flexible-extract", "max_tokens": max_tokens, "fewshot": NUM_FEWSHOT}
    evaluate(
        "gsm8k",
        items,
        score_gsm8k_answer,
        concurrency=CONCURRENCY,
        summarise=summarise_gsm8k,
        params=params,
    )


@pytest.mark.modelsweep_benchmark("bfcl", builtin=True)
def test_bfcl(evaluate: Evaluate, model_spec: Any, bfcl_records: list[Any]) -> None:
    reason = bfcl_skip_reason(model_spec)
    if reason is not None:
        pytest.skip(reason)
    items = [bfcl_eval_item(record, model_spec) for record in bfcl_records]
    evaluate(
        "bfcl",
        items,
        score_bfcl_answer,
        concurrency=CONCURRENCY,
        summarise=summarise_bfcl,
        params={"category": "simple_python", "mode": model_spec.bfcl_mode},
    )
