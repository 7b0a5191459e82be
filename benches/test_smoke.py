"""Smoke: one real greedy generation per model, timed, with its usage counts."""

from __future__ import annotations

import pytest

from pytest_modelsweep.core.measurements import SmokeStats
from pytest_modelsweep.pytest.fixtures import RecordMeasurement
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.workloads.smoke import run_smoke


@pytest.mark.smoke
def test_smoke(endpoint: Endpoint, record_measurement: RecordMeasurement) -> None:
    result = run_smoke(endpoint)
    record_measurement(
        "smoke",
        result.tokens_per_s,
        "tokens/s",
        1,
        params={"max_tokens": 32, "prompting": endpoint.model.prompting},
        stats=SmokeStats(
            result.latency_s,
            result.prompt_tokens,
            result.completion_tokens,
            result.finish_reason,
            result.text,
        ),
    )
    assert result.completion_tokens > 0
