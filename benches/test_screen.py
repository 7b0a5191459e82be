"""Candidate screening: one test per model of the sweep, licence and memory from the Hub.

Run ``pytest benches -m screen --sweep tpu-v5e``. Each test asks the Hugging Face
Hub for the model's repo (``model_info(repo, files_metadata=True)`` and its
``config.json``), records the KV-cache headroom in GiB (benchmark ``screen``,
the whole screening result in ``stats``) and fails with the reason when the
model falls on the sweep's ``[screening]`` rule. Gated, missing or unreachable
repos fail with the fix in one line. Models whose source is not ``hf:`` (the
embedded sweep) are skipped. No server is started.

Offline: set ``MODELSWEEP_HUB_FIXTURES=PATH`` to a JSON file of recorded Hub
answers (the format of ``modelsweep screen --offline-fixtures``, e.g. the
repository's ``tests/data/hub_tpu_v5e.json``); the tests then read it and never
touch the network.
"""

from __future__ import annotations

import os

import pytest

from pytest_modelsweep.core.errors import ModelsweepError
from pytest_modelsweep.core.sweep import ModelSpec, Sweep
from pytest_modelsweep.pytest.fixtures import RecordMeasurement
from pytest_modelsweep.serving.screening import (
    OfflineHub,
    ScreeningResult,
    screen_candidate,
)

FIXTURES_ENV = "MODELSWEEP_HUB_FIXTURES"


def _screen(spec: ModelSpec, sweep: Sweep) -> ScreeningResult:
    path = os.environ.get(FIXTURES_ENV)
    if not path:
        return screen_candidate(spec, sweep.screening)
    try:
        hub = OfflineHub.from_file(path)
        return screen_candidate(spec, sweep.screening, api=hub, fetch_config=hub.fetch_config)
    except ModelsweepError as error:
        pytest.fail(f"{FIXTURES_ENV}: {error}", pytrace=False)


@pytest.mark.screen
def test_screen(
    model_name: str, model_spec: ModelSpec, sweep: Sweep, record_measurement: RecordMeasurement
) -> None:
    if model_spec.source.kind != "hf":
        pytest.skip(f"screening applies to Hugging Face repos (source {model_spec.source})")
    result = _screen(model_spec, sweep)
    if result.kv_headroom_gib is not None:
        # Recorded whenever the weights are known, accepted or not; a repo that
        # could not be read has no figure to record and only fails.
        record_measurement(
            "screen",
            result.kv_headroom_gib,
            "GiB",
            1,
            params={
                "hbm_gib": sweep.screening.hbm_gib,
                "gpu_memory_utilization": sweep.screening.gpu_memory_utilization,
                "kv_headroom_gib": sweep.screening.kv_headroom_gib,
            },
            stats=result,
        )
    if not result.accepted:
        # The CLI's --offline-fixtures is this environment variable here.
        reason = result.reason.replace("--offline-fixtures", f"{FIXTURES_ENV}=PATH")
        pytest.fail(f"{model_name} ({result.repo}) rejected: {reason}", pytrace=False)
