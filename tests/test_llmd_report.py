"""llm-d's Benchmark Report v0.2.1 (``--llm-d-report``, ``modelsweep report --llm-d``).

The input is ``test_measurement_records``' run of every bench against fake servers (made
once per session): its last run wrote ``r4.llmd.json`` for the whole sweep run. Each report
is validated against llm-d's own JSON Schema, vendored as
``tests/data/br_v0_2_1_json_schema.json`` (source and licence in docs/results-schema.md),
and against the units its pydantic validators demand, which the JSON Schema cannot say.
``WRITE_LLMD_EXAMPLE=1`` rewrites docs/examples/llm-d-report.json from the run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from support.records_runs import (
    SWEEP_RUN,
    RecordsRun,
    module_requirement,  # noqa: F401 (skips without the data)
    run_every_kind,
)
from support.shared_runs import once_per_session

from pytest_modelsweep.cli import main
from pytest_modelsweep.core.measurements import Measurement, ThroughputStats, measurements_of
from pytest_modelsweep.core.outputs import OutputError
from pytest_modelsweep.report.llmd import LLMD_VERSION, LOAD_TOOL, write_llmd_report

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "tests" / "data" / "br_v0_2_1_json_schema.json").read_text())
EXAMPLE = ROOT / "docs" / "examples" / "llm-d-report.json"

# llm-d's pydantic validators (schema_v0_2.py): the units each figure may have
TIME, PER_TOKEN, TOKEN_RATE, QUERY_RATE = (
    {"ms", "s"},
    {"ms/token", "s/token"},
    {"tokens/s"},
    {"queries/s"},
)
UNITS = {
    "time_to_first_token": TIME,
    "time_per_output_token": PER_TOKEN,
    "inter_token_latency": PER_TOKEN,
    "request_latency": TIME,
    "output_token_rate": TOKEN_RATE,
    "request_rate": QUERY_RATE,
    "input_length": {"count"},
    "output_length": {"count"},
    "running_requests": {"count"},
    "waiting_requests": {"count"},
    "preemptions": {"count"},
    "kv_cache_usage": {"percent", "fraction"},
    "cache_hit_rate": {"percent", "fraction"},
}


@pytest.fixture(scope="module")
def records_run(tmp_path_factory: pytest.TempPathFactory) -> RecordsRun:
    return once_per_session(tmp_path_factory, "records_run", run_every_kind)


def statistics(report: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema ``Statistics`` in a report (a dict with ``units``), by its field name."""
    if isinstance(report, dict):
        if "units" in report and "mean" in report:
            yield path.rsplit(".", 1)[-1], report
        for key, value in report.items():
            yield from statistics(value, f"{path}.{key}")
    elif isinstance(report, list):
        for value in report:
            yield from statistics(value, path)


def check_report(report: dict[str, Any]) -> None:
    """Valid against the schema, with every figure in units llm-d's validators accept."""
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in Draft202012Validator(SCHEMA).iter_errors(report)
    ]
    assert errors == []
    assert report["version"] == LLMD_VERSION
    for name, stats in statistics(report):
        assert stats["units"] in UNITS[name], (name, stats)
    load = report["scenario"]["load"]["standardized"]
    assert load["tool"] == LOAD_TOOL
    assert ("concurrency" in load) != ("rate_qps" in load)  # a closed loop or an open one
    engine = report["scenario"]["stack"][0]["standardized"]
    assert engine["kind"] == "inference_engine" and engine["replicas"] == 1


def shape(value: Any) -> Any:
    """A JSON value's keys, recursively (lists by their first element)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    return [shape(value[0])] if isinstance(value, list) and value else type(value).__name__


def settings_of(measurements: list[Measurement]) -> set[tuple[str, str, Any]]:
    return {
        (m.model, m.benchmark, m.params.get("concurrency") or m.params.get("request_rate"))
        for m in measurements
        if isinstance(m.stats, ThroughputStats) and m.stats.repeats
    }


def test_every_report_is_a_valid_benchmark_report_v0_2_1(records_run: RecordsRun) -> None:
    document = json.loads((records_run.path / "r4.llmd.json").read_text(encoding="utf-8"))
    reports = document["reports"]
    for report in reports:
        check_report(report)
    # one report per measured setting of the sweep run: closed loops and the open loop
    written = {
        (
            r["scenario"]["stack"][0]["metadata"]["label"],
            r["scenario"]["load"]["native"]["config"]["benchmark"],
            r["scenario"]["load"]["standardized"].get("concurrency")
            or r["scenario"]["load"]["standardized"].get("rate_qps"),
        )
        for r in reports
    }
    assert written == settings_of(measurements_of(records_run.results))
    assert len({r["run"]["uid"] for r in reports}) == len(reports)
    assert {r["run"]["eid"] for r in reports} == {SWEEP_RUN}
    open_loop = [r for r in reports if "rate_qps" in r["scenario"]["load"]["standardized"]]
    assert open_loop and all(r["results"]["observability"]["components"] for r in open_loop)
    metadata = document["metadata"]
    assert {s["uid"] for s in metadata["settings"]} == {r["run"]["uid"] for r in reports}
    assert {a["benchmark"] for a in metadata["accuracy"]} >= {"gsm8k", "sums"}
    assert {v["benchmark"] for v in metadata["verdicts"]} >= {
        "throughput_ratio",
        "verdict:gsm8k",
        "capacity_ratio",
        "rate_capacity_ratio",
    }
    if os.environ.get("WRITE_LLMD_EXAMPLE"):
        write_example(document)
    example = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    for report in example["reports"]:
        check_report(report)
        fresh = [r for r in reports if r["run"]["description"] == report["run"]["description"]]
        assert fresh and shape(fresh[0]) == shape(report), "rewrite it: WRITE_LLMD_EXAMPLE=1"


def write_example(document: dict[str, Any]) -> None:
    """docs/examples/llm-d-report.json: a closed loop's and the open loop's report of one model."""
    reports = document["reports"]
    model = reports[0]["scenario"]["stack"][0]["metadata"]["label"]
    closed = next(r for r in reports if r["scenario"]["load"]["standardized"].get("concurrency"))
    opened = next(
        r
        for r in reports
        if "rate_qps" in r["scenario"]["load"]["standardized"]
        and r["scenario"]["stack"][0]["metadata"]["label"] == model
    )
    kept = [closed, opened]
    uids = {r["run"]["uid"] for r in kept}
    metadata = document["metadata"]
    example = {
        "reports": kept,
        "metadata": {
            **metadata,
            "settings": [s for s in metadata["settings"] if s["uid"] in uids],
            "accuracy": metadata["accuracy"][:1],
            "verdicts": metadata["verdicts"][:1],
        },
    }
    EXAMPLE.write_text(json.dumps(example, indent=1) + "\n", encoding="utf-8")


def test_report_llm_d_writes_the_same_file_from_the_store(
    records_run: RecordsRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = str(records_run.path / "s.sqlite")
    written = tmp_path / "out" / "sweep.json"
    assert (
        main(["report", "--sweep-run", SWEEP_RUN, "--store", store, "--llm-d", str(written)]) == 0
    )
    assert f"llm-d Benchmark Report v0.2.1: {written}" in capsys.readouterr().out
    assert json.loads(written.read_text()) == json.loads(
        (records_run.path / "r4.llmd.json").read_text()
    )
    # one run of the sweep run: its own settings
    run_id = json.loads((records_run.path / "r.json").read_text())["run"]["run_id"]
    one = tmp_path / "one.json"
    assert main(["report", run_id, "--store", store, "--llm-d", str(one)]) == 0
    reports = json.loads(one.read_text())["reports"]
    assert reports and {r["run"]["uid"].split("/")[0] for r in reports} == {run_id}
    for report in reports:
        check_report(report)


def test_bad_input_is_one_line_naming_the_fix(
    records_run: RecordsRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = str(records_run.path / "s.sqlite")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert (
        main(
            [
                "report",
                "--sweep-run",
                SWEEP_RUN,
                "--store",
                store,
                "--llm-d",
                str(blocker / "r.json"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--llm-d" in err and str(blocker) in err, err
    assert (
        main(["report", "no-such-run", "--store", store, "--llm-d", str(tmp_path / "r.json")]) == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-run" in err, err
    assert not (tmp_path / "r.json").exists()
    # the pytest side's writer: a write that fails at the session's end
    with pytest.raises(OutputError) as failed:
        write_llmd_report(
            blocker / "r.json", "--llm-d-report", measurements_of(records_run.results), {}
        )
    assert str(failed.value).startswith(f"--llm-d-report {blocker / 'r.json'}: cannot write")
    assert "\n" not in str(failed.value) and "write it elsewhere" in str(failed.value)


def test_no_secret_is_written(records_run: RecordsRun, tmp_path: Path) -> None:
    """Every string goes through the redaction every output file gets: an image pulled from
    a registry URL with a password in it (``user:pass@``) is written without the password."""
    store_runs = json.loads((records_run.path / "r.json").read_text())["run"]
    secret = "regpw-6610-sekrit"
    image = f"https://bot:{secret}@registry.example/vllm@sha256:{'0' * 64}"
    run = {**store_runs, "serving": {**store_runs["serving"], "image": image}}
    path = tmp_path / "r.json"
    assert write_llmd_report(path, "--llm-d-report", measurements_of(records_run.results), run) > 0
    text = path.read_text()
    assert secret not in text and "https://***@registry.example" in text
