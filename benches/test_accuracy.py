"""Accuracy benchmarks: GSM8K (lm-evaluation-harness's rules) and BFCL simple (BFCL's AST rules).

Every item is stored as it is scored; a re-run against the same model, server,
settings and prompt reuses stored items instead of sending them again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_modelsweep.errors import MeasurementError
from pytest_modelsweep.fixtures import RecordMeasurement
from pytest_modelsweep.scoring.bfcl import score_bfcl_response, summarise_bfcl
from pytest_modelsweep.scoring.gsm8k import score_gsm8k_response, summarise_gsm8k
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.state import BenchSettings
from pytest_modelsweep.store import Store
from pytest_modelsweep.workloads.accuracy import AccuracyRun, run_accuracy
from pytest_modelsweep.workloads.bfcl import bfcl_skip_reason, build_bfcl_request
from pytest_modelsweep.workloads.gsm8k import build_gsm8k_request

CONCURRENCY = 16


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
    failed = [r for r in run.records if r.failed]
    if failed:
        # Failed items are not scored: the accuracy above is over the answered ones only,
        # and nothing (verdict, gate, baseline) is concluded from this measurement.
        raise MeasurementError(
            f"{len(failed)} of {len(run.records)} {benchmark} requests got no answer (first: "
            f"{failed[0].error}); re-run to resend them (completed items are reused)"
        )


@pytest.mark.gsm8k
def test_gsm8k(
    endpoint: Endpoint,
    gsm8k_problems: list[Any],
    gsm8k_fewshot: Any,
    bench_settings: BenchSettings,
    result_store: Store,
    progress: Callable[[str], None],
    record_measurement: RecordMeasurement,
) -> None:
    model = endpoint.model
    max_tokens = bench_settings.gsm8k_max_tokens
    run = run_accuracy(
        endpoint,
        "gsm8k",
        gsm8k_problems,
        lambda p: build_gsm8k_request(p, model, gsm8k_fewshot, max_tokens=max_tokens),
        score_gsm8k_response,
        store=result_store,
        run_id=bench_settings.run_id,
        reuse=bench_settings.reuse,
        concurrency=CONCURRENCY,
        timeout_s=bench_settings.request_timeout_s,
        idle_timeout_s=bench_settings.idle_timeout_s,
        progress=progress,
    )
    summary = summarise_gsm8k(run.records)
    params = {
        "metric": "flexible-extract",
        "max_tokens": max_tokens,
        "fewshot": 5,
        "prompting": model.prompting,
        "limit": bench_settings.limit and len(gsm8k_problems),  # the real count, when limited
        "subset": bench_settings.limit is not None,
    }
    record_accuracy(record_measurement, "gsm8k", run, summary, params, endpoint)


@pytest.mark.bfcl
def test_bfcl(
    model_spec: Any,
    bfcl_records: list[Any],
    bench_settings: BenchSettings,
    result_store: Store,
    progress: Callable[[str], None],
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
        store=result_store,
        run_id=bench_settings.run_id,
        reuse=bench_settings.reuse,
        concurrency=CONCURRENCY,
        timeout_s=bench_settings.request_timeout_s,
        idle_timeout_s=bench_settings.idle_timeout_s,
        progress=progress,
    )
    summary = summarise_bfcl(run.records)
    params = {
        "category": "simple_python",
        "mode": model_spec.bfcl_mode,
        "limit": bench_settings.limit and len(bfcl_records),  # the real count, when limited
        "subset": bench_settings.limit is not None,
    }
    record_accuracy(record_measurement, "bfcl", run, summary, params, endpoint)
