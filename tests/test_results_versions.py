"""Results files of the two older schema versions, written by the code of their time, read
by today's through one dict-to-dict upgrade (``store/upgrade.py``) into the same records they
read into before schema 3 (the records dumped, class name and fields, at commit 080a7c2 by
``tests/data/dump_golden_records.py``):

* ``tests/data/results_v1_every_kind.json``: ``pytest-modelsweep/results/1``, written by the
  code before the typed records (commit 432fbe3; see tests/test_measurement_records.py);
* ``tests/data/results_v2_every_kind.json``: ``pytest-modelsweep/results/2``, written by the
  code before the records were written by cattrs (commit 243aec3) in the four runs of
  ``tests/test_measurement_records.py`` (every kind and design, the open loop and the cold
  start included).

A file with a value of the wrong type is refused in one line naming the file and the key;
what the schema promises to read leniently (a key an older writer left out, a key no field
holds) still reads.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.stores import raw_sql

from pytest_modelsweep.core.errors import DataError
from pytest_modelsweep.core.jsontext import strict_json
from pytest_modelsweep.core.measurements import (
    Measurement,
    ThroughputRatioStats,
    ThroughputStats,
    ThroughputWindow,
    measurements_of,
)
from pytest_modelsweep.store.database import Store
from pytest_modelsweep.store.results import FIX, ResultsWriter, load_results
from pytest_modelsweep.store.upgrade import upgrade_measurement, upgrade_results

DATA = Path(__file__).resolve().parent / "data"
V1, V2 = DATA / "results_v1_every_kind.json", DATA / "results_v2_every_kind.json"
RENAMED = {
    "RateStep": "SearchStep",
    "CapacityStats": "SearchStats",
    "RateCapacityStats": "SearchStats",
    "CapacityRatioStats": "SearchRatioStats",
    "RateCapacityRatioStats": "SearchRatioStats",
}
"""The classes of 080a7c2 that are one record with a ``knob`` field now."""
KNOB = {
    "concurrency": ("CapacityStats", "CapacityRatioStats"),
    "rate": ("RateCapacityStats", "RateCapacityRatioStats"),
}


def neutral(value: Any) -> Any:
    """A record as plain JSON values: its class's name and its fields (as the dump script)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__class__": type(value).__name__} | {
            f.name: neutral(getattr(value, f.name)) for f in dataclasses.fields(value)
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): neutral(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [neutral(v) for v in value]
    return repr(value) if isinstance(value, float) and not math.isfinite(value) else value


def as_today(before: Any) -> Any:
    """A record dumped at 080a7c2 with its class renamed as today (a search's knob, a class
    variable then, is a field now), a concurrency search's rate-only fields unset (0 then),
    and a concurrency step's window (a ``StepWindow`` then) a throughput window of those
    figures: its timed requests are the step's requests."""
    if isinstance(before, list):
        return [as_today(v) for v in before]
    if not isinstance(before, dict):
        return before
    data = {k: as_today(v) for k, v in before.items()}
    name = data.get("__class__")
    knob = next((k for k, names in KNOB.items() if name in names), None)
    if knob is not None:
        data.setdefault("knob", knob)
    if name == "CapacityStats":  # a rate sweep's design, 0 then in a concurrency search, unset now
        data.update({key: None for key in ("target", "start", "maximum") if not data[key]})
    if name in RENAMED:
        data["__class__"] = RENAMED[name]
    window = data.get("recorded")
    if isinstance(window, dict) and window["__class__"] == "StepWindow":
        assert window.pop("timed_requests") == data["requests"]
        data["recorded"] = {**json.loads(json.dumps(neutral(ThroughputWindow()))), **window}
        data["recorded"]["__class__"] = "ThroughputWindow"
    return data


@pytest.mark.parametrize("path", [V1, V2], ids=["schema-1", "schema-2"])
def test_a_results_file_of_each_version_reads_into_the_records_it_read_into(path: Path) -> None:
    data = load_results(path)
    assert data["schema"] == "pytest-modelsweep/results/3"
    read = measurements_of(data["measurements"], where=str(path))
    assert {m.stats.design for m in read if isinstance(m.stats, ThroughputRatioStats)} == {
        "back-to-back",
        "interleaved",
    }
    dumped = json.loads(path.with_suffix(".records.json").read_text(encoding="utf-8"))
    now = json.loads(json.dumps([neutral(m) for m in read], sort_keys=True))
    assert len(now) == len(dumped)
    for before, after in zip(dumped, now):
        for measurement in (before, after):  # items and requests are the file's dicts, as read
            measurement.pop("items"), measurement.pop("requests")
        assert as_today(after) == as_today(before), after["test_id"]
    for measurement in read:  # and schema 3 reads back what it writes
        assert Measurement.from_dict(measurement.to_dict()) == measurement


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
    """A key an older writer left out reads as the field's default; a key no field holds is
    left out; an int reads as a float."""
    data = upgrade_measurement(
        next(
            m
            for m in json.loads(V2.read_text(encoding="utf-8"))["measurements"]
            if m["benchmark"] == "throughput"
        )
    )
    window = data["stats"]["repeats"][0]
    del window["server_metrics"]
    window["my_figure"] = [1, 2]
    window["fidelity"] = 1  # an int where the writer wrote a float
    measurement = Measurement.from_dict(data)
    stats = measurement.stats
    assert isinstance(stats, ThroughputStats)
    assert stats.repeats[0].server_metrics is None and stats.repeats[0].fidelity == 1.0
    written = measurement.to_dict()["stats"]["repeats"][0]
    assert "my_figure" not in written and written["fidelity"] == 1.0
    assert replace(measurement, run_id="r1").to_dict()["run_id"] == "r1"


def strict_loads(written: str) -> Any:
    """JSON as a strict parser reads it: ``NaN`` or ``Infinity`` is an error."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(written, parse_constant=refuse)


def test_non_finite_figures_are_written_as_null_saying_why(tmp_path: Path) -> None:
    """The journal, the results file and the store's JSON are strict: a NaN or infinity is
    null, the measurement lists it under ``non_finite``, and it reads back (null: NaN)."""
    data = upgrade_measurement(
        next(
            m
            for m in json.loads(V2.read_text(encoding="utf-8"))["measurements"]
            if m["benchmark"] == "throughput"
        )
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
    assert stats.repeats[1].tpot.p50_ms == math.inf  # an infinity listed reads back
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


def test_a_search_of_the_other_knob_is_one_line(tmp_path: Path) -> None:
    """A rate capacity's stats that say they searched concurrency are refused, naming the key."""
    data = upgrade_results(json.loads(V2.read_text(encoding="utf-8")))
    index = next(i for i, m in enumerate(data["measurements"]) if m["benchmark"] == "rate_capacity")
    data["measurements"][index]["stats"]["knob"] = "concurrency"
    broken = tmp_path / "r.json"
    broken.write_text(strict_json(data), encoding="utf-8")
    with pytest.raises(DataError) as refused:
        load_results(broken)
    assert str(refused.value) == (
        f"{broken}: run {data['run']['run_id']}: measurements[{index}].stats.knob: expected "
        f"'rate' for a 'rate_capacity' measurement, got 'concurrency'; {FIX}"
    )
