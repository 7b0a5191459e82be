"""The results file: run and endpoint provenance, every measurement (docs/results-schema.md).

Only the controller writes it: a journal as each measurement arrives, the file at the end;
``load_results`` reads either. A journal that cannot be written raises OutputError once and
stops (the file still gets every measurement). Both are strict JSON: a NaN or infinity is
null, listed under ``non_finite`` (:func:`~pytest_modelsweep.core.codec.finite`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.codec import finite, strict_json
from ..core.errors import DataError
from ..core.measurements import measurements_of
from ..core.outputs import write_failure
from ..core.secrets import redacted

SCHEMA = "pytest-modelsweep/results/2"
"""2: an item keeps its answer once, in its completion (``response`` only when it shows
something else); 1: every item also had ``response``. Both are read (an item of 1 as it
was, one of 2 gets its ``response`` back from :meth:`ItemRecord.from_dict`)."""
READABLE_SCHEMAS = ("pytest-modelsweep/results/1", SCHEMA)


def _text(value: Any) -> str | None:
    return str(value) if value else None


@dataclass(frozen=True)
class RunInfo:
    """What the reports read of a run dict (the results file's ``run``)."""

    run_id: str | None = None
    sweep_name: str | None = None
    reference: str | None = None
    commit: str | None = None
    dirty: bool = False
    backend: str | None = None
    image: str | None = None

    @classmethod
    def of(cls, run: Mapping[str, Any]) -> RunInfo:
        project, serving = run.get("project"), run.get("serving")
        project = project if isinstance(project, Mapping) else {}
        serving = serving if isinstance(serving, Mapping) else {}
        return cls(_text(run.get("run_id")), _text(run.get("sweep_name")),
                   _text(run.get("reference")), _text(project.get("commit")),
                   bool(project.get("dirty")), _text(serving.get("backend")),
                   _text(serving.get("image")))


@dataclass(frozen=True)
class FailedTest:
    """A failed test as the results file's ``summary.failures`` lists it."""

    test_id: str
    when: str
    outcome: str
    message: str

    @classmethod
    def of(cls, failure: Mapping[str, Any]) -> FailedTest:
        return cls(*(str(failure.get(key) or "") for key in ("test_id", "when", "outcome",
                                                              "message")))


class ResultsWriter:
    """Appends measurements to a journal, then writes the final JSON document."""

    def __init__(self, path: Path, run: dict[str, Any]) -> None:
        self.path = path
        self.journal = path.with_name(path.name + ".partial.jsonl")
        self.run = finite(redacted(run))
        self.measurements: list[dict[str, Any]] = []
        self.journal_error: str | None = None
        """Why the journal stopped (one line); None while it is written."""
        self._journal_started = False

    def start(self) -> None:
        """Begin the journal with the run's provenance (raises OutputError in one line)."""
        self._append({})

    def add(self, measurement: dict[str, Any]) -> None:
        """Keep ``measurement`` and journal it; raises OutputError when the journal cannot be
        written (the measurement is kept all the same)."""
        measurement = finite(redacted(measurement))
        self.measurements.append(measurement)
        self._append({"measurement": measurement})

    def _append(self, entry: dict[str, Any]) -> None:
        if self.journal_error is not None:
            return
        try:
            if not self._journal_started:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.journal, "w", encoding="utf-8") as handle:
                    handle.write(strict_json({"schema": SCHEMA, "run": self.run}) + "\n")
                self._journal_started = True
            if "measurement" in entry:
                with open(self.journal, "a", encoding="utf-8") as handle:
                    handle.write(strict_json(entry) + "\n")
                    handle.flush()
                    os.fsync(handle.fileno())
        except OSError as error:
            failure = write_failure("the results journal", self.journal, error,
                                    "free space on its disk or pass --results elsewhere; the "
                                    "measurements are kept and written at the end")
            self.journal_error = str(failure)
            raise failure from None

    def document(self, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        return _document(self.run, self.measurements, finite(redacted(summary or {})))

    def finish(self, summary: dict[str, Any] | None = None) -> None:
        """Write the results file atomically and remove the journal; raises OutputError in one
        line when it cannot be written (the journal, if whole, then stays)."""
        staged = self.path.with_name(self.path.name + ".tmp")
        if self.journal_error is not None:
            # an incomplete journal: it would only take space the whole file needs
            self.journal.unlink(missing_ok=True)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(staged, "w", encoding="utf-8") as handle:
                handle.write(strict_json(self.document(summary), indent=1) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            staged.replace(self.path)
        except OSError as error:
            staged.unlink(missing_ok=True)
            raise write_failure("the results file", self.path, error,
                                "free space on its disk or pass --results elsewhere") from None
        self.journal.unlink(missing_ok=True)


def load_results(path: Path) -> dict[str, Any]:
    """Read a results file, or rebuild it from the journal of an interrupted run; a
    measurement with a value of the wrong type is a DataError naming the file and the key."""
    data = _load(path)
    measurements_of(data["measurements"], where=str(path))
    return data


def _load(path: Path) -> dict[str, Any]:
    journal = path.with_name(path.name + ".partial.jsonl")
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise DataError(f"{path}: not a JSON results file ({exc})") from None
        if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
            raise DataError(f"{path}: not a pytest-modelsweep results file (schema {SCHEMA})")
        if not isinstance(data.get("measurements"), list):
            raise DataError(f"{path}: measurements: expected a list")
        return data
    if journal.is_file():
        run: dict[str, Any] = {}
        measurements: list[dict[str, Any]] = []
        for line in journal.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                break  # the last line of a killed run may be cut short: all before it counts
            if "run" in entry:
                run = entry["run"]
            elif "measurement" in entry:
                measurements.append(entry["measurement"])
        return _document(run, measurements, {"interrupted": True})
    raise DataError(f"{path}: no results file (nor an interrupted run's journal) there")


def _document(run: dict[str, Any], measurements: list[dict[str, Any]],
              summary: dict[str, Any]) -> dict[str, Any]:
    """The results document; ``endpoints``: each model's first provenance."""
    endpoints: dict[str, Any] = {}
    for measurement in measurements:
        if measurement.get("model") and measurement.get("provenance"):
            endpoints.setdefault(measurement["model"], measurement["provenance"])
    return {"schema": SCHEMA, "run": run, "endpoints": endpoints, "measurements": measurements,
            "summary": summary}
