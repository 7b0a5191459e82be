"""Shared by the tests: moved from test_throughput_workload.py."""

from __future__ import annotations

from pytest_modelsweep.core.sweep import ModelSource, ModelSpec
from pytest_modelsweep.serving.endpoint import Endpoint, Provenance


def endpoint_at(base_url: str, kind: str = "llamacpp", served: str = "m") -> Endpoint:
    spec = ModelSpec(
        name=served,
        source=ModelSource("path", "model.gguf"),
        served_name=served,
        license="apache-2.0",
        prompting="completion",
        tool_call_parser=None,
        bfcl_mode="prompt",
    )
    return Endpoint(spec, base_url, served, 4096, kind, Provenance("test", "0", served))  # type: ignore[arg-type]
