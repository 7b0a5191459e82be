"""The store's tables, once for every database: one SQLAlchemy ``MetaData``, its version, its upgrades.

Records are kept as JSON text, so a store moves between SQLite and PostgreSQL row for row
(``modelsweep store copy``). Opening a store of an older version upgrades it in place
(:data:`UPGRADES`, inside the opening transaction); a newer one is refused, naming the fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    inspect,
    select,
    update,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql.dml import Insert

from ..core.jsontext import strict_json
from .upgrade import upgrade_measurement

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql

SCHEMA_VERSION = 5
"""1: the first stores; 2: baselines keep a history (``baseline_runs``); 3: runs join sweep
runs (``runs.sweep_run``, ``models_json``, ``finished_at``; ``baseline_runs.sweep_run``); 4:
``runs.exit_status`` (a run never marked ended was killed), answers kept once in ``items``;
5: measurements in results schema 3 (written before in schema 1 or 2)."""

#: How many runs a baseline keeps: ``--save-baseline NAME`` again adds one, the oldest goes.
BASELINE_HISTORY = 5

metadata = MetaData()


def _texts(*names: str) -> list[Column[str]]:
    """Text columns that may not be NULL."""
    return [Column(name, Text, nullable=False) for name in names]


META = Table(
    "meta",
    metadata,
    Column("key", Text, primary_key=True),
    *_texts("value"),
)
RUNS = Table(
    "runs",
    metadata,
    Column("run_id", Text, primary_key=True),
    *_texts("started_at", "sweep_name", "run_json"),
    # the logical sweep (--sweep-run) this run is one host's part of; NULL: none
    Column("sweep_run", Text),
    # the models whose own tests the run has (a JSON list); NULL: not collected yet
    Column("models_json", Text),
    # when the run's session ended; NULL: still running, or killed (interrupted); "": recorded
    # before every run was marked when it ended (schema < 4), so whether it did is not known
    Column("finished_at", Text),
    # the session's exit status, set with finished_at; NULL: not ended, or not known
    Column("exit_status", Integer),
)
Index("runs_sweep_run", RUNS.c.sweep_run)
MEASUREMENTS = Table(
    "measurements",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_texts("run_id", "model", "benchmark", "test_id"),
    Column("value", Float, nullable=False),
    *_texts("unit"),
    Column("n", Integer, nullable=False),
    Column("outcome", Text),
    *_texts("measurement_json"),
    sqlite_autoincrement=True,
)
Index("measurements_run", MEASUREMENTS.c.run_id, MEASUREMENTS.c.model, MEASUREMENTS.c.benchmark)
ITEMS = Table(
    "items",
    metadata,
    *_texts(
        "serving_key", "benchmark", "item_id", "prompt_hash", "model", "record_json", "first_run_id"
    ),
    PrimaryKeyConstraint("serving_key", "benchmark", "item_id", "prompt_hash"),
)
RUN_ITEMS = Table(
    "run_items",
    metadata,
    *_texts("run_id", "model", "benchmark", "item_id", "serving_key", "prompt_hash"),
    Column("reused", Integer, nullable=False),
    PrimaryKeyConstraint("run_id", "model", "benchmark", "item_id"),
)
TEST_OUTCOMES = Table(
    "test_outcomes",
    metadata,
    *_texts("run_id", "test_id", "outcome"),
    PrimaryKeyConstraint("run_id", "test_id"),
)
BASELINES = Table(
    "baselines",
    metadata,
    Column("name", Text, primary_key=True),
    *_texts("run_id", "saved_at"),
)
BASELINE_RUNS = Table(
    "baseline_runs",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    *_texts("name", "run_id", "saved_at"),
    # set: the entry stands for every run of this sweep run that started by saved_at
    Column("sweep_run", Text),
    UniqueConstraint("name", "run_id"),
    sqlite_autoincrement=True,
)
ENDPOINTS = Table(
    "endpoints",
    metadata,
    *_texts("run_id", "model", "provenance_json"),
    PrimaryKeyConstraint("run_id", "model"),
)

RUN_TABLES = (RUNS, MEASUREMENTS, RUN_ITEMS, TEST_OUTCOMES, ENDPOINTS)
"""The tables whose rows belong to one run (by ``run_id``)."""


def dialect_insert(dialect: str, table: Table) -> sqlite.Insert | postgresql.Insert:
    """``INSERT`` with ``ON CONFLICT`` clauses, in the store's dialect (PostgreSQL's is
    imported only by a store that uses it: a tenth of a second of every run's start)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    return sqlite.insert(table)


def insert_ignore(dialect: str, table: Table) -> Insert:
    """An insert that leaves an existing row (same key) as it is."""
    return dialect_insert(dialect, table).on_conflict_do_nothing()


def upsert(dialect: str, table: Table, keys: tuple[str, ...], columns: tuple[str, ...]) -> Insert:
    """An insert that replaces ``columns`` of an existing row with the same ``keys``."""
    statement = dialect_insert(dialect, table)
    return statement.on_conflict_do_update(
        index_elements=list(keys), set_={name: statement.excluded[name] for name in columns}
    )


def _keep_baseline_history(conn: Connection, dialect: str) -> None:
    """1 → 2: each baseline's one run becomes the first entry of its history."""
    source = select(BASELINES.c.name, BASELINES.c.run_id, BASELINES.c.saved_at).order_by(
        BASELINES.c.saved_at, BASELINES.c.name
    )
    conn.execute(
        insert_ignore(dialect, BASELINE_RUNS).from_select(["name", "run_id", "saved_at"], source)
    )


def _add_column(conn: Connection, table: Table, name: str) -> None:
    """``ALTER TABLE … ADD COLUMN`` unless the column is there (a table made new by this
    opening already has it)."""
    if name not in {column["name"] for column in inspect(conn).get_columns(table.name)}:
        column = table.c[name]
        kind = column.type.compile(dialect=conn.dialect)
        conn.exec_driver_sql(f'ALTER TABLE "{table.name}" ADD COLUMN "{name}" {kind}')


def _join_sweep_runs(conn: Connection, dialect: str) -> None:
    """2 → 3: the runs table learns sweep runs; a baseline entry may stand for one."""
    for table, name in (
        (RUNS, "sweep_run"),
        (RUNS, "models_json"),
        (RUNS, "finished_at"),
        (BASELINE_RUNS, "sweep_run"),
    ):
        _add_column(conn, table, name)
    for index in RUNS.indexes:
        index.create(conn, checkfirst=True)


def _mark_ends_keep_answers_once(conn: Connection, dialect: str) -> None:
    """3 → 4: every run is marked when it ends, with its exit status; a run that is not part
    of a sweep run was not before, so its end is not known (``finished_at`` ``""``). Answers
    need no moving: older rows are read as they are."""
    _add_column(conn, RUNS, "exit_status")
    conn.execute(
        update(RUNS)
        .where(RUNS.c.finished_at.is_(None), RUNS.c.sweep_run.is_(None))
        .values(finished_at="")
    )


def _measurements_in_results_schema_3(conn: Connection, dialect: str) -> None:
    """4 → 5: each measurement row rewritten by :func:`~.upgrade.upgrade_measurement` (a row
    that is not JSON is left for its reader to refuse)."""
    rows = conn.execute(select(MEASUREMENTS.c.id, MEASUREMENTS.c.measurement_json)).all()
    for row_id, text in rows:
        try:
            upgraded = strict_json(upgrade_measurement(json.loads(text)))
        except (TypeError, ValueError):
            continue
        conn.execute(
            update(MEASUREMENTS)
            .where(MEASUREMENTS.c.id == row_id)
            .values(measurement_json=upgraded)
        )


UPGRADES: dict[int, Callable[[Connection, str], None]] = {
    1: _keep_baseline_history,
    2: _join_sweep_runs,
    3: _mark_ends_keep_answers_once,
    4: _measurements_in_results_schema_3,
}
"""Version N → N + 1, run in order after the missing tables are created."""


def newer_schema_message(where: object, version: int, fix: str) -> str:
    return (
        f"{where}: a store of schema version {version}, newer than this pytest-modelsweep's "
        f"({SCHEMA_VERSION}); upgrade pytest-modelsweep or {fix}"
    )
