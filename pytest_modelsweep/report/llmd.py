"""llm-d's Benchmark Report v0.2.1: one report per measured throughput setting.

:func:`llmd_document`: ``reports``, one per throughput or open-loop measurement, each valid
against ``tests/data/br_v0_2_1_json_schema.json``, and ``metadata``, what the schema has no
place for (flags, intervals, accuracy, verdicts); docs/results-schema.md maps every field.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core import __version__
from ..core.jsontext import strict_json
from ..core.measurements import (
    AccuracyStats,
    AccuracyVerdictStats,
    Measurement,
    SearchRatioStats,
    ServerMetricsSummary,
    ThroughputRatioStats,
    ThroughputStats,
)
from ..core.outputs import write_file
from ..core.secrets import redacted
from .tables import COMPARISONS, LATENCY_NAMES, finite, records, throughput_row

LLMD_VERSION = "0.2.1"  # The Benchmark Report version every report declares.
LOAD_TOOL = "pytest-modelsweep"  # ``scenario.load.standardized.tool``.

_LATENCY_FIELDS = {
    "ttft": ("time_to_first_token", "ms"),
    "tpot": ("time_per_output_token", "ms/token"),
    "itl": ("inter_token_latency", "ms/token"),
    "e2e": ("request_latency", "ms"),
}
"""Our latency → the schema's field and units."""


def _statistics(units: str, mean: float | None, **rest: float | None) -> dict[str, Any] | None:
    """A schema ``Statistics`` (``units``, ``mean``, the finite figures of ``rest``); None
    without a finite mean (the schema requires one)."""
    if mean is None or not math.isfinite(mean):
        return None
    return {
        "units": units,
        "mean": mean,
        **{k: v for k, v in rest.items() if v is not None and math.isfinite(v)},
    }


def _config_id(config: Any) -> str:
    """A hash of a configuration (the schema's ``cfg_id``): sha256 of its JSON, 16 hex digits."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _sequence_length(values: Sequence[int], fallback: int) -> dict[str, Any]:
    """A schema ``SequenceLength``: ``fixed`` when every request had the same length, else
    ``other`` with the mean, min and max; ``fallback`` (fixed) without request records."""
    if not values:
        return {"distribution": "fixed", "value": fallback}
    if min(values) == max(values):
        return {"distribution": "fixed", "value": values[0]}
    return {
        "distribution": "other",
        "value": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
    }


def _stack(m: Measurement, run: Mapping[str, Any]) -> dict[str, Any]:
    prov, machine = m.provenance, run.get("machine") or {}
    # the CPU of this machine for a llama-server we launched; unknown where not recorded
    cpu = machine.get("cpu") if prov.get("how") == "llamacpp" else None
    native = {
        "serving": run.get("serving"),
        "image_digest": prov.get("image_digest"),
        "launch_argv": prov.get("launch_argv") or [],
        "how": prov.get("how"),
        "server_settings": prov.get("server_settings") or {},
        "model_source": prov.get("model_source"),
        "model_sha256": prov.get("model_sha256"),
        "model_revision": prov.get("model_revision"),
        # what was read from what ran: each flag observed or declared, the server's
        # config gauges and log, the image Docker ran (pinned or from a tag)
        "flag_sources": prov.get("flag_sources") or {},
        "observed": prov.get("observed") or {},
        "image_pinned": prov.get("image_pinned"),
    }
    return {
        "metadata": {
            "label": m.model,
            "cfg_id": _config_id(native),
            "description": f"{m.model} served by {prov.get('server_name') or 'unknown'}",
        },
        "standardized": {
            "kind": "inference_engine",
            "tool": str(prov.get("server_name") or "unknown"),
            "tool_version": str(prov.get("server_version") or "unknown"),
            "role": "replica",
            "replicas": 1,
            "model": {"name": str(prov.get("served_name") or m.model)},
            "accelerator": {
                "model": str(cpu) if cpu else "unknown",
                "count": 1 if cpu else 0,
                "parallelism": {},
            },
        },
        "native": {"config": native},
    }


def _load(
    m: Measurement,
    stats: ThroughputStats,
    run: Mapping[str, Any],
    prompts: Sequence[int],
    outputs: Sequence[int],
) -> dict[str, Any]:
    windows = stats.repeats
    loops = [w.open_loop for w in windows if w.open_loop is not None]
    concurrency, asked = m.params.get("concurrency"), m.params.get("output_tokens")
    standardized: dict[str, Any] = {
        "tool": LOAD_TOOL,
        "tool_version": str((run.get("software") or {}).get("pytest_modelsweep") or __version__),
        "source": "sampled" if m.params.get("user_prompts") else "random",
        "input_seq_len": _sequence_length(prompts, windows[0].prompt_tokens),
        **(
            {"output_seq_len": _sequence_length(outputs, int(asked or 0))}
            if outputs or isinstance(asked, int)
            else {}
        ),
        **(
            {"rate_qps": float(loops[0].rate)}
            if loops
            else {"concurrency": concurrency}
            if isinstance(concurrency, int) and not isinstance(concurrency, bool)
            else {}
        ),
    }
    native = {
        "benchmark": m.benchmark,
        "params": m.params,
        "test_id": m.test_id,
        **({"arrivals": loops[0].describe} if loops else {}),
    }
    return {
        "metadata": {"cfg_id": _config_id(native), "description": m.test_id},
        "standardized": standardized,
        "native": {"config": native},
    }


def _resource_metrics(summary: ServerMetricsSummary) -> dict[str, Any]:
    """One window's server metrics as the schema's ``ResourceMetrics``: gauges' time average
    and maximum, the preemption counter's increase (as ``mean``), the prefix-cache hit rate."""
    metrics = {
        **{
            name: _statistics(units, gauge.mean, max=gauge.max)
            for name, gauge, units in (
                ("running_requests", summary.running, "count"),
                ("waiting_requests", summary.waiting, "count"),
                ("kv_cache_usage", summary.kv_cache_usage, "fraction"),
            )
            if gauge is not None
        },
        "preemptions": _statistics("count", summary.preemptions),
        "cache_hit_rate": _statistics("fraction", summary.prefix_cache_hit_rate),
    }
    return {name: value for name, value in metrics.items() if value is not None}


def _when(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) and text else None
    except ValueError:
        return None


def _own_run(m: Measurement, run: Mapping[str, Any]) -> tuple[str, str | None]:
    """(run id, start) of the run that measured ``m``: its own, or in a sweep run's report the
    latest member of its model running when it was recorded (else the sweep run's name)."""
    members = run.get("runs")
    if m.run_id is None and isinstance(members, list) and run.get("sweep_run"):
        recorded = _when(m.recorded_at)
        fits = [
            member
            for member in members
            if isinstance(member, Mapping)
            and m.model in (member.get("models") or [m.model])
            and recorded is not None
            and (began := _when(member.get("started_at")))
            and began <= recorded
            and ((ended := _when(member.get("finished_at"))) is None or recorded <= ended)
        ]
        if not fits:
            return str(run["sweep_run"]), None
        chosen = max(fits, key=lambda member: _when(member["started_at"]) or datetime.min)
        return str(chosen["run_id"]), str(chosen["started_at"])
    start = run.get("started_at") if m.run_id in (None, run.get("run_id")) else None
    return str(m.run_id or run.get("run_id") or ""), None if start is None else str(start)


def _uid(m: Measurement, run_id: str) -> str:
    """The report's ``run.uid``: unique per report, our run id first."""
    return f"{run_id}/{m.test_id or m.model}"


def _report(m: Measurement, stats: ThroughputStats, run: Mapping[str, Any]) -> dict[str, Any]:
    row = throughput_row(m)
    records = m.request_records()
    ok = [r for r in records if not r.error]
    prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    outputs = [r.completion_tokens for r in ok if r.completion_tokens is not None]
    windows = stats.repeats
    run_id, start = _own_run(m, run)
    time = {
        "start": start,
        "end": m.recorded_at or None,
        "duration": f"PT{sum(w.duration_s for w in windows):.3f}S",
    }
    failures = len(records) - len(ok)
    requests: dict[str, Any] = {
        "total": sum(w.completed for w in windows) + failures,
        **({"failures": failures} if records else {}),
        **{  # token counts over requests
            name: _statistics("count", sum(values) / len(values), min=min(values), max=max(values))
            for name, values in (("input_length", prompts), ("output_length", outputs))
            if values
        },
    }
    latency = {
        field: got
        for name in LATENCY_NAMES
        for field, units in [_LATENCY_FIELDS[name]]
        for lat in [row.latency[name]]
        if (
            got := _statistics(
                units,
                finite(lat.mean_ms),
                p50=finite(lat.p50_ms),
                p90=finite(lat.p90_ms),
                p99=finite(lat.p99_ms),
            )
        )
        is not None
    }
    throughput = {
        name: got
        for name, values, units in (
            ("output_token_rate", [w.output_tokens_per_s for w in windows], "tokens/s"),
            ("request_rate", [w.requests_per_s for w in windows], "queries/s"),
        )
        if (
            got := _statistics(
                units,
                sum(values) / len(values) if values else None,
                min=min(values, default=None),
                max=max(values, default=None),
            )
        )
        is not None
    }
    observed = [
        {"component_label": m.model, "aggregate": _resource_metrics(w.server_metrics.summary)}
        for w in windows
        if w.server_metrics is not None and w.server_metrics.unavailable is None
    ]
    return {
        "version": LLMD_VERSION,
        "run": {
            "uid": _uid(m, run_id),
            "eid": str(run.get("sweep_run") or run_id),
            "time": {k: v for k, v in time.items() if v is not None},
            "description": f"{m.model} {m.benchmark} ({m.test_id})",
        },
        "scenario": {"stack": [_stack(m, run)], "load": _load(m, stats, run, prompts, outputs)},
        "results": {
            "request_performance": {
                "aggregate": {"requests": requests, "latency": latency, "throughput": throughput}
            },
            **({"observability": {"components": observed}} if observed else {}),
        },
    }


def _measured(measurements: Sequence[Measurement]) -> list[tuple[Measurement, ThroughputStats]]:
    """The throughput settings with at least one timed window."""
    return [
        (m, m.stats)
        for m in measurements
        if isinstance(m.stats, ThroughputStats) and m.stats.repeats
    ]


def _interval(m: Measurement) -> list[float | None] | None:
    """A comparison's interval: a verdict's or throughput ratio's, a capacity ratio's."""
    stats = m.stats
    got = (
        stats.interval
        if isinstance(stats, AccuracyVerdictStats | ThroughputRatioStats)
        else stats.ratio
        if isinstance(stats, SearchRatioStats)
        else None
    )
    return None if got is None else [finite(got.low), finite(got.high)]


def _metadata(measurements: Sequence[Measurement], run: Mapping[str, Any]) -> dict[str, Any]:
    """What the schema has no place for: each report's flags and interval, the accuracy runs
    and the verdicts (docs/results-schema.md)."""
    return {
        "generator": {"tool": LOAD_TOOL, "version": __version__},
        "run": {
            "run_id": str(run.get("run_id") or ""),
            "sweep_name": run.get("sweep_name"),
            "sweep_run": run.get("sweep_run"),
        },
        "settings": [
            {
                "uid": _uid(m, _own_run(m, run)[0]),
                "model": m.model,
                "benchmark": m.benchmark,
                "outcome": m.outcome,
                "output_tokens_per_s": finite(m.value),
                "output_tokens_per_s_interval": None if s.interval is None else list(s.interval),
                "repeats": len(s.repeats),
                "cv": finite(s.cv),
                "flags": list(s.flags),
            }
            for m, s in _measured(measurements)
        ],
        "accuracy": [
            {
                "model": m.model,
                "benchmark": m.benchmark,
                "value": finite(m.value),
                "unit": m.unit,
                "n": m.stats.n,
                "items": m.stats.items,
                "failed": m.stats.failed,
                "run_id": _own_run(m, run)[0],
                "test_id": m.test_id,
                "outcome": m.outcome,
            }
            for m in measurements
            if isinstance(m.stats, AccuracyStats)
        ],
        "verdicts": [
            {
                "benchmark": m.benchmark,
                "candidate": m.stats.candidate,
                "reference": m.stats.reference,
                "verdict": None if m.stats.verdict is None else str(m.stats.verdict),
                "value": finite(m.value),
                "unit": m.unit,
                "interval": _interval(m),
                "rule": m.stats.rule,
                "params": m.params,
                "run_id": _own_run(m, run)[0],
                "test_id": m.test_id,
            }
            for m in measurements
            if isinstance(m.stats, COMPARISONS)
        ],
    }


def llmd_document(
    measurements: Iterable[Measurement | Mapping[str, Any]], run: Mapping[str, Any]
) -> dict[str, Any]:
    """The file ``--llm-d-report`` writes: ``reports`` and ``metadata``, secrets redacted."""
    found = records(measurements)
    return {
        "reports": redacted([_report(m, stats, run) for m, stats in _measured(found)]),
        "metadata": redacted(_metadata(found, run)),
    }


def write_llmd_report(
    path: Path | str,
    option: str,
    measurements: Iterable[Measurement | Mapping[str, Any]],
    run: Mapping[str, Any],
) -> int:
    """Write :func:`llmd_document` to ``path``, strict JSON (a NaN or infinity a server
    answered is null, listed under ``non_finite``); how many reports it holds."""
    document = llmd_document(measurements, run)
    write_file(path, option, strict_json(document, indent=1) + "\n")
    return len(document["reports"])
