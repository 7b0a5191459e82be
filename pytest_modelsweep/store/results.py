"""The results file: run provenance, endpoint provenance and every measurement.

Only the controller writes it. Each measurement is appended to a journal
(``<results>.partial.jsonl``, flushed and fsynced) the moment its test report
arrives, so that a crash or ``kill -9`` loses nothing that was measured; the
JSON file is written atomically at the end of the session and the journal
removed. ``load_results`` reads either form. Schema: docs/results-schema.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..core.errors import DataError
from ..core.secrets import redacted

SCHEMA = "pytest-modelsweep/results/1"


class ResultsWriter:
    """Appends measurements to a journal, then writes the final JSON document."""

    def __init__(self, path: Path, run: dict[str, Any]) -> None:
        self.path = path
        self.journal = path.with_name(path.name + ".partial.jsonl")
        self.run = redacted(run)
        self.measurements: list[dict[str, Any]] = []
        self.endpoints: dict[str, dict[str, Any]] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.journal, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"schema": SCHEMA, "run": self.run}) + "\n")

    def add(self, measurement: dict[str, Any]) -> None:
        measurement = redacted(measurement)
        self.measurements.append(measurement)
        model = measurement.get("model")
        if model and measurement.get("provenance"):
            self.endpoints.setdefault(model, measurement["provenance"])
        with open(self.journal, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"measurement": measurement}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def document(self, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "run": self.run,
            "endpoints": self.endpoints,
            "measurements": self.measurements,
            "summary": redacted(summary or {}),
        }

    def finish(self, summary: dict[str, Any] | None = None) -> None:
        staged = self.path.with_name(self.path.name + ".tmp")
        with open(staged, "w", encoding="utf-8") as handle:
            json.dump(self.document(summary), handle, indent=1)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        staged.replace(self.path)
        self.journal.unlink(missing_ok=True)


def load_results(path: Path) -> dict[str, Any]:
    """Read a results file, or rebuild it from the journal of an interrupted run."""
    journal = path.with_name(path.name + ".partial.jsonl")
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise DataError(f"{path}: not a JSON results file ({exc})") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise DataError(f"{path}: not a pytest-modelsweep results file (schema {SCHEMA})")
        return data
    if journal.is_file():
        run: dict[str, Any] = {}
        measurements: list[dict[str, Any]] = []
        endpoints: dict[str, Any] = {}
        for number, line in enumerate(journal.read_text(encoding="utf-8").splitlines(), 1):
            try:
                entry = json.loads(line)
            except ValueError:
                # the last line of a killed run may be cut short: everything before it counts
                break
            if "run" in entry:
                run = entry["run"]
            elif "measurement" in entry:
                measurement = entry["measurement"]
                measurements.append(measurement)
                if measurement.get("provenance"):
                    endpoints.setdefault(measurement["model"], measurement["provenance"])
        return {
            "schema": SCHEMA,
            "run": run,
            "endpoints": endpoints,
            "measurements": measurements,
            "summary": {"interrupted": True},
        }
    raise DataError(f"{path}: no results file (nor an interrupted run's journal) there")
