"""Accuracy benchmarks: GSM8K (lm-evaluation-harness's rules) and BFCL simple (BFCL's AST rules).

Every item is stored as it is scored; a re-run against the same model, server,
settings and prompt reuses stored items instead of sending them again.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_modelsweep.errors import MeasurementError
from pytest_modelsweep.fixtures import RecordMeasurement
from pytest_modelsweep.scoring.bfcl import score_bfcl_response, summarise_bfcl
from pytest_modelsweep.scoring.gsm8k import score_gsm8k_response, summarise_gsm8k
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.state import RunState
from pytest_modelsweep.workloads.accuracy import AccuracyRun, run_accuracy
from pytest_modelsweep.workloads.bfcl import bfcl_skip_reason, build_bfcl_request
from pytest_modelsweep.workloads.gsm8k import build_gsm8k_request

CONCURRENCY = 16
# A run where more than this share of requests failed (HTTP errors, timeouts) measured
# the server, not the model: the test fails, after recording what it got.
MAX_ERROR_SHARE = 0.05


def record_accuracy(
    record_measurement: RecordMeasurement,
    benchmark: str,
    run: AccuracyRun[Any],
    summary: dict[str, Any],
    params: dict[str, Any],
    endpoint: Endpoint,
) -> None:
    record_measurement(
        benchmark,
        summary["accuracy"],
        "accuracy",
        summary["n"],
        params=params,
        stats={**summary, "sent": run.sent, "reused": run.reused, "wall_s": run.wall_s},
        items=[r.to_dict() for r in run.records],
        endpoint=endpoint,
    )
    if run.records and run.errors / len(run.records) > MAX_ERROR_SHARE:
        first = next(r.error for r in run.records if r.error)
        raise MeasurementError(
            f"{run.errors} of {len(run.records)} {benchmark} requests failed (first: {first}); "
            "the accuracy above is not the model's"
        )


@pytest.mark.gsm8k
def test_gsm8k(
    endpoint: Endpoint,
    gsm8k_problems: list[Any],
    gsm8k_fewshot: Any,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> None:
    model = endpoint.model
    max_tokens = modelsweep_run.options.gsm8k_max_tokens
    run = run_accuracy(
        endpoint,
        "gsm8k",
        gsm8k_problems,
        lambda p: build_gsm8k_request(p, model, gsm8k_fewshot, max_tokens=max_tokens),
        score_gsm8k_response,
        store=modelsweep_run.store,
        run_id=modelsweep_run.run_id,
        reuse=modelsweep_run.options.reuse,
        concurrency=CONCURRENCY,
        timeout_s=modelsweep_run.options.request_timeout_s,
        idle_timeout_s=modelsweep_run.options.idle_timeout_s,
        progress=modelsweep_run.write_line,
    )
    summary = summarise_gsm8k(run.records)
    params = {
        "metric": "flexible-extract",
        "max_tokens": max_tokens,
        "fewshot": 5,
        "prompting": model.prompting,
        "limit": modelsweep_run.options.limit,
        "subset": modelsweep_run.options.limit is not None,
    }
    record_accuracy(record_measurement, "gsm8k", run, summary, params, endpoint)


@pytest.mark.bfcl
def test_bfcl(
    model_spec: Any,
    bfcl_records: list[Any],
    modelsweep_run: RunState,
    request: pytest.FixtureRequest,
    record_measurement: RecordMeasurement,
) -> None:
    reason = bfcl_skip_reason(model_spec)
    if reason is not None:
        pytest.skip(reason)
    endpoint: Endpoint = request.getfixturevalue("endpoint")
    run = run_accuracy(
        endpoint,
        "bfcl",
        bfcl_records,
        lambda r: build_bfcl_request(r, model_spec),
        lambda record, req, completion: score_bfcl_response(
            record, req, completion, mode=model_spec.bfcl_mode
        ),
        store=modelsweep_run.store,
        run_id=modelsweep_run.run_id,
        reuse=modelsweep_run.options.reuse,
        concurrency=CONCURRENCY,
        timeout_s=modelsweep_run.options.request_timeout_s,
        idle_timeout_s=modelsweep_run.options.idle_timeout_s,
        progress=modelsweep_run.write_line,
    )
    summary = summarise_bfcl(run.records)
    params = {
        "category": "simple_python",
        "mode": model_spec.bfcl_mode,
        "limit": modelsweep_run.options.limit,
        "subset": modelsweep_run.options.limit is not None,
    }
    record_accuracy(record_measurement, "bfcl", run, summary, params, endpoint)
