"""The store: runs, measurements and per-item records in SQLite or PostgreSQL (SQLAlchemy Core).

Each item is committed the moment it is scored; writes are idempotent, and a stored item is
reused under the same serving key, benchmark, item id and prompt hash. A store that fails
mid-run is remembered: every later write (and read, once reads failed) raises its OutputError.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Select, delete, func, inspect, select, update
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from ..core.codec import RecordError
from ..core.errors import DataError
from ..core.jsontext import strict_json
from ..core.measurements import check_fields, measurements_of
from ..core.outputs import OutputError
from ..core.records import ItemRecord
from ..core.secrets import redacted
from ..core.store_location import StoreLocation, parse_store_location
from .schema import (
    BASELINE_HISTORY,
    BASELINE_RUNS,
    BASELINES,
    ENDPOINTS,
    ITEMS,
    MEASUREMENTS,
    META,
    RUN_ITEMS,
    RUNS,
    SCHEMA_VERSION,
    TEST_OUTCOMES,
    UPGRADES,
    insert_ignore,
    metadata,
    newer_schema_message,
    upsert,
)
from .sqlite import FIX_NEW_FILE, WRITE_OPTION, check_store_file, is_lock_error, sqlite_engine
from .sweep_run import SweepRunMember, latest_per_setting, sweep_run_heading

__all__ = ["BASELINE_HISTORY", "SCHEMA_VERSION", "Store"]

_SCHEMA_LOCK = 0x6D6F64656C737765  # "modelswe": PostgreSQL's advisory lock while a schema is made
STORE_ROW_FIX = (
    "the row is not as pytest-modelsweep wrote it: restore the store from a copy, "
    "or measure into a new store with --store"
)
_FIX_OTHER_DATABASE = (
    "pass --store with another database, or give the store a schema of its "
    "own (?options=-csearch_path%3Dmodelsweep)"
)
_PASSING_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57014"})
"""PostgreSQL errors that pass (serialization failure, deadlock, lock not available, query
cancelled): the store is not given up on after them."""


class Store:
    """A store, safe to share between threads, processes and hosts. ``create=False``: a store
    that is not there yet is a DataError, not a new empty store."""

    def __init__(
        self,
        location: StoreLocation | Path | str,
        *,
        busy_timeout_s: float = 60.0,
        create: bool = True,
        read_only: bool = False,
    ) -> None:
        self.location = parse_store_location(location)
        self.path: Path | str = self.location.path or self.location.shown
        """Where the store is, as messages name it (a PostgreSQL URL without its password)."""
        self._lock = threading.Lock()
        self.failure: str | None = None
        """The one line of the store's first lasting failure; None while it works."""
        self.on_failure: Callable[[str], None] | None = None
        """Told that line once, when the store fails."""
        self._unreadable = False
        """Whether reads fail too (a server gone); a full or read-only store still reads."""
        self.read_only = read_only
        """Only read: a SQLite file is opened as it is (read-only files too), never upgraded."""
        self._engine = (
            self._open_postgres(create)
            if self.location.path is None
            else self._open_sqlite(self.location.path, busy_timeout_s, create)
        )
        self._writer = self._engine.execution_options(**{WRITE_OPTION: True})

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._engine.dialect.name

    # -- opening ---------------------------------------------------------------
    def _open_sqlite(self, path: Path, busy_timeout_s: float, create: bool) -> Engine:
        """Check the file, connect, make or upgrade the schema; retry while a lock is held."""
        if not create and not path.exists() and not path.is_symlink():
            raise DataError(f"{path}: no store there; run pytest benches first or pass --store")
        deadline = time.monotonic() + busy_timeout_s
        while True:
            engine: Engine | None = None
            try:
                check_store_file(path, busy_timeout_s=busy_timeout_s, read_only=self.read_only)
                engine = sqlite_engine(path, busy_timeout_s, read_only=self.read_only)
                self._ensure_schema(engine, create=not self.read_only)
                return engine
            except BaseException as error:
                if engine is not None:
                    engine.dispose()
                if not isinstance(error, (sqlite3.Error, OperationalError)):
                    raise
                exc = error.orig if isinstance(error, OperationalError) else error
                if not isinstance(exc, sqlite3.Error) or not is_lock_error(exc):
                    raise DataError(
                        f"{path}: cannot use it as the store ({exc}); {FIX_NEW_FILE}"
                    ) from None
                # A new store opened by the controller and xdist workers at once: switching
                # to WAL can report "locked" without waiting; the other process finishes soon.
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise DataError(
                    f"{path}: the store stayed locked ({exc}); is another run holding it?"
                ) from None

    def _open_postgres(self, create: bool) -> Engine:
        from .postgres import connect_error, postgres_engine

        engine = postgres_engine(self.location)
        try:
            self._ensure_schema(engine, create=create)
        except DBAPIError as error:
            engine.dispose()
            if getattr(error.orig, "sqlstate", None) is None:  # libpq's, before any query ran
                raise connect_error(self.location, str(error.orig)) from None
            raise self._refusal(error) from None
        except BaseException:
            engine.dispose()
            raise
        return engine

    def _refusal(self, error: DBAPIError) -> DataError:
        """A database error while the schema was read or made, in one line."""
        from ..core.secrets import redact

        reason = redact(str(error.orig).strip().splitlines()[0])  # not the statement after it
        if getattr(error.orig, "sqlstate", None) == "42501":  # insufficient_privilege
            return DataError(
                f"{self.location}: the user may not make the store's tables "
                f"({reason}); grant it CREATE on the schema (GRANT CREATE ON "
                "SCHEMA public TO USER) or use a database it owns"
            )
        return DataError(f"{self.location}: cannot use it as the store ({reason})")

    def _ensure_schema(self, engine: Engine, *, create: bool) -> None:
        """Make a new store's tables, upgrade an older one, refuse a newer or foreign one
        (in one write transaction; the current version only reads)."""
        with engine.connect() as conn:
            version = _schema_version(conn, self.location)
        if version == SCHEMA_VERSION:
            return
        if version is None and not create:
            raise DataError(
                f"{self.location}: no store in that database yet; run pytest "
                f"benches with --store {self.location} first"
            )
        if self.read_only and version is not None and version < SCHEMA_VERSION:
            raise DataError(
                f"{self.location}: a store of schema {version}, read only here; "
                f"open it writable once to upgrade it to {SCHEMA_VERSION} (a pytest "
                "run with --store there, or modelsweep store copy into a new file)"
            )
        with engine.execution_options(**{WRITE_OPTION: True}).begin() as conn:
            dialect = conn.dialect.name
            if dialect == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
            version = _schema_version(conn, self.location)
            if version is not None and version > SCHEMA_VERSION:
                fix = (
                    "pass --store with a new file name"
                    if dialect == "sqlite"
                    else "pass --store with another database"
                )
                raise DataError(newer_schema_message(self.location, version, fix))
            if version is None:
                ours = sorted(set(inspect(conn).get_table_names()) & set(metadata.tables))
                if ours:
                    raise DataError(
                        f"{self.location}: the database has tables named like the store's "
                        f"({', '.join(ours)}) but no meta table with a schema key; "
                        f"{_FIX_OTHER_DATABASE}"
                    )
            metadata.create_all(conn)
            for step in range(version or SCHEMA_VERSION, SCHEMA_VERSION):
                UPGRADES[step](conn, dialect)
            conn.execute(
                upsert(dialect, META, ("key",), ("value",)).values(
                    key="schema", value=str(SCHEMA_VERSION)
                )
            )

    # -- transactions ----------------------------------------------------------
    def writing(self) -> AbstractContextManager[Connection]:
        """One write transaction; a refused write (full disk, server gone) is an OutputError."""
        return self._connected("write", self.failure is not None, self._writer.begin)

    def reading(self) -> AbstractContextManager[Connection]:
        """One read, its rows fetched inside; a refused read (server gone, unreadable file,
        no connection from the pool) is an OutputError."""
        return self._connected("read", self._unreadable, self._engine.connect)

    @contextmanager
    def _connected(
        self, verb: str, refused: bool, connect: Callable[[], AbstractContextManager[Connection]]
    ) -> Iterator[Connection]:
        """A connection from ``connect`` under the store's lock; :meth:`_failed` on an error,
        the store's failure at once where it is ``refused``."""
        if refused:
            raise OutputError(self.failure)
        try:
            with self._lock, connect() as conn:
                yield conn
        except SQLAlchemyError as error:
            raise self._failed(error, verb) from None

    def _failed(self, error: SQLAlchemyError, verb: str) -> OutputError:
        """A refused read or write in one line naming the fix; remembered (:attr:`failure`)
        unless it passes (a lock held too long, a deadlock)."""
        from ..core.secrets import redact

        orig = error.orig if isinstance(error, DBAPIError) else error
        lines = str(orig).strip().splitlines() or [type(orig).__name__]
        reason = redact(lines[0].strip())  # not the statement after it
        sqlstate = getattr(orig, "sqlstate", None)
        code = getattr(orig, "sqlite_errorcode", None)
        code = None if code is None else int(code) & 0xFF
        fixes = (
            (
                "full" in reason or "space" in reason or sqlstate in ("53100", "53200"),
                "free space on its disk or pass --store elsewhere",
            ),
            (
                code == sqlite3.SQLITE_READONLY or sqlstate == "25006",
                "make it writable again or pass --store elsewhere",
            ),
            (
                self.dialect == "postgresql" and (sqlstate is None or sqlstate[:2] in ("08", "57")),
                "start its PostgreSQL server again (or fix the host and port in --store), "
                "or pass --store elsewhere",
            ),
        )
        fix = next(
            (text for found, text in fixes if found),
            "check the store's disk or server, or pass --store elsewhere",
        )
        line = f"the store {self.path}: cannot {verb} ({reason}); {fix}"
        passing = (
            isinstance(orig, sqlite3.Error) and is_lock_error(orig)
        ) or sqlstate in _PASSING_SQLSTATES
        if not passing and self.failure is None:
            self.failure = line
            self._unreadable = verb == "read" or fix.startswith("start its PostgreSQL")
            if self.on_failure is not None:
                self.on_failure(line)
        elif not passing and verb == "read":
            self._unreadable = True
        return OutputError(line)

    def close(self) -> None:
        with self._lock:
            self._engine.dispose()

    def _write(self, *statements: Any) -> None:
        """Run ``statements`` in one write transaction."""
        with self.writing() as db:
            for statement in statements:
                db.execute(statement)

    def _scalar(self, query: Any) -> Any:
        """The first column of the first row of ``query``; None without a row."""
        with self.reading() as db:
            return db.execute(query).scalar()

    def _all(self, query: Any) -> Sequence[Any]:
        """Every row of ``query``."""
        with self.reading() as db:
            return db.execute(query).all()

    # -- writing ---------------------------------------------------------------
    def add_run(
        self, run_id: str, sweep_name: str, run: dict[str, Any], *, sweep_run: str | None = None
    ) -> None:
        """Record a run as it starts (once); ``finished_at`` stays NULL until :meth:`finish_run`."""
        self._write(
            insert_ignore(self.dialect, RUNS).values(
                run_id=run_id,
                started_at=str(run.get("started_at", "")),
                sweep_name=sweep_name,
                run_json=_json(run),
                sweep_run=sweep_run,
            )
        )

    def plan_run(self, run_id: str, models: Iterable[str]) -> None:
        """The models whose own tests the run has (known once it has collected)."""
        self._write(
            update(RUNS)
            .where(RUNS.c.run_id == run_id)
            .values(models_json=json.dumps(sorted(set(models))))
        )

    def finish_run(self, run_id: str, finished_at: str, *, exit_status: int | None = None) -> None:
        """The run's session has ended, whatever its ``exit_status``."""
        self._write(
            update(RUNS)
            .where(RUNS.c.run_id == run_id)
            .values(finished_at=finished_at, exit_status=exit_status)
        )

    def sweep_run_members(self, sweep_run: str) -> list[SweepRunMember]:
        """The runs of ``sweep_run``, in the order they started."""
        rows = self._all(
            select(
                RUNS.c.run_id,
                RUNS.c.started_at,
                RUNS.c.sweep_name,
                RUNS.c.models_json,
                RUNS.c.finished_at,
                RUNS.c.run_json,
            )
            .where(RUNS.c.sweep_run == sweep_run)
            .order_by(RUNS.c.started_at, RUNS.c.run_id)
        )
        return [SweepRunMember.from_row(sweep_run, *row) for row in rows]

    def add_endpoint(self, run_id: str, model: str, provenance: dict[str, Any]) -> None:
        self._write(
            upsert(self.dialect, ENDPOINTS, ("run_id", "model"), ("provenance_json",)).values(
                run_id=run_id, model=model, provenance_json=_json(provenance)
            )
        )

    def add_measurement(self, run_id: str, measurement: dict[str, Any]) -> None:
        self._write(
            MEASUREMENTS.insert().values(
                run_id=run_id,
                model=measurement["model"],
                benchmark=measurement["benchmark"],
                test_id=measurement.get("test_id", ""),
                value=float(measurement["value"]),
                unit=measurement["unit"],
                n=int(measurement["n"]),
                outcome=measurement.get("outcome"),
                measurement_json=strict_json(_answers_apart(redacted(measurement))),
            )
        )

    def add_item(
        self,
        run_id: str,
        model: str,
        benchmark: str,
        serving_key: str,
        record: ItemRecord,
        *,
        reused: bool = False,
    ) -> None:
        """Commit one scored item and its link to this run; sent again, it replaces its row."""
        with self.writing() as db:
            if not reused:
                db.execute(
                    upsert(
                        self.dialect,
                        ITEMS,
                        ("serving_key", "benchmark", "item_id", "prompt_hash"),
                        ("model", "record_json", "first_run_id"),
                    ).values(
                        serving_key=serving_key,
                        benchmark=benchmark,
                        item_id=record.item_id,
                        prompt_hash=record.prompt_hash,
                        model=model,
                        record_json=_json(record.to_dict()),
                        first_run_id=run_id,
                    )
                )
            db.execute(
                upsert(
                    self.dialect,
                    RUN_ITEMS,
                    ("run_id", "model", "benchmark", "item_id"),
                    ("serving_key", "prompt_hash", "reused"),
                ).values(
                    run_id=run_id,
                    model=model,
                    benchmark=benchmark,
                    item_id=record.item_id,
                    serving_key=serving_key,
                    prompt_hash=record.prompt_hash,
                    reused=int(reused),
                )
            )

    def update_item(self, serving_key: str, benchmark: str, record: ItemRecord) -> None:
        """Replace a stored item's record (its answer scored again by a changed scorer)."""
        self._write(
            update(ITEMS)
            .where(
                ITEMS.c.serving_key == serving_key,
                ITEMS.c.benchmark == benchmark,
                ITEMS.c.item_id == record.item_id,
                ITEMS.c.prompt_hash == record.prompt_hash,
            )
            .values(record_json=_json(record.to_dict()))
        )

    def add_outcome(self, run_id: str, test_id: str, outcome: str) -> None:
        """A finished test of the run (so that others stop waiting for its results)."""
        self._write(
            upsert(self.dialect, TEST_OUTCOMES, ("run_id", "test_id"), ("outcome",)).values(
                run_id=run_id, test_id=test_id, outcome=outcome
            )
        )

    def take_back_items(
        self,
        run_id: str,
        model: str,
        benchmark: str,
        serving_key: str,
        records: Iterable[ItemRecord],
    ) -> int:
        """Store the answered items a run kept in its results but not here (its store had
        failed), as that run's; a stored item stays. How many were taken back."""
        answered = {r.item_id: r for r in records if r.error is None and r.completion is not None}
        stored = self.stored_items(
            serving_key, benchmark, ((r.item_id, r.prompt_hash) for r in answered.values())
        )
        missing = [r for item_id, r in answered.items() if item_id not in stored]
        if missing:
            with self.writing() as db:
                db.execute(
                    insert_ignore(self.dialect, ITEMS),
                    [
                        {
                            "serving_key": serving_key,
                            "benchmark": benchmark,
                            "item_id": r.item_id,
                            "prompt_hash": r.prompt_hash,
                            "model": model,
                            "record_json": _json(r.to_dict()),
                            "first_run_id": run_id,
                        }
                        for r in missing
                    ],
                )
        return len(missing)

    def outcome_of(self, run_id: str, test_id: str) -> str | None:
        value = self._scalar(
            select(TEST_OUTCOMES.c.outcome).where(
                TEST_OUTCOMES.c.run_id == run_id, TEST_OUTCOMES.c.test_id == test_id
            )
        )
        return None if value is None else str(value)

    def save_baseline(
        self,
        name: str,
        run_id: str,
        saved_at: str,
        *,
        keep: int = BASELINE_HISTORY,
        sweep_run: str | None = None,
    ) -> list[str]:
        """Add a run to baseline ``name``'s history, keep the newest ``keep``; the history,
        oldest first. ``baselines`` points at the newest run; ``baseline_runs`` holds the
        history. With ``sweep_run`` the entry stands for that sweep run's runs by ``saved_at``."""
        if keep < 1:
            raise ValueError(f"a baseline keeps at least 1 run, got {keep!r}")
        b = BASELINE_RUNS
        newest = select(b.c.seq).where(b.c.name == name).order_by(b.c.seq.desc()).limit(keep)
        self._write(
            upsert(self.dialect, BASELINES, ("name",), ("run_id", "saved_at")).values(
                name=name, run_id=run_id, saved_at=saved_at
            ),
            delete(b).where(b.c.name == name, b.c.run_id == run_id),
            insert_ignore(self.dialect, b).values(
                name=name, run_id=run_id, saved_at=saved_at, sweep_run=sweep_run
            ),
            delete(b).where(b.c.name == name, b.c.seq.not_in(newest)),
        )
        return self.baseline_runs(name)

    # -- reading ---------------------------------------------------------------
    def baseline_runs(self, name: str) -> list[str]:
        """The runs of baseline ``name``, oldest first (empty when there is no such baseline)."""
        rows = self._all(
            select(BASELINE_RUNS.c.run_id)
            .where(BASELINE_RUNS.c.name == name)
            .order_by(BASELINE_RUNS.c.seq)
        )
        return [str(row[0]) for row in rows]

    def baseline_entries(self, name: str) -> list[list[str]]:
        """Baseline ``name``'s history, oldest first, each entry as the runs it stands for
        (a sweep run's entry: its runs started by then)."""
        b, r = BASELINE_RUNS, RUNS
        with self.reading() as db:
            entries = db.execute(
                select(b.c.run_id, b.c.sweep_run, b.c.saved_at)
                .where(b.c.name == name)
                .order_by(b.c.seq)
            ).all()
            expanded = []
            for run_id, sweep_run, saved_at in entries:
                runs = (
                    []
                    if sweep_run is None
                    else [
                        str(member)
                        for member in db.execute(
                            select(r.c.run_id)
                            .where(r.c.sweep_run == sweep_run, r.c.started_at <= saved_at)
                            .order_by(r.c.started_at, r.c.run_id)
                        )
                        .scalars()
                        .all()
                    ]
                )
                expanded.append(runs if str(run_id) in runs else [*runs, str(run_id)])
        return expanded

    def baseline_measurements(self, name: str) -> list[list[dict[str, Any]]]:
        """Baseline ``name``'s history, oldest first, each entry's runs read as one run's."""
        return [
            latest_per_setting(self.measurements(run_id) for run_id in runs)
            for runs in self.baseline_entries(name)
        ]

    def test_outcomes(self, run_ids: Iterable[str]) -> list[tuple[str, str, str]]:
        """(run, test, outcome) of every finished test of ``run_ids``."""
        t = TEST_OUTCOMES
        rows = self._all(
            select(t.c.run_id, t.c.test_id, t.c.outcome)
            .where(t.c.run_id.in_(list(run_ids)))
            .order_by(t.c.run_id, t.c.test_id)
        )
        return [(str(run), str(test), str(outcome)) for run, test, outcome in rows]

    def baselines(self) -> dict[str, str]:
        rows = self._all(select(BASELINES.c.name, BASELINES.c.run_id).order_by(BASELINES.c.name))
        return {str(name): str(run_id) for name, run_id in rows}

    def stored_items(
        self, serving_key: str, benchmark: str, keys: Iterable[tuple[str, str]]
    ) -> dict[str, ItemRecord]:
        """Stored records for ``(item_id, prompt_hash)`` pairs under one serving key."""
        wanted = dict(keys)
        rows = self._all(
            select(ITEMS.c.item_id, ITEMS.c.prompt_hash, ITEMS.c.record_json).where(
                ITEMS.c.serving_key == serving_key, ITEMS.c.benchmark == benchmark
            )
        )
        return {
            item_id: self._item(record_json, f"item {item_id}")
            for item_id, prompt_hash, record_json in rows
            if wanted.get(item_id) == prompt_hash
        }

    def run_items(self, run_id: str, model: str, benchmark: str) -> list[ItemRecord]:
        """The items a run used for one model and benchmark (sent or reused)."""
        rows = self._all(_run_items(run_id, model, benchmark).order_by(RUN_ITEMS.c.item_id))
        return [self._item(row.record_json, f"run {run_id}: item {row.item_id}") for row in rows]

    def run_item_ids(self, run_id: str, model: str, benchmark: str) -> list[str]:
        """The ids of the items a run has used so far (cheap: no records are read)."""
        r = RUN_ITEMS
        query = select(r.c.item_id).where(
            r.c.run_id == run_id, r.c.model == model, r.c.benchmark == benchmark
        )
        return [str(item_id) for (item_id,) in self._all(query)]

    def endpoint(self, run_id: str, model: str) -> dict[str, Any] | None:
        value = self._scalar(
            select(ENDPOINTS.c.provenance_json).where(
                ENDPOINTS.c.run_id == run_id, ENDPOINTS.c.model == model
            )
        )
        return None if value is None else self._row(value, f"run {run_id}: endpoint {model}")

    def measurement_of(self, run_id: str, model: str, benchmark: str) -> dict[str, Any] | None:
        """The latest measurement of a model on a benchmark in a run, if recorded."""
        found = self._measurements(model, benchmark, run_id, newest_first=True, limit=1)
        return found[0][1] if found else None

    def history(self, model: str, benchmark: str) -> list[dict[str, Any]]:
        """Every measurement of a model on a benchmark across runs, newest first."""
        return [
            {**measurement, "run_id": run_id}
            for run_id, measurement in self._measurements(model, benchmark, newest_first=True)
        ]

    def _measurements(
        self,
        model: str | None = None,
        benchmark: str | None = None,
        run_id: str | None = None,
        *,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[tuple[Any, dict[str, Any]]]:
        """(run id, measurement) of a model on a benchmark, of a run, or of both (each given
        one narrows), in recording order."""
        m = MEASUREMENTS
        wanted = ((m.c.model, model), (m.c.benchmark, benchmark), (m.c.run_id, run_id))
        query = (
            select(m.c.run_id, m.c.measurement_json)
            .where(*(column == value for column, value in wanted if value is not None))
            .order_by(m.c.id.desc() if newest_first else m.c.id)
            .limit(limit)
        )
        with self.reading() as db:
            return [(r, self._measurement(db, str(r), j)) for r, j in db.execute(query).all()]

    def latest_run_with(
        self,
        model: str,
        benchmark: str,
        *,
        exclude: str = "",
        item_ids: Iterable[str] | None = None,
        among: Iterable[str] | None = None,
    ) -> str | None:
        """The most recent run (not ``exclude``; one of ``among``) that recorded model/benchmark,
        preferring one whose item ids are exactly ``item_ids``."""
        m = MEASUREMENTS
        last = func.max(m.c.id)
        query = select(m.c.run_id).where(
            m.c.model == model, m.c.benchmark == benchmark, m.c.run_id != exclude
        )
        if among is not None:
            query = query.where(m.c.run_id.in_(list(among)))
        runs = [
            str(run_id) for (run_id,) in self._all(query.group_by(m.c.run_id).order_by(last.desc()))
        ]
        wanted = None if item_ids is None else set(item_ids)
        return next(
            (
                r
                for r in runs
                if wanted is not None and set(self.run_item_ids(r, model, benchmark)) == wanted
            ),
            runs[0] if runs else None,
        )

    def sweep_run_measurements(self, name: str, *, last: str | None = None) -> list[dict[str, Any]]:
        """Sweep run ``name``'s measurements as one run's (:func:`latest_per_setting`);
        run ``last`` (the judging run) counts as the latest."""
        order = [m.run_id for m in self.sweep_run_members(name) if m.run_id != last]
        if last is not None:
            order.append(last)
        return latest_per_setting(self.measurements(run_id) for run_id in order)

    def sweep_run_report(self, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(run dict, measurements) of a report of sweep run ``name``, under the newest
        run's provenance."""
        members = self.sweep_run_members(name)
        if not members:
            raise DataError(
                f"{self.location}: no runs of sweep run {name!r}; `modelsweep runs` "
                "lists the runs with their sweep runs"
            )
        return (
            sweep_run_heading(name, members, members[-1].run),
            self.sweep_run_measurements(name),
        )

    def measurements(
        self, run_id: str, model: str | None = None, benchmark: str | None = None
    ) -> list[dict[str, Any]]:
        """Every measurement of a run (of ``model`` on ``benchmark`` where given), in
        recording order."""
        return [measurement for _, measurement in self._measurements(model, benchmark, run_id)]

    def runs(self, sweep_run: str | None = None) -> list[dict[str, Any]]:
        """Every run (or those of ``sweep_run``) in start order, with its count of
        measurements, sweep run and ``status`` (:func:`_run_status`)."""
        m = MEASUREMENTS
        count = (
            select(func.count()).select_from(m).where(m.c.run_id == RUNS.c.run_id).scalar_subquery()
        )
        query = select(
            RUNS.c.run_id,
            RUNS.c.started_at,
            RUNS.c.sweep_name,
            count,
            RUNS.c.sweep_run,
            RUNS.c.finished_at,
            RUNS.c.exit_status,
        )
        if sweep_run is not None:
            query = query.where(RUNS.c.sweep_run == sweep_run)
        rows = self._all(query.order_by(RUNS.c.started_at, RUNS.c.run_id))
        return [
            {
                "run_id": r[0],
                "started_at": r[1],
                "sweep_name": r[2],
                "measurements": r[3],
                "sweep_run": r[4],
                "status": _run_status(r[5], r[6]),
            }
            for r in rows
        ]

    def run(self, run_id: str) -> dict[str, Any]:
        value = self._scalar(select(RUNS.c.run_json).where(RUNS.c.run_id == run_id))
        if value is None:
            raise DataError(f"{self.path}: no run {run_id!r}; `modelsweep runs` lists them")
        return self._row(value, f"run {run_id}: run")

    def _row(self, text: Any, where: str) -> dict[str, Any]:
        """A JSON column's object, read where it enters; anything else is a DataError naming
        the store, the run, the row and the fix."""
        try:
            value = json.loads(text)
        except (TypeError, ValueError) as error:
            raise DataError(
                f"{self.location}: {where}: not JSON ({error}); {STORE_ROW_FIX}"
            ) from None
        if not isinstance(value, dict):
            raise DataError(
                f"{self.location}: {where}: expected an object, got "
                f"{type(value).__name__}; {STORE_ROW_FIX}"
            )
        return value

    def _measurement(self, db: Connection, run_id: str, text: Any) -> dict[str, Any]:
        """A measurement row with its items' answers, checked as a results file's is."""
        measurement = _with_answers(db, run_id, self._row(text, f"run {run_id}: measurement"))
        measurements_of([measurement], where=f"{self.location}: run {run_id}", fix=STORE_ROW_FIX)
        return measurement

    def _item(self, text: Any, where: str) -> ItemRecord:
        """An item row as its record (checked as a results file's item is)."""
        data = self._row(text, where)
        try:
            check_fields(data, ItemRecord, ItemRecord.from_dict)
        except RecordError as error:
            raise DataError(f"{self.location}: {where}: {error}; {STORE_ROW_FIX}") from None
        return ItemRecord.from_dict(data)


def _run_items(run_id: str, model: Any, benchmark: Any) -> Select[Any]:
    """The query of a run's items for one model and benchmark: item id and record JSON."""
    r, i = RUN_ITEMS, ITEMS
    on = (
        (i.c.serving_key == r.c.serving_key)
        & (i.c.benchmark == r.c.benchmark)
        & (i.c.item_id == r.c.item_id)
        & (i.c.prompt_hash == r.c.prompt_hash)
    )
    return (
        select(r.c.item_id, i.c.record_json)
        .select_from(r.join(i, on))
        .where(r.c.run_id == run_id, r.c.model == model, r.c.benchmark == benchmark)
    )


def _answer_key(completion: Any) -> str:
    """What identifies an answer (a completion's JSON) without holding it."""
    blob = json.dumps(completion, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _answers_apart(measurement: dict[str, Any]) -> dict[str, Any]:
    """A measurement as its row keeps it: each item's completion (in the ``items`` table
    already) becomes its key ``answer``; :func:`_with_answers` puts them back."""
    items = measurement.get("items")
    if not items:
        return measurement
    return {
        **measurement,
        "items": [
            _swap(item, "completion", "answer", _answer_key(item["completion"]))
            if isinstance(item, dict) and isinstance(item.get("completion"), dict)
            else item
            for item in items
        ],
    }


def _with_answers(db: Connection, run_id: str, measurement: dict[str, Any]) -> dict[str, Any]:
    """A stored measurement with its items' answers back from the ``items`` table (an answer
    sent again since, under the same key, is not this item's: its completion stays None)."""
    items = measurement.get("items")
    if not items or not any(isinstance(i, dict) and "answer" in i for i in items):
        return measurement
    rows = db.execute(_run_items(run_id, measurement.get("model"), measurement.get("benchmark")))
    completions = [json.loads(record_json).get("completion") for _, record_json in rows]
    answers = {_answer_key(completion): completion for completion in completions}
    return {
        **measurement,
        "items": [
            _swap(item, "answer", "completion", answers.get(str(item["answer"])))
            if isinstance(item, dict) and "answer" in item
            else item
            for item in items
        ],
    }


def _swap(item: dict[str, Any], old: str, new: str, value: Any) -> dict[str, Any]:
    """``item`` with key ``old`` dropped and ``new`` (last) set to ``value``."""
    return {**{k: v for k, v in item.items() if k != old}, new: value}


def _run_status(finished_at: str | None, exit_status: int | None) -> str:
    """``interrupted`` (killed, or still running), ``ended (exit status N)``, ``ended`` (no
    status kept), or ``""`` (recorded before runs were marked when they ended)."""
    if finished_at is None:
        return "interrupted"
    if finished_at == "":
        return ""
    return "ended" if exit_status is None else f"ended (exit status {exit_status})"


def _json(value: Any) -> str:
    """A record's JSON as a row keeps it: no secret in it, strict (NaN and infinities null)."""
    return strict_json(redacted(value))


def _schema_version(conn: Connection, where: StoreLocation) -> int | None:
    """The store's schema version; None when it has no ``meta`` table (a new store)."""
    if not inspect(conn).has_table("meta"):
        return None
    value = conn.execute(select(META.c.value).where(META.c.key == "schema")).scalar()
    if value is None:
        raise DataError(
            f"{where}: a database with a meta table that is not a pytest-modelsweep "
            f"store's (no schema key); {_FIX_OTHER_DATABASE}"
        )
    if not str(value).isdigit():
        raise DataError(
            f"{where}: a store with an unreadable schema version {value!r}; {_FIX_OTHER_DATABASE}"
        )
    return int(value)
