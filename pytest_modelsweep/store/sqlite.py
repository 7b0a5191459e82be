"""The store: runs, measurements and per-item records in SQLite, written as they complete.

One file (``.modelsweep/store.sqlite`` by default) shared by every process of a
run: WAL journaling and a busy timeout let xdist workers write their items
concurrently without losing rows, and each item is committed the moment it is
scored, so a ``kill -9`` loses nothing that had completed.

Items are keyed by what their answer depends on: the model's serving key
(server, version, image, serving flags, model file or revision — see
:func:`~pytest_modelsweep.serving.endpoint.model_serving_key`), the benchmark,
the item id and the prompt hash. A re-run with the same key reuses a stored
item without sending its request; a change of any of them misses exactly the
items it touches. ``run_items`` links each run to the items it used (sent or
reused), which is what verdicts pair.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.errors import DataError
from ..core.records import ItemRecord

SCHEMA_VERSION = 1
#: How many runs a baseline keeps: ``--save-baseline NAME`` again adds one, the oldest goes.
BASELINE_HISTORY = 5

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""

_FIX_NEW_FILE = "pass --store with a new file name, or move it away"
_FIX_READ_ONLY = "make it writable (chmod u+w) or pass --store with a new file name"
_FIX_WRITABLE_PLACE = "pass --store with a path in a folder you can write"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    sweep_name TEXT NOT NULL,
    run_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    model TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    test_id TEXT NOT NULL,
    value REAL NOT NULL,
    unit TEXT NOT NULL,
    n INTEGER NOT NULL,
    outcome TEXT,
    measurement_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS measurements_run ON measurements (run_id, model, benchmark);
CREATE TABLE IF NOT EXISTS items (
    serving_key TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    item_id TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    record_json TEXT NOT NULL,
    first_run_id TEXT NOT NULL,
    PRIMARY KEY (serving_key, benchmark, item_id, prompt_hash)
);
CREATE TABLE IF NOT EXISTS run_items (
    run_id TEXT NOT NULL,
    model TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    item_id TEXT NOT NULL,
    serving_key TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    reused INTEGER NOT NULL,
    PRIMARY KEY (run_id, model, benchmark, item_id)
);
CREATE TABLE IF NOT EXISTS test_outcomes (
    run_id TEXT NOT NULL,
    test_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    PRIMARY KEY (run_id, test_id)
);
CREATE TABLE IF NOT EXISTS baselines (
    name TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    saved_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS baseline_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    run_id TEXT NOT NULL,
    saved_at TEXT NOT NULL,
    UNIQUE (name, run_id)
);
INSERT OR IGNORE INTO baseline_runs (name, run_id, saved_at)
    SELECT name, run_id, saved_at FROM baselines ORDER BY saved_at, name;
CREATE TABLE IF NOT EXISTS endpoints (
    run_id TEXT NOT NULL,
    model TEXT NOT NULL,
    provenance_json TEXT NOT NULL,
    PRIMARY KEY (run_id, model)
);
"""


class Store:
    """A SQLite store; safe to share between threads of a process and between processes."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 60.0) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = self._open(path, busy_timeout_s)

    def _open(self, path: Path, busy_timeout_s: float) -> sqlite3.Connection:
        """Check the file (:func:`check_store_file`), then connect, switch to WAL and create the
        schema; retry while another process holds a lock."""
        deadline = time.monotonic() + busy_timeout_s
        while True:
            try:
                check_store_file(path, busy_timeout_s=busy_timeout_s)
                db = sqlite3.connect(
                    path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
                )
                db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("BEGIN IMMEDIATE")
                try:
                    for statement in _SCHEMA.strip().split(";"):
                        if statement.strip():
                            db.execute(statement)
                    db.execute(
                        "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)",
                        (str(SCHEMA_VERSION),),
                    )
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                return db
            except sqlite3.Error as exc:
                if not is_lock_error(exc):
                    raise DataError(
                        f"{path}: cannot use it as the store ({exc}); {_FIX_NEW_FILE}"
                    ) from None
                # A new store opened by the controller and xdist workers at once: switching
                # to WAL can report "locked" without waiting; the other process finishes soon.
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise DataError(f"{path}: the store stayed locked ({exc}); is another run "
                                "holding it?") from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writing ---------------------------------------------------------------
    def add_run(self, run_id: str, sweep_name: str, run: dict[str, Any]) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO runs (run_id, started_at, sweep_name, run_json) "
                "VALUES (?, ?, ?, ?)",
                (run_id, str(run.get("started_at", "")), sweep_name, json.dumps(run)),
            )

    def add_endpoint(self, run_id: str, model: str, provenance: dict[str, Any]) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO endpoints (run_id, model, provenance_json) VALUES (?, ?, ?)",
                (run_id, model, json.dumps(provenance)),
            )

    def add_measurement(self, run_id: str, measurement: dict[str, Any]) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO measurements (run_id, model, benchmark, test_id, value, unit, n, "
                "outcome, measurement_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id, measurement["model"], measurement["benchmark"],
                    measurement.get("test_id", ""), float(measurement["value"]),
                    measurement["unit"], int(measurement["n"]), measurement.get("outcome"),
                    json.dumps(measurement),
                ),
            )

    def add_item(
        self, run_id: str, model: str, benchmark: str, serving_key: str, record: ItemRecord,
        *, reused: bool = False,
    ) -> None:
        """Commit one scored item (and its link to this run) immediately."""
        with self._transaction() as db:
            if not reused:
                db.execute(
                    "INSERT OR REPLACE INTO items (serving_key, benchmark, item_id, prompt_hash, "
                    "model, record_json, first_run_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (serving_key, benchmark, record.item_id, record.prompt_hash, model,
                     json.dumps(record.to_dict()), run_id),
                )
            db.execute(
                "INSERT OR REPLACE INTO run_items (run_id, model, benchmark, item_id, "
                "serving_key, prompt_hash, reused) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, model, benchmark, record.item_id, serving_key, record.prompt_hash,
                 int(reused)),
            )

    def update_item(self, serving_key: str, benchmark: str, record: ItemRecord) -> None:
        """Replace a stored item's record (its answer scored again by a changed scorer)."""
        with self._transaction() as db:
            db.execute(
                "UPDATE items SET record_json = ? WHERE serving_key = ? AND benchmark = ? "
                "AND item_id = ? AND prompt_hash = ?",
                (json.dumps(record.to_dict()), serving_key, benchmark, record.item_id, record.prompt_hash),
            )

    def add_outcome(self, run_id: str, test_id: str, outcome: str) -> None:
        """A finished test of the run (so that others stop waiting for its results)."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO test_outcomes (run_id, test_id, outcome) VALUES (?, ?, ?)",
                (run_id, test_id, outcome),
            )

    def outcome_of(self, run_id: str, test_id: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT outcome FROM test_outcomes WHERE run_id = ? AND test_id = ?",
                (run_id, test_id),
            ).fetchone()
        return str(row[0]) if row else None

    def save_baseline(self, name: str, run_id: str, saved_at: str, *,
                      keep: int = BASELINE_HISTORY) -> list[str]:
        """Add a run to baseline ``name``'s history (keeping the newest ``keep`` runs).

        ``baselines`` keeps pointing at the newest run (what a store reader of before
        the history reads); ``baseline_runs`` holds the history. Returns the history,
        oldest first.
        """
        if keep < 1:
            raise ValueError(f"a baseline keeps at least 1 run, got {keep!r}")
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO baselines (name, run_id, saved_at) VALUES (?, ?, ?)",
                (name, run_id, saved_at),
            )
            db.execute("DELETE FROM baseline_runs WHERE name = ? AND run_id = ?", (name, run_id))
            db.execute("INSERT INTO baseline_runs (name, run_id, saved_at) VALUES (?, ?, ?)",
                       (name, run_id, saved_at))
            db.execute(
                "DELETE FROM baseline_runs WHERE name = ? AND seq NOT IN (SELECT seq FROM "
                "baseline_runs WHERE name = ? ORDER BY seq DESC LIMIT ?)", (name, name, keep))
        return self.baseline_runs(name)

    # -- reading ---------------------------------------------------------------
    def baseline_run(self, name: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT run_id FROM baselines WHERE name = ?", (name,)
            ).fetchone()
        return str(row[0]) if row else None

    def baseline_runs(self, name: str) -> list[str]:
        """The runs of baseline ``name``, oldest first (empty when there is no such baseline).

        A store written before baselines had a history gives its one run (the table is
        filled from ``baselines`` whenever a store is opened)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id FROM baseline_runs WHERE name = ? ORDER BY seq", (name,)
            ).fetchall()
        return [str(row[0]) for row in rows]

    def baselines(self) -> dict[str, str]:
        with self._lock:
            rows = self._db.execute("SELECT name, run_id FROM baselines ORDER BY name").fetchall()
        return {str(name): str(run_id) for name, run_id in rows}

    def stored_items(
        self, serving_key: str, benchmark: str, keys: Iterable[tuple[str, str]]
    ) -> dict[str, ItemRecord]:
        """Stored records for ``(item_id, prompt_hash)`` pairs under one serving key."""
        wanted = dict(keys)
        found: dict[str, ItemRecord] = {}
        with self._lock:
            rows = self._db.execute(
                "SELECT item_id, prompt_hash, record_json FROM items "
                "WHERE serving_key = ? AND benchmark = ?",
                (serving_key, benchmark),
            ).fetchall()
        for item_id, prompt_hash, record_json in rows:
            if wanted.get(item_id) == prompt_hash:
                found[item_id] = ItemRecord.from_dict(json.loads(record_json))
        return found

    def run_items(self, run_id: str, model: str, benchmark: str) -> list[ItemRecord]:
        """The items a run used for one model and benchmark (sent or reused)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT i.record_json FROM run_items r JOIN items i ON "
                "i.serving_key = r.serving_key AND i.benchmark = r.benchmark AND "
                "i.item_id = r.item_id AND i.prompt_hash = r.prompt_hash "
                "WHERE r.run_id = ? AND r.model = ? AND r.benchmark = ? ORDER BY r.item_id",
                (run_id, model, benchmark),
            ).fetchall()
        return [ItemRecord.from_dict(json.loads(row[0])) for row in rows]

    def endpoint(self, run_id: str, model: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT provenance_json FROM endpoints WHERE run_id = ? AND model = ?",
                (run_id, model),
            ).fetchone()
        return json.loads(row[0]) if row else None

    def measurement_of(self, run_id: str, model: str, benchmark: str) -> dict[str, Any] | None:
        """The latest measurement of a model on a benchmark in a run, if recorded."""
        with self._lock:
            row = self._db.execute(
                "SELECT measurement_json FROM measurements WHERE run_id = ? AND model = ? "
                "AND benchmark = ? ORDER BY id DESC LIMIT 1",
                (run_id, model, benchmark),
            ).fetchone()
        return json.loads(row[0]) if row else None

    def measurements_of(self, run_id: str, model: str, benchmark: str) -> list[dict[str, Any]]:
        """Every measurement of a model on a benchmark in a run, in recording order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT measurement_json FROM measurements WHERE run_id = ? AND model = ? "
                "AND benchmark = ? ORDER BY id",
                (run_id, model, benchmark),
            ).fetchall()
        return [json.loads(row[0]) for row in rows]

    def history(self, model: str, benchmark: str) -> list[dict[str, Any]]:
        """Every measurement of a model on a benchmark across runs, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, measurement_json FROM measurements WHERE model = ? AND "
                "benchmark = ? ORDER BY id DESC",
                (model, benchmark),
            ).fetchall()
        return [{**json.loads(m), "run_id": run_id} for run_id, m in rows]

    def latest_run_with(
        self, model: str, benchmark: str, *, exclude: str = "",
        item_ids: Iterable[str] | None = None,
    ) -> str | None:
        """The most recent run (other than ``exclude``) that recorded model/benchmark items,
        preferring one whose item ids are exactly ``item_ids`` when given."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT m.run_id, MAX(m.id) FROM measurements m WHERE m.model = ? "
                "AND m.benchmark = ? AND m.run_id != ? GROUP BY m.run_id ORDER BY MAX(m.id) DESC",
                (model, benchmark, exclude),
            ).fetchall()
        runs = [str(row[0]) for row in rows]
        if item_ids is not None:
            wanted = set(item_ids)
            for run_id in runs:
                with self._lock:
                    ids = {r[0] for r in self._db.execute(
                        "SELECT item_id FROM run_items WHERE run_id = ? AND model = ? "
                        "AND benchmark = ?", (run_id, model, benchmark)).fetchall()}
                if ids == wanted:
                    return run_id
        return runs[0] if runs else None

    def measurements(self, run_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT measurement_json FROM measurements WHERE run_id = ? ORDER BY id", (run_id,)
            ).fetchall()
        return [json.loads(row[0]) for row in rows]

    def runs(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT r.run_id, r.started_at, r.sweep_name, "
                "(SELECT COUNT(*) FROM measurements m WHERE m.run_id = r.run_id) "
                "FROM runs r ORDER BY r.started_at, r.run_id"
            ).fetchall()
        return [
            {"run_id": r[0], "started_at": r[1], "sweep_name": r[2], "measurements": r[3]}
            for r in rows
        ]

    def run(self, run_id: str) -> dict[str, Any]:
        with self._lock:
            row = self._db.execute(
                "SELECT run_json FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        if row is None:
            raise DataError(f"{self.path}: no run {run_id!r}; `modelsweep runs` lists them")
        return dict(json.loads(row[0]))


def is_lock_error(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the database for now."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc)


def check_store_file(path: Path, *, busy_timeout_s: float = 60.0) -> str:
    """Classify ``path`` before anything is written to it: ``"new"`` or ``"store"``.

    ``"new"``: no file yet (it is created here, empty, with its folder), an
    empty file, or a SQLite database without tables; ``"store"``: a
    pytest-modelsweep store this version can use. Anything else (a folder, a
    folder that cannot be made, a read-only or unwritable file, a file that is
    not SQLite, someone else's database, a newer schema) raises
    :class:`~pytest_modelsweep.errors.DataError` with the reason and the fix.
    A lock held by another connection raises the ``sqlite3`` error (retried by
    the caller).
    """
    if path.is_dir():
        raise DataError(
            f"{path}: is a folder, not a store file; pass --store with a file name "
            f"(e.g. {path / 'store.sqlite'})"
        )
    if not path.exists() and not path.is_symlink():
        _create_empty(path)
        return "new"
    if not path.is_file():
        raise DataError(f"{path}: not a regular file; {_FIX_NEW_FILE}")
    try:
        with path.open("rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror}); {_FIX_NEW_FILE}") from None
    _check_writable(path)
    if not header:
        return "new"
    if header != SQLITE_HEADER:
        raise DataError(
            f"{path}: not a SQLite database ({_sqlite_reason(path, busy_timeout_s)}); "
            f"{_FIX_NEW_FILE}"
        )
    return _classify_database(path, busy_timeout_s)


def _create_empty(path: Path) -> None:
    """Make the folder and an empty file at ``path``; an OS refusal becomes a DataError."""
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in [parent, *parent.parents] if p.exists()), parent)
        why = f"{blocker} is a file, not a folder" if blocker.is_file() else exc.strerror
        raise DataError(
            f"{path}: cannot create its folder {parent} ({why}); {_FIX_WRITABLE_PLACE}"
        ) from None
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        pass  # another process of this run made it a moment ago
    except OSError as exc:
        raise DataError(
            f"{path}: cannot create the store file ({exc.strerror}); {_FIX_WRITABLE_PLACE}"
        ) from None


def _check_writable(path: Path) -> None:
    """The file and its folder (SQLite writes its journal beside it) must be writable.

    A file whose mode has no write bit is refused also for root, who could write
    it anyway: someone marked it read-only.
    """
    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError as exc:
        raise DataError(
            f"{path}: cannot write it ({exc.strerror}); {_FIX_READ_ONLY}"
        ) from None
    mode = path.stat().st_mode
    if not mode & stat.S_IWUSR:
        raise DataError(
            f"{path}: the file is read-only (mode {stat.filemode(mode)}); {_FIX_READ_ONLY}"
        )
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise DataError(
            f"{path}: its folder {path.parent} is not writable (permission denied; SQLite "
            f"writes its journal beside the store); {_FIX_WRITABLE_PLACE}"
        )


def _read_only(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection that cannot write to ``path`` (SQLite's ``mode=ro``)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None)


def _sqlite_reason(path: Path, busy_timeout_s: float) -> str:
    """What SQLite itself says about a file without its header (read-only)."""
    try:
        db = _read_only(path, busy_timeout_s)
        try:
            db.execute("SELECT name FROM sqlite_master").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        return str(exc)
    return "file is not a database"


def _classify_database(path: Path, busy_timeout_s: float) -> str:
    """A SQLite file: ``"new"`` (no tables), ``"store"`` (ours), or a DataError."""
    db = _read_only(path, busy_timeout_s)
    try:
        try:
            tables = sorted(str(row[0]) for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            ).fetchall())
        except sqlite3.Error as exc:
            if is_lock_error(exc):
                raise
            raise DataError(f"{path}: cannot read it as SQLite ({exc}); {_FIX_NEW_FILE}") from None
        if not tables:
            return "new"
        schema = None
        if "meta" in tables:
            try:
                row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            except sqlite3.Error as exc:
                if is_lock_error(exc):
                    raise
                row = None
            schema = None if row is None else str(row[0])
    finally:
        db.close()
    if schema is None:
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        raise DataError(
            f"{path}: a SQLite database that is not a pytest-modelsweep store (tables: {shown}; "
            f"no meta table with a schema key); {_FIX_NEW_FILE}"
        )
    if not schema.isdigit():
        raise DataError(
            f"{path}: a store with an unreadable schema version {schema!r}; {_FIX_NEW_FILE}"
        )
    if int(schema) > SCHEMA_VERSION:
        raise DataError(
            f"{path}: a store of schema version {schema}, newer than this pytest-modelsweep's "
            f"({SCHEMA_VERSION}); upgrade pytest-modelsweep or pass --store with a new file name"
        )
    return "store"
