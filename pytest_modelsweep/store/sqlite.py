"""The SQLite file of a store: checked before anything is written to it, then opened for sharing.

WAL journaling, a busy timeout and write transactions that take the write lock first
(``BEGIN IMMEDIATE``) let xdist workers write concurrently without losing rows.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection

from ..core.errors import DataError
from .schema import SCHEMA_VERSION, newer_schema_message

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""

WRITE_OPTION = "modelsweep_write"
"""An execution option: the transaction will write, so it takes SQLite's write lock first."""

FIX_NEW_FILE = "pass --store with a new file name, or move it away"
_FIX_READ_ONLY = "make it writable (chmod u+w) or pass --store with a new file name"
_FIX_WRITABLE_PLACE = "pass --store with a path in a folder you can write"


def sqlite_engine(path: Path, busy_timeout_s: float, *, read_only: bool = False) -> Engine:
    """An engine on ``path`` in WAL mode with a busy timeout; a transaction with the
    :data:`WRITE_OPTION` begins ``IMMEDIATE`` so two writers queue on the lock.
    ``read_only``: SQLite's ``mode=ro``, the file as it is (a store someone made read-only)."""
    engine = (
        create_engine(
            "sqlite+pysqlite://",
            creator=lambda: _read_only(path, busy_timeout_s, check_same_thread=False),
        )
        if read_only
        else create_engine(
            f"sqlite+pysqlite:///{path}",
            connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
        )
    )

    @event.listens_for(engine, "connect")
    def configure(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        if not read_only:
            dbapi_connection.execute("PRAGMA journal_mode=WAL")
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    @event.listens_for(engine, "begin")
    def begin(conn: Connection) -> None:
        writes = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")

    return engine


def is_lock_error(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the database for now."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        "locked" in str(exc)
        if code is None
        else (int(code) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    )


def check_store_file(path: Path, *, busy_timeout_s: float = 60.0, read_only: bool = False) -> str:
    """Classify ``path`` before anything is written to it: ``"new"`` (no file, an empty file,
    SQLite without tables) or ``"store"``; anything else is a DataError with the fix, a lock
    held elsewhere the ``sqlite3`` error (the caller retries)."""
    if path.is_dir():
        raise DataError(
            f"{path}: is a folder, not a store file; pass --store with a file name "
            f"(e.g. {path / 'store.sqlite'})"
        )
    if not path.exists() and not path.is_symlink():
        _create_empty(path)
        return "new"
    if not path.is_file():
        raise DataError(f"{path}: not a regular file; {FIX_NEW_FILE}")
    try:
        with path.open("rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror}); {FIX_NEW_FILE}") from None
    if not read_only:
        _check_writable(path)
    if not header:
        return "new"
    if header != SQLITE_HEADER:
        raise DataError(
            f"{path}: not a SQLite database ({_sqlite_reason(path, busy_timeout_s)}); "
            f"{FIX_NEW_FILE}"
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
    """The file and its folder (for the journal) must be writable; a file without a write
    bit is refused also for root (someone marked it read-only)."""
    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError as exc:
        raise DataError(f"{path}: cannot write it ({exc.strerror}); {_FIX_READ_ONLY}") from None
    mode = path.stat().st_mode
    if not mode & stat.S_IWUSR:
        raise DataError(
            f"{path}: the file is read-only (mode {stat.filemode(mode)}); {_FIX_READ_ONLY}"
        )
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise DataError(
            f"{path}: its folder {path.parent} is not writable (permission denied; "
            f"SQLite writes its journal beside the store); {_FIX_WRITABLE_PLACE}"
        )


def _read_only(
    path: Path, busy_timeout_s: float, *, check_same_thread: bool = True
) -> sqlite3.Connection:
    """A connection that cannot write to ``path`` (SQLite's ``mode=ro``)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    return sqlite3.connect(
        uri,
        uri=True,
        timeout=busy_timeout_s,
        isolation_level=None,
        check_same_thread=check_same_thread,
    )


def _sqlite_reason(path: Path, busy_timeout_s: float) -> str:
    """What SQLite itself says about a file without its header (read-only)."""
    try:
        with closing(_read_only(path, busy_timeout_s)) as db:
            db.execute("SELECT name FROM sqlite_master").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    return "file is not a database"


def _classify_database(path: Path, busy_timeout_s: float) -> str:
    """A SQLite file: ``"new"`` (no tables), ``"store"`` (ours), or a DataError."""
    with closing(_read_only(path, busy_timeout_s)) as db:
        try:
            tables = sorted(
                str(row[0])
                for row in db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                ).fetchall()
            )
        except sqlite3.Error as exc:
            if is_lock_error(exc):
                raise
            raise DataError(f"{path}: cannot read it as SQLite ({exc}); {FIX_NEW_FILE}") from None
        if not tables:
            return "new"
        row = None
        if "meta" in tables:
            try:
                row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            except sqlite3.Error as exc:
                if is_lock_error(exc):
                    raise
    if row is None:
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        raise DataError(
            f"{path}: a SQLite database that is not a pytest-modelsweep store "
            f"(tables: {shown}; no meta table with a schema key); {FIX_NEW_FILE}"
        )
    schema = str(row[0])
    if not schema.isdigit():
        raise DataError(
            f"{path}: a store with an unreadable schema version {schema!r}; {FIX_NEW_FILE}"
        )
    if int(schema) > SCHEMA_VERSION:
        raise DataError(
            newer_schema_message(path, int(schema), "pass --store with a new file name")
        )
    return "store"
