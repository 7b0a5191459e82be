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

from ..core.errors import DataError
from ..core.jsontext import finite, strict_json
from ..core.measurements import measurements_of
from ..core.outputs import write_failure
from ..core.secrets import redacted
from .upgrade import OLDER, SCHEMA, upgrade_results

READABLE_SCHEMAS = (*OLDER, SCHEMA)
"""3: each record as cattrs writes it; 2: an item keeps its answer once, in its completion
(``response`` only when it shows something else); 1: every item also had ``response``. 1 and
2 are read through :func:`~.upgrade.upgrade_results`."""


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
        return cls(
            _text(run.get("run_id")),
            _text(run.get("sweep_name")),
            _text(run.get("reference")),
            _text(project.get("commit")),
            bool(project.get("dirty")),
            _text(serving.get("backend")),
            _text(serving.get("image")),
        )


@dataclass(frozen=True)
class FailedTest:
    """A failed test as the results file's ``summary.failures`` lists it."""

    test_id: str
    when: str
    outcome: str
    message: str

    @classmethod
    def of(cls, failure: Mapping[str, Any]) -> FailedTest:
        return cls(
            *(str(failure.get(key) or "") for key in ("test_id", "when", "outcome", "message"))
        )


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
                _write_durably(self.journal, "w", {"schema": SCHEMA, "run": self.run})
                self._journal_started = True
            if "measurement" in entry:
                _write_durably(self.journal, "a", entry)
        except OSError as error:
            failure = write_failure(
                "the results journal",
                self.journal,
                error,
                "free space on its disk or pass --results elsewhere; the "
                "measurements are kept and written at the end",
            )
            self.journal_error = str(failure)
            raise failure from None

    def finish(self, summary: dict[str, Any] | None = None) -> None:
        """Write the results file atomically and remove the journal; raises OutputError in one
        line when it cannot be written (the journal, if whole, then stays)."""
        staged = self.path.with_name(self.path.name + ".tmp")
        if self.journal_error is not None:
            # an incomplete journal: it would only take space the whole file needs
            self.journal.unlink(missing_ok=True)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            document = results_document(
                self.run, self.measurements, finite(redacted(summary or {}))
            )
            _write_durably(staged, "w", document, indent=1)
            staged.replace(self.path)
        except OSError as error:
            staged.unlink(missing_ok=True)
            raise write_failure(
                "the results file",
                self.path,
                error,
                "free space on its disk or pass --results elsewhere",
            ) from None
        self.journal.unlink(missing_ok=True)


def _write_durably(path: Path, mode: str, data: Any, indent: int | None = None) -> None:
    """``data`` as one strict JSON line (or an ``indent``-ed document) written to ``path``
    (``mode``: ``w`` or ``a``), on the disk when this returns."""
    with open(path, mode, encoding="utf-8") as handle:
        handle.write(strict_json(data, indent=indent) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


FIX = (
    "it is not as pytest-modelsweep wrote it: restore the file the run wrote, or leave it "
    "out (docs/results-schema.md)"
)
"""The fix a results file (or journal) that does not read names."""


def load_results(path: Path) -> dict[str, Any]:
    """Read a results file, or rebuild it from the journal of an interrupted run, checked as
    docs/results-schema.md promises (:func:`checked_results`)."""
    return checked_results(*_load(path))


def checked_results(data: Any, where: str) -> dict[str, Any]:
    """The results document ``data`` read from ``where``, checked once, where it enters: a
    ``run`` that is an object, ``endpoints`` and ``summary`` objects, and each measurement,
    its items and its timed requests of their types (:func:`measurements_of`); anything else
    is a DataError in one line naming the file, the run, the key and the fix."""
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
        raise DataError(f"{where}: not a pytest-modelsweep results file (schema {SCHEMA})")
    document: dict[str, Any] = dict(upgrade_results(data))
    run = document.get("run")
    run_id = run.get("run_id") if isinstance(run, Mapping) else None
    named = f"{where}: run {run_id}" if isinstance(run_id, str) and run_id else where

    def refuse(key: str, expected: str, value: Any) -> DataError:
        return DataError(
            f"{named}: {key}: expected {expected}, got {type(value).__name__} {value!r}"[:300]
            + f"; {FIX}"
        )

    if not isinstance(run, dict):
        raise refuse("run", "an object (the run's provenance)", run)
    for key in ("endpoints", "summary"):
        if not isinstance(document.setdefault(key, {}), dict):
            raise refuse(key, "an object", document[key])
    measurements_of(document.get("measurements"), where=named, fix=FIX)
    return document


def _load(path: Path) -> tuple[Any, str]:
    """The document at ``path`` (or its journal's, rebuilt) and where it was read."""
    journal = path.with_name(path.name + ".partial.jsonl")
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8")), str(path)
        except (ValueError, OSError) as exc:
            raise DataError(f"{path}: not a JSON results file ({exc}); {FIX}") from None
    if journal.is_file():
        try:
            lines = journal.read_text(encoding="utf-8").splitlines()
        except (ValueError, OSError) as exc:
            raise DataError(f"{journal}: not a results journal ({exc}); {FIX}") from None
        run: Any = {}
        schema: Any = SCHEMA
        measurements: list[Any] = []
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
            except ValueError:
                break  # the last line of a killed run may be cut short: all before it counts
            if not isinstance(entry, dict):
                raise DataError(
                    f"{journal}: line {number}: expected an object, got "
                    f"{type(entry).__name__}; {FIX}"
                )
            if "run" in entry:
                run, schema = entry["run"], entry.get("schema")
            elif "measurement" in entry:
                measurements.append(entry["measurement"])
        document = results_document(run, measurements, {"interrupted": True})
        return {**document, "schema": schema}, str(journal)
    raise DataError(f"{path}: no results file (nor an interrupted run's journal) there")


def results_document(run: Any, measurements: list[Any], summary: dict[str, Any]) -> dict[str, Any]:
    """A results document; ``endpoints``: each model's first provenance."""
    endpoints: dict[str, Any] = {}
    for measurement in measurements:
        if (
            isinstance(measurement, dict)
            and measurement.get("model")
            and measurement.get("provenance")
        ):
            endpoints.setdefault(measurement["model"], measurement["provenance"])
    return {
        "schema": SCHEMA,
        "run": run,
        "endpoints": endpoints,
        "measurements": measurements,
        "summary": summary,
    }
