"""``modelsweep store copy SRC DST``: a store's history moved into another store, in one transaction.

Runs with their rows, their items and the baselines' histories, row for row. A run the
target holds is refused unless ``existing`` is ``skip`` (keep the target's) or ``replace``;
an item the target has is kept (overwritten under ``replace``). A baseline in both gets
both histories by save time, cut to :data:`~pytest_modelsweep.store.schema.BASELINE_HISTORY`.
The target numbers copied measurements after its own: they count as its most recent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table, delete, select

from ..core.errors import DataError
from .database import Store
from .schema import (
    BASELINE_HISTORY,
    BASELINE_RUNS,
    BASELINES,
    ITEMS,
    MEASUREMENTS,
    RUN_TABLES,
    insert_ignore,
    upsert,
)

EXISTING = ("refuse", "skip", "replace")
"""What to do with a run the target already holds."""

_CHUNK = 500


def copy_store(source: Store, target: Store, *, existing: str = "refuse") -> dict[str, int]:
    """Copy ``source``'s history into ``target``; the rows copied per table (``runs``, …)."""
    if existing not in EXISTING:
        raise ValueError(f"existing: expected one of {EXISTING}, got {existing!r}")
    with source.reading() as src:
        rows = {table.name: _rows(src, table) for table in (*RUN_TABLES, ITEMS, BASELINE_RUNS)}
    source_runs = _run_ids(rows)
    counts: dict[str, int] = {}
    with target.writing() as dst:
        present = sorted(source_runs & _run_ids({t.name: _rows(dst, t) for t in RUN_TABLES}))
        if present and existing == "refuse":
            raise DataError(
                f"{target.location}: already holds {len(present)} of the {len(source_runs)} "
                f"runs of {source.location} (first: {present[0]}); pass --existing skip to copy "
                "only the others, or --existing replace to overwrite them"
            )
        copying = source_runs - set(present) if existing == "skip" else source_runs
        if existing == "replace" and present:
            for table in RUN_TABLES:
                dst.execute(delete(table).where(table.c.run_id.in_(present)))
        for table in RUN_TABLES:
            chosen = [
                {key: value for key, value in row.items() if key != "id"}  # numbered anew
                for row in rows[table.name]
                if row["run_id"] in copying
            ]
            _insert(dst, table.insert(), chosen)
            counts[table.name] = len(chosen)
        item_keys = ("serving_key", "benchmark", "item_id", "prompt_hash")
        items = (
            upsert(target.dialect, ITEMS, item_keys, ("model", "record_json", "first_run_id"))
            if existing == "replace"
            else insert_ignore(target.dialect, ITEMS)
        )
        _insert(dst, items, rows[ITEMS.name])
        counts[ITEMS.name] = len(rows[ITEMS.name])
        skipped = set(present) if existing == "skip" else set()
        entries = [row for row in rows[BASELINE_RUNS.name] if row["run_id"] not in skipped]
        counts[BASELINES.name] = _merge_baselines(dst, target.dialect, entries)
    return counts


def _rows(conn: Connection, table: Table) -> list[dict[str, Any]]:
    order = (
        [table.c.id]
        if table is MEASUREMENTS
        else [table.c.seq]
        if table is BASELINE_RUNS
        else list(table.primary_key.columns)
    )
    return [dict(row) for row in conn.execute(select(table).order_by(*order)).mappings()]


def _run_ids(rows: Mapping[str, Iterable[Mapping[str, Any]]]) -> set[str]:
    return {str(row["run_id"]) for table in RUN_TABLES for row in rows[table.name]}


def _insert(conn: Connection, statement: Any, rows: Sequence[dict[str, Any]]) -> None:
    for start in range(0, len(rows), _CHUNK):
        conn.execute(statement, list(rows[start : start + _CHUNK]))


def _merge_baselines(conn: Connection, dialect: str, entries: list[dict[str, Any]]) -> int:
    """Add the source's history entries to the target's baselines; how many baselines changed."""
    names = sorted({str(entry["name"]) for entry in entries})
    for name in names:
        history = {
            str(row["run_id"]): row for row in _rows(conn, BASELINE_RUNS) if row["name"] == name
        }
        history.update({str(e["run_id"]): e for e in entries if e["name"] == name})
        merged = sorted(history.values(), key=lambda row: str(row["saved_at"]))
        kept = merged[-BASELINE_HISTORY:]
        conn.execute(delete(BASELINE_RUNS).where(BASELINE_RUNS.c.name == name))
        _insert(
            conn,
            BASELINE_RUNS.insert(),
            [
                {
                    "name": name,
                    "run_id": row["run_id"],
                    "saved_at": row["saved_at"],
                    "sweep_run": row.get("sweep_run"),
                }
                for row in kept
            ],
        )
        newest = kept[-1]
        conn.execute(
            upsert(dialect, BASELINES, ("name",), ("run_id", "saved_at")).values(
                name=name, run_id=newest["run_id"], saved_at=newest["saved_at"]
            )
        )
    return len(names)
