"""A sweep run: runs on several hosts given the same ``--sweep-run NAME``, read as one.

The comparison finder waits for the run still to measure a side (:func:`awaited`); the
gate and reports read every run's measurements as one run's (:func:`latest_per_setting`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SweepRunMember:
    """One run of a sweep run, as the store recorded it."""

    sweep_run: str
    run_id: str
    started_at: str
    sweep_name: str
    models: tuple[str, ...] | None
    """The models whose own tests the run has; None while it has not collected yet."""
    finished_at: str | None
    """When its session ended; None while it runs (or when it was killed)."""
    host: str | None
    run: dict[str, Any]
    """The run's provenance (``run_json``)."""

    @classmethod
    def from_row(
        cls,
        sweep_run: str,
        run_id: str,
        started_at: str,
        sweep_name: str,
        models_json: str | None,
        finished_at: str | None,
        run_json: str,
    ) -> SweepRunMember:
        run = dict(json.loads(run_json))
        machine = run.get("machine")
        host = machine.get("hostname") if isinstance(machine, Mapping) else None
        models = None if models_json is None else tuple(json.loads(models_json))
        return cls(
            sweep_run,
            str(run_id),
            str(started_at),
            str(sweep_name),
            models,
            None if finished_at is None else str(finished_at),
            None if host is None else str(host),
            run,
        )

    def plans(self, model: str) -> bool:
        """Whether the run measures ``model`` (a run that has not collected yet may)."""
        return self.models is None or model in self.models

    def __str__(self) -> str:
        return f"run {self.run_id}" + (f" on {self.host}" if self.host else "")


def awaited(
    members: Sequence[SweepRunMember], model: str, *, exclude: str
) -> SweepRunMember | None:
    """The run still to measure ``model``, or None: the newest run (not ``exclude``) that
    plans it, while unfinished (a host run again supersedes its killed run)."""
    planning = [m for m in members if m.run_id != exclude and m.plans(model)]
    return planning[-1] if planning and planning[-1].finished_at is None else None


def _key(measurement: Mapping[str, Any]) -> tuple[str, str, str]:
    """Model, benchmark and parameters but a comparison's ``verdict``."""
    params = {k: v for k, v in (measurement.get("params") or {}).items() if k != "verdict"}
    return (
        str(measurement.get("model")),
        str(measurement.get("benchmark")),
        json.dumps(params, sort_keys=True, default=str),
    )


def latest_per_setting(runs: Iterable[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The measurements of several runs (oldest first) as one run's: per model, benchmark
    and parameters, those of the latest run that has them."""
    chosen: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for measurements in runs:
        grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for measurement in measurements:
            grouped.setdefault(_key(measurement), []).append(dict(measurement))
        chosen.update(grouped)
    return [m for group in chosen.values() for m in group]


def sweep_run_heading(
    name: str, members: Sequence[SweepRunMember], base: Mapping[str, Any]
) -> dict[str, Any]:
    """``base`` (a run's provenance) named after the sweep run, with its runs listed."""
    return {
        **base,
        "run_id": f"{name} (sweep run of {len(members)} run{'s' if len(members) != 1 else ''})",
        "sweep_run": name,
        "runs": [
            {
                "run_id": m.run_id,
                "host": m.host,
                "started_at": m.started_at,
                "models": list(m.models or ()),
                "finished_at": m.finished_at,
            }
            for m in members
        ],
    }


def unsettled_failures(
    outcomes: Iterable[tuple[str, str, str]], order: Sequence[str]
) -> list[tuple[str, str, str]]:
    """(run, test, outcome) of the tests whose latest outcome in ``order`` (oldest first)
    is a failure."""
    rank = {run: i for i, run in enumerate(order)}
    latest = {  # the last entry of a test wins
        test: (run, test, outcome)
        for run, test, outcome in sorted(outcomes, key=lambda o: rank.get(o[0], -1))
    }
    return [entry for entry in latest.values() if entry[2] in ("failed", "error")]
