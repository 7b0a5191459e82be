"""Results files of the last two schema versions, written by the code of their time, read by
today's: every measurement reads into its typed record and writes back the same JSON text, and
every figure of a known kind is held by a typed field, so that the fields alone write, key for
key and in order, what the old code wrote: today's writer writes these files as the old one did.

* ``tests/data/results_v1_every_kind.json``: ``pytest-modelsweep/results/1``, written by the
  code before the typed records (commit 432fbe3; see tests/test_measurement_records.py);
* ``tests/data/results_v2_every_kind.json``: ``pytest-modelsweep/results/2``, written by the
  code before the records were written by cattrs (commit 243aec3) in the four runs of
  ``tests/test_measurement_records.py`` (every kind and design, the open loop and the cold
  start included): one measurement of each benchmark and design, each with its first two
  request and item records and each window with its first two server-metrics samples (to keep
  the file small; none of these lists is a figure the records compute).

A file with a value of the wrong type is refused in one line naming the file and the key;
what the schema promises to read leniently (a key an older writer left out, a key no field
holds) still reads.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from support.stores import raw_sql

from pytest_modelsweep.core.codec import Record
from pytest_modelsweep.core.errors import DataError
from pytest_modelsweep.core.measurements import (
    AccuracyStats,
    AccuracyVerdictStats,
    CapacityRatioStats,
    CapacityStats,
    Measurement,
    OtherStats,
    RateCapacityRatioStats,
    RateCapacityStats,
    ScreeningResult,
    SmokeStats,
    StartupStats,
    ThroughputRatioStats,
    ThroughputStats,
    measurements_of,
)
from pytest_modelsweep.store.database import Store
from pytest_modelsweep.store.results import FIX, ResultsWriter, load_results

DATA = Path(__file__).resolve().parent / "data"
V1, V2 = DATA / "results_v1_every_kind.json", DATA / "results_v2_every_kind.json"
BEFORE_OPEN_LOOP = {
    AccuracyStats,
    ThroughputStats,
    CapacityStats,
    SmokeStats,
    ScreeningResult,
    AccuracyVerdictStats,
    ThroughputRatioStats,
    CapacityRatioStats,
    OtherStats,
}
KINDS = {
    V1: ("pytest-modelsweep/results/1", BEFORE_OPEN_LOOP),
    V2: (
        "pytest-modelsweep/results/2",
        BEFORE_OPEN_LOOP | {RateCapacityStats, RateCapacityRatioStats, StartupStats},
    ),
}


def text(data: Any) -> str:
    return json.dumps(data)


def figures(data: Any) -> Any:
    """A JSON value with its numbers to 12 digits (a figure a record derives, such as a cold
    start's interval, may differ in its last bits from the old code's arithmetic)."""
    if isinstance(data, dict):
        return {k: figures(v) for k, v in data.items()}
    if isinstance(data, list):
        return [figures(v) for v in data]
    return float(f"{data:.12g}") if isinstance(data, float) else data


def not_written_by_fields(record: Record, where: str = "stats") -> list[str]:
    """Where a record (or one inside it) read a dict its fields do not write back, key for key
    and in order (an accuracy's keys follow its benchmark's summary: :meth:`AccuracyStats.of`)."""
    found = []
    source, read = record.shape.source, record.shape.read
    if source is not None and (
        json.dumps(figures(read), sort_keys=True) != json.dumps(figures(source), sort_keys=True)
        or (list(read) != list(source) and not isinstance(record, AccuracyStats))
    ):
        found.append(where)
    for spec in fields(record):
        value = getattr(record, spec.name)
        for index, inner in enumerate(value if isinstance(value, tuple) else (value,)):
            if isinstance(inner, Record):
                found += not_written_by_fields(inner, f"{where}.{spec.name}[{index}]")
    return found


@pytest.mark.parametrize("path", [V1, V2], ids=["schema-1", "schema-2"])
def test_a_results_file_of_each_version_reads_back_as_the_old_code_wrote_it(path: Path) -> None:
    schema, kinds = KINDS[path]
    data = load_results(path)
    assert data["schema"] == schema
    read = measurements_of(data["measurements"], where=str(path))
    assert {type(m.stats) for m in read} == kinds
    assert {m.stats.design for m in read if isinstance(m.stats, ThroughputRatioStats)} == {
        "back-to-back",
        "interleaved",
    }
    for measurement, written in zip(read, data["measurements"]):
        assert text(measurement.to_dict()) == text(written), measurement.test_id
        again = Measurement.from_dict(json.loads(text(measurement.to_dict())))
        assert text(again.to_dict()) == text(written)
        if not isinstance(measurement.stats, OtherStats):
            assert not_written_by_fields(measurement.stats) == [], measurement.test_id


def test_a_value_of_the_wrong_type_is_one_line_naming_the_file_and_the_key(tmp_path: Path) -> None:
    data = json.loads(V2.read_text(encoding="utf-8"))
    index = next(i for i, m in enumerate(data["measurements"]) if m["benchmark"] == "throughput")
    data["measurements"][index]["stats"]["repeats"][1]["ttft"]["p50_ms"] = "fast"
    broken = tmp_path / "r.json"
    broken.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError) as refused:
        load_results(broken)
    run = data["run"]["run_id"]
    assert str(refused.value) == (
        f"{broken}: run {run}: measurements[{index}].stats.repeats[1]"
        ".ttft.p50_ms: expected a number, got str 'fast'; " + FIX
    )
    data["measurements"][index]["stats"]["repeats"][1]["ttft"]["p50_ms"] = 8.5
    data["measurements"][index]["items"] = [3]
    broken.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError) as refused:
        load_results(broken)
    assert str(refused.value) == (
        f"{broken}: run {run}: measurements[{index}].items[0]: "
        "expected an object, got int 3; " + FIX
    )


def test_what_the_schema_reads_leniently_still_reads() -> None:
    """A key an older writer left out reads as the field's default and stays out; a key no
    field holds is kept in its place; a field changed since writes its new value."""
    data = next(
        m
        for m in json.loads(V2.read_text(encoding="utf-8"))["measurements"]
        if m["benchmark"] == "throughput"
    )
    window = data["stats"]["repeats"][0]
    del window["server_metrics"]
    window["my_figure"] = [1, 2]
    window["fidelity"] = 1  # an int where the writer wrote a float
    data["stats"] = {"mine": "first", **data["stats"]}
    measurement = Measurement.from_dict(data)
    stats = measurement.stats
    assert isinstance(stats, ThroughputStats)
    assert stats.repeats[0].server_metrics is None and stats.repeats[0].fidelity == 1.0
    assert text(measurement.to_dict()) == text(data)
    moved = replace(measurement, run_id="r1").to_dict()
    assert text(moved) == text({**data, "run_id": "r1"})


def strict_loads(written: str) -> Any:
    """JSON as a strict parser reads it: ``NaN`` or ``Infinity`` is an error."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(written, parse_constant=refuse)


def test_non_finite_figures_are_written_as_null_saying_why(tmp_path: Path) -> None:
    """The journal, the results file and the store's JSON are strict: a NaN or infinity is
    null, the measurement lists it under ``non_finite``, and it reads back (null: NaN)."""
    data = next(
        m
        for m in json.loads(V2.read_text(encoding="utf-8"))["measurements"]
        if m["benchmark"] == "throughput"
    )
    data["stats"]["repeats"][0]["fidelity"] = float("nan")
    data["stats"]["repeats"][1]["tpot"]["p50_ms"] = float("inf")
    why = {"stats.repeats[0].fidelity": "nan", "stats.repeats[1].tpot.p50_ms": "inf"}
    results = tmp_path / "results.json"
    writer = ResultsWriter(results, {"run_id": "r1"})
    writer.start()
    writer.add(data)
    journalled = [strict_loads(line) for line in writer.journal.read_text().splitlines()]
    assert journalled[1]["measurement"]["non_finite"] == why
    writer.finish({"mean": float("-inf")})
    document = strict_loads(results.read_text(encoding="utf-8"))
    written = document["measurements"][0]
    assert written["non_finite"] == why and document["summary"]["non_finite"] == {"mean": "-inf"}
    assert written["stats"]["repeats"][0]["fidelity"] is None
    stats = measurements_of(load_results(results)["measurements"], where="r")[0].stats
    assert isinstance(stats, ThroughputStats) and math.isnan(stats.repeats[0].fidelity)
    store = Store(tmp_path / "store.sqlite")
    store.add_run("r1", "embedded", {"started_at": "t", "rate": float("inf")})
    store.add_measurement("r1", data)
    stored = raw_sql(
        str(tmp_path / "store.sqlite"),
        "SELECT measurement_json FROM measurements",
        "SELECT run_json FROM runs",
    )
    assert strict_loads(stored[0][0][0])["non_finite"] == why
    assert strict_loads(stored[1][0][0])["non_finite"] == {"rate": "inf"}
    read = Measurement.from_dict(store.measurement_of("r1", data["model"], "throughput"))
    assert isinstance(read.stats, ThroughputStats) and math.isnan(read.stats.repeats[0].fidelity)
    store.close()
