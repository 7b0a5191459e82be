"""What a test needs to call the plugin's plain functions without pytest: the run's measuring
settings at their defaults, an endpoint attached to a fake server, a ``record_measurement``
that keeps what it is given."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_modelsweep.core.measurements import Measurement
from pytest_modelsweep.core.options import DEFAULTS
from pytest_modelsweep.core.settings import BenchSettings
from pytest_modelsweep.core.stats.repeats import RepeatPolicy
from pytest_modelsweep.core.sweep import ModelSource, ModelSpec, Prompting
from pytest_modelsweep.serving.endpoint import Endpoint, Provenance


def bench_settings(**changes: Any) -> BenchSettings:
    """The settings a run without options gives its benchmarks (run ``run``), with ``changes``."""
    d = DEFAULTS
    default = BenchSettings(
        run_id="run",
        repeats=RepeatPolicy(d.repeats, d.repeats_target, d.repeats_max),
        timed_requests=None,
        limit=None,
        gsm8k_max_tokens=256,
        reuse=True,
        request_timeout_s=d.request_timeout,
        idle_timeout_s=d.idle_timeout,
        unstable_cv=d.unstable_cv,
        contended_cores=d.contended_cores,
        contended_steal=d.contended_steal,
        slo=None,
        slo_attainment=d.slo_attainment,
        pricing=None,
    )
    return replace(default, **changes)


def attached(base_url: str, name: str, prompting: Prompting = "completion") -> Endpoint:
    """Model ``name`` (served as ``name``) attached to a server at ``base_url``."""
    spec = ModelSpec(
        name=name,
        source=ModelSource("embedded", name),
        served_name=name,
        license="mit",
        prompting=prompting,
        tool_call_parser=None,
        bfcl_mode="prompt",
    )
    return Endpoint(spec, base_url, name, 4096, "llamacpp", Provenance("test", "0", name))


class Recorded(list[Measurement]):
    """A ``record_measurement`` that keeps each measurement, as the fixture builds it."""

    def __call__(self, benchmark: str, value: float, unit: str, n: int, **kw: Any) -> Measurement:
        endpoint = kw.pop("endpoint", None)
        measurement = Measurement(
            model=endpoint.model.name if endpoint is not None else "",
            benchmark=benchmark,
            value=value,
            unit=unit,
            n=n,
            provenance=endpoint.provenance.as_dict() if endpoint is not None else {},
            **kw,
        )
        self.append(measurement)
        return measurement
