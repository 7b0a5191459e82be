"""The store is checked before it is opened: a bad ``--store`` is one line, and foreign files stay as they were."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_modelsweep.core.errors import DataError
from pytest_modelsweep.store.database import SCHEMA_VERSION, Store
from pytest_modelsweep.store.sqlite import check_store_file

RunPytest = Callable[..., pytest.RunResult]  # the run_both_ways fixture (conftest.py)

pytest_plugins = ("pytester",)

FIX_NEW_FILE = "pass --store with a new file name, or move it away"


def folder(tmp: Path) -> Path:
    path = tmp / "adir"
    path.mkdir()
    return path


def under_a_file(tmp: Path) -> Path:
    (tmp / "afile").write_text("x")
    return tmp / "afile" / "store.sqlite"


def foreign_database(path: Path) -> Path:
    """Someone else's SQLite database: one table with a row, default (rollback) journal."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE people (name TEXT)")
    db.execute("INSERT INTO people VALUES ('ada')")
    db.commit()
    db.close()
    return path


def newer_store(path: Path) -> Path:
    """A store written by a later pytest-modelsweep (a higher schema version)."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    return path


def read_only_file(path: Path) -> Path:
    """A file whose mode has no write bit (refused also for root)."""
    foreign_database(path)
    path.chmod(0o444)
    return path


def random_bytes(path: Path) -> Path:
    path.write_bytes(os.urandom(4096))
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_untouched(path: Path, before: str) -> None:
    """Same bytes, and no journal files made beside it."""
    assert digest(path) == before
    for suffix in ("-wal", "-shm", "-journal"):
        assert not Path(f"{path}{suffix}").exists(), suffix


# Each bad kind of --store: how to make it, and the line that must come back.
BAD_STORES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "folder": (
        folder,
        ("{path}: is a folder, not a store file; pass --store with a file name "
        "(e.g. {path}/store.sqlite)"),
    ),
    "parent-is-a-file": (
        under_a_file,
        ("{path}: cannot create its folder {tmp}/afile ({tmp}/afile is a file, not a folder); "
        "pass --store with a path in a folder you can write"),
    ),
    "read-only": (
        lambda tmp: read_only_file(tmp / "ro.sqlite"),
        ("{path}: the file is read-only (mode -r--r--r--); make it writable (chmod u+w) or "
        "pass --store with a new file name"),
    ),
    "not-sqlite": (
        lambda tmp: random_bytes(tmp / "random.bin"),
        "{path}: not a SQLite database (file is not a database); " + FIX_NEW_FILE,
    ),
    "foreign-sqlite": (
        lambda tmp: foreign_database(tmp / "theirs.db"),
        "{path}: a SQLite database that is not a pytest-modelsweep store (tables: people; "
        "no meta table with a schema key); " + FIX_NEW_FILE,
    ),
    "newer-schema": (
        lambda tmp: newer_store(tmp / "newer.sqlite"),
        "{path}: a store of schema version " + str(SCHEMA_VERSION + 1) + ", newer than this "
        "pytest-modelsweep's (" + str(SCHEMA_VERSION) + "); upgrade pytest-modelsweep or pass "
        "--store with a new file name",
    ),
}


def expected_line(kind: str, tmp: Path, path: Path) -> str:
    return BAD_STORES[kind][1].format(path=path, tmp=tmp)


@pytest.mark.parametrize("kind", list(BAD_STORES))
def test_bad_store_is_refused_with_the_reason_and_the_fix(kind: str, tmp_path: Path) -> None:
    path = BAD_STORES[kind][0](tmp_path)
    before = digest(path) if path.is_file() else None
    with pytest.raises(DataError) as info:
        Store(path)
    assert str(info.value) == expected_line(kind, tmp_path, path)
    if before is not None:
        assert_untouched(path, before)


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux sysfs")
def test_a_folder_that_refuses_new_files_gives_the_os_reason() -> None:
    """sysfs refuses to create a regular file, also for root: the OS's words come back."""
    path = Path("/sys/modelsweep-store.sqlite")
    with pytest.raises(DataError) as info:
        Store(path)
    assert str(info.value).startswith(f"{path}: cannot create the store file (")
    assert str(info.value).endswith("); pass --store with a path in a folder you can write")


@pytest.mark.parametrize("kind", ["missing", "empty", "sqlite-without-tables"])
def test_new_files_become_stores(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "sub" / "store.sqlite"
    if kind != "missing":
        path.parent.mkdir()
        path.touch()
    if kind == "sqlite-without-tables":
        sqlite3.connect(path).execute("PRAGMA user_version = 7").connection.close()
        assert path.read_bytes().startswith(b"SQLite format 3\x00")
    assert check_store_file(path) == "new"
    Store(path).close()
    assert check_store_file(path) == "store"


def test_own_store_reopens_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    store = Store(path)
    store.add_run("r1", "embedded", {"started_at": "2025-01-01"})
    store.close()
    again = Store(path)
    assert [r["run_id"] for r in again.runs()] == ["r1"]
    again.close()


def test_locked_is_said_only_for_a_lock(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    Store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(DataError, match=r"the store stayed locked \(database is locked\); "
                                            r"is another run holding it\?"):
            Store(path, busy_timeout_s=0.3)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize("kind", list(BAD_STORES))
def test_bad_store_option_is_one_usage_error_line_before_any_test(
    kind: str, pytester: pytest.Pytester, run_both_ways: RunPytest,
    this_checkout_in_subprocesses: None,
) -> None:
    pytester.makepyfile(
        "def test_x(model_name):\n    raise AssertionError('no test may run')\n"
    )
    tmp = pytester.path / "places"
    tmp.mkdir()
    path = BAD_STORES[kind][0](tmp)
    before = digest(path) if path.is_file() else None
    result = run_both_ways("--store", str(path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {expected_line(kind, tmp, path)}" in result.stderr.lines
    output = "\n".join(result.outlines + result.errlines)
    assert "INTERNALERROR" not in output
    assert "Traceback" not in output
    assert "no test may run" not in output
    if before is not None:
        assert_untouched(path, before)


@pytest.mark.parametrize("command", [["runs"], ["report", "some-run", "--md", "out.md"],
                                     ["compare", "a", "b"]])
@pytest.mark.parametrize("kind", ["folder", "not-sqlite", "foreign-sqlite"])
def test_cli_prints_the_same_line(
    kind: str, command: list[str], tmp_path: Path, this_checkout_in_subprocesses: None
) -> None:
    path = BAD_STORES[kind][0](tmp_path)
    before = digest(path) if path.is_file() else None
    result = subprocess.run(
        [sys.executable, "-m", "pytest_modelsweep.cli", *command, "--store", str(path)],
        capture_output=True, text=True, cwd=tmp_path, check=False,
    )
    assert result.returncode != 0
    assert result.stderr.splitlines() == [
        f"modelsweep: error: {expected_line(kind, tmp_path, path)}"
    ]
    if before is not None:
        assert_untouched(path, before)


def test_read_only_mode_is_refused_by_its_bits(tmp_path: Path) -> None:
    """The mode bits decide, so the refusal holds for root too (tests here may run as root)."""
    path = read_only_file(tmp_path / "ro.sqlite")
    assert not path.stat().st_mode & stat.S_IWUSR
    with pytest.raises(DataError, match="the file is read-only"):
        check_store_file(path)
    path.chmod(0o644)
    with pytest.raises(DataError, match="not a pytest-modelsweep store"):
        check_store_file(path)
