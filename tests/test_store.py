"""The store is checked before it is opened: a bad ``--store`` (a file, a database, a URL) is one
line naming the fix, and foreign files stay as they were."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import sqlalchemy
from support.postgres_server import ADMIN, ADMIN_PASSWORD, PostgresServer, free_port
from support.stores import raw_sql

from pytest_modelsweep.core.errors import DataError
from pytest_modelsweep.core.measurements import Measurement
from pytest_modelsweep.core.secrets import redact
from pytest_modelsweep.core.store_location import StoreLocationError, parse_store_location
from pytest_modelsweep.store.database import SCHEMA_VERSION, Store
from pytest_modelsweep.store.sqlite import check_store_file
from pytest_modelsweep.store.upgrade import upgrade_measurement

V2_MEASUREMENTS = json.loads(
    (Path(__file__).parent / "data" / "results_v2_every_kind.json").read_text(encoding="utf-8")
)["measurements"]
V2_GSM8K = next(m for m in V2_MEASUREMENTS if m["benchmark"] == "gsm8k")
V2_RATE = next(m for m in V2_MEASUREMENTS if m["benchmark"] == "rate_capacity")

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
        (
            "{path}: is a folder, not a store file; pass --store with a file name "
            "(e.g. {path}/store.sqlite)"
        ),
    ),
    "parent-is-a-file": (
        under_a_file,
        (
            "{path}: cannot create its folder {tmp}/afile ({tmp}/afile is a file, not a folder); "
            "pass --store with a path in a folder you can write"
        ),
    ),
    "read-only": (
        lambda tmp: read_only_file(tmp / "ro.sqlite"),
        (
            "{path}: the file is read-only (mode -r--r--r--); make it writable (chmod u+w) or "
            "pass --store with a new file name"
        ),
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


def test_own_store_reopens_and_keeps_its_runs(store_at: str) -> None:
    store = Store(store_at)
    store.add_run("r1", "embedded", {"started_at": "2025-01-01"})
    store.add_run("r1", "embedded", {"started_at": "sent again"})  # a run is recorded once
    store.close()
    again = Store(store_at, create=False)
    assert again.runs() == [
        {
            "run_id": "r1",
            "started_at": "2025-01-01",
            "sweep_name": "embedded",
            "measurements": 0,
            "sweep_run": None,
            "status": "interrupted",
        }
    ]  # (not ended yet)
    again.finish_run("r1", "2025-01-01T01:00:00+00:00", exit_status=0)
    assert again.runs()[0]["status"] == "ended (exit status 0)"
    again.close()


# The tables as each older version made them (version 1: the released SQLite store; 2: a
# baseline's history; 3: runs join sweep runs). ID is the backend's autoincrement key.
OLD_TABLES = {
    1: [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, started_at TEXT NOT NULL, "
        "sweep_name TEXT NOT NULL, run_json TEXT NOT NULL)",
        "CREATE TABLE measurements (id ID, run_id TEXT NOT NULL, model TEXT NOT NULL, "
        "benchmark TEXT NOT NULL, test_id TEXT NOT NULL, value REAL NOT NULL, "
        "unit TEXT NOT NULL, n INTEGER NOT NULL, outcome TEXT, measurement_json TEXT NOT NULL)",
        "CREATE TABLE items (serving_key TEXT NOT NULL, benchmark TEXT NOT NULL, "
        "item_id TEXT NOT NULL, prompt_hash TEXT NOT NULL, model TEXT NOT NULL, "
        "record_json TEXT NOT NULL, first_run_id TEXT NOT NULL, "
        "PRIMARY KEY (serving_key, benchmark, item_id, prompt_hash))",
        "CREATE TABLE run_items (run_id TEXT NOT NULL, model TEXT NOT NULL, "
        "benchmark TEXT NOT NULL, item_id TEXT NOT NULL, serving_key TEXT NOT NULL, "
        "prompt_hash TEXT NOT NULL, reused INTEGER NOT NULL, "
        "PRIMARY KEY (run_id, model, benchmark, item_id))",
        "CREATE TABLE test_outcomes (run_id TEXT NOT NULL, test_id TEXT NOT NULL, "
        "outcome TEXT NOT NULL, PRIMARY KEY (run_id, test_id))",
        "CREATE TABLE baselines (name TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
        "saved_at TEXT NOT NULL)",
        "CREATE TABLE endpoints (run_id TEXT NOT NULL, model TEXT NOT NULL, "
        "provenance_json TEXT NOT NULL, PRIMARY KEY (run_id, model))",
    ],
    2: [
        "CREATE TABLE baseline_runs (seq ID, name TEXT NOT NULL, run_id TEXT NOT NULL, "
        "saved_at TEXT NOT NULL, UNIQUE (name, run_id))"
    ],
    3: [
        "ALTER TABLE runs ADD COLUMN sweep_run TEXT",
        "ALTER TABLE runs ADD COLUMN models_json TEXT",
        "ALTER TABLE runs ADD COLUMN finished_at TEXT",
        "ALTER TABLE baseline_runs ADD COLUMN sweep_run TEXT",
    ],
}


def old_store(store_at: str, version: int) -> None:
    """A store of ``version`` as that version's code left it: a run of no sweep run with a
    GSM8K measurement whose items hold their answers (as every version before 4 wrote them),
    saved as baseline main; from version 3 also two runs of sweep run sr-1, one that ended
    and one killed (never marked)."""
    from support.stores import engine_of

    from pytest_modelsweep.core.measurements import Measurement
    from pytest_modelsweep.core.records import Completion, ItemRecord

    postgres = not parse_store_location(store_at).path
    key = "SERIAL PRIMARY KEY" if postgres else "INTEGER PRIMARY KEY AUTOINCREMENT"
    statements = [
        sql.replace(" ID,", f" {key},")
        for step in range(1, version + 1)
        for sql in OLD_TABLES[step]
    ]
    items = [
        ItemRecord(
            item_id=f"q{n}",
            prompt_hash="p",
            correct=n == 0,
            response=f"answer {n}",
            data_hash="d",
            completion=Completion(text=f"answer {n}"),
        )
        for n in range(2)
    ]
    measurement = Measurement(
        model="m",
        benchmark="gsm8k",
        value=0.5,
        unit="accuracy",
        n=2,
        items=[i.to_dict() for i in items],
        test_id="t::test_gsm8k[m]",
    )
    # the stats as results schema 2 wrote them (a GSM8K's figures beside its own), and a rate
    # sweep of that schema (each step's pooled ``attainment`` and ``window``)
    written = {**measurement.to_dict(), "stats": V2_GSM8K["stats"]}
    rows: list[tuple[str, dict[str, object]]] = [
        ("INSERT INTO meta VALUES ('schema', :v)", {"v": str(version)}),
        (
            "INSERT INTO runs (run_id, started_at, sweep_name, run_json) VALUES "
            "('old', '2025-01-01T00:00:00', 's', '{}')",
            {},
        ),
        (
            "INSERT INTO measurements (run_id, model, benchmark, test_id, value, unit, n, "
            "measurement_json) VALUES ('old', 'm', 'gsm8k', 't::test_gsm8k[m]', 0.5, 'accuracy', "
            "2, :j)",
            {"j": json.dumps(written)},
        ),
        (
            "INSERT INTO measurements (run_id, model, benchmark, test_id, value, unit, n, "
            "measurement_json) VALUES ('old', 'm', 'rate_capacity', 't::test_rate_capacity[m]', "
            "2.0, 'req/s', 2, :j)",
            {"j": json.dumps(V2_RATE)},
        ),
        ("INSERT INTO baselines VALUES ('main', 'old', '2025-01-01T01:00:00')", {}),
    ]
    for item in items:
        rows += [
            (
                "INSERT INTO items VALUES ('k', 'gsm8k', :i, 'p', 'm', :j, 'old')",
                {"i": item.item_id, "j": json.dumps(item.to_dict())},
            ),
            (
                "INSERT INTO run_items VALUES ('old', 'm', 'gsm8k', :i, 'k', 'p', 0)",
                {"i": item.item_id},
            ),
        ]
    if version >= 2:
        rows.append(
            (
                "INSERT INTO baseline_runs (name, run_id, saved_at) VALUES "
                "('main', 'old', '2025-01-01T01:00:00')",
                {},
            )
        )
    if version >= 3:
        rows += [
            (
                "INSERT INTO runs VALUES (:r, :t, 's', '{}', 'sr-1', '[\"m\"]', :f)",
                {"r": run, "t": started, "f": finished},
            )
            for run, started, finished in (
                ("host-done", "2025-02-01T00:00:00", "2025-02-01T01:00:00"),
                ("host-killed", "2025-02-02T00:00:00", None),
            )
        ]
    engine = engine_of(store_at)
    try:
        with engine.begin() as conn:
            for sql in statements:
                conn.exec_driver_sql(sql)
            for sql, params in rows:
                conn.execute(sqlalchemy.text(sql), params)
    finally:
        engine.dispose()


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_store_of_each_older_version_is_upgraded_with_its_runs_answers_and_baselines(
    store_at: str,
    version: int,
) -> None:
    """Every older version opens as the current one: a run recorded before runs were marked
    ended has no status (not known), a sweep run's run never marked stays interrupted (and
    waited for), the old rows' answers read as they were, and new rows keep each answer
    once; reopening changes nothing."""
    old_store(store_at, version)
    store = Store(store_at)
    assert raw_sql(store_at, "SELECT value FROM meta WHERE key = 'schema'") == [
        [(str(SCHEMA_VERSION),)]
    ]
    expected = (
        {"old": ""}
        if version < 3
        else {"old": "", "host-done": "ended", "host-killed": "interrupted"}
    )
    assert {r["run_id"]: r["status"] for r in store.runs()} == expected
    if version >= 3:
        from pytest_modelsweep.store.sweep_run import awaited

        members = store.sweep_run_members("sr-1")
        assert [m.run_id for m in members] == ["host-done", "host-killed"]
        assert awaited(members, "m", exclude="judge") == members[1]  # killed: not finished
    assert store.baseline_entries("main") == [["old"]]
    old, rate = store.measurements("old")
    assert [i["completion"]["text"] for i in old["items"]] == ["answer 0", "answer 1"]
    # the rows of results schema 2 are schema 3 now: they read into the records they were
    figures = Measurement.from_dict(old).stats.figures  # type: ignore[union-attr]
    assert figures["strict_match_accuracy"] == V2_GSM8K["stats"]["strict_match_accuracy"]
    assert rate["stats"]["knob"] == "rate"
    assert Measurement.from_dict(rate) == Measurement.from_dict(upgrade_measurement(V2_RATE))
    assert Measurement.from_dict(rate).stats.steps[1].interval is not None  # type: ignore[union-attr]

    # a run of today: recorded, its answers once, ended with its exit status
    from pytest_modelsweep.core.records import Completion, ItemRecord

    item = ItemRecord(
        item_id="q9",
        prompt_hash="p9",
        correct=True,
        response="long answer",
        data_hash="d",
        completion=Completion(text="long answer"),
    )
    store.add_run("new", "s", {"started_at": "2026-01-01T00:00:00"})
    store.add_item("new", "m", "gsm8k", "k", item)
    store.add_measurement(
        "new",
        Measurement(
            model="m",
            benchmark="gsm8k",
            value=1.0,
            unit="accuracy",
            n=1,
            items=[item.to_dict()],
            test_id="t::test_gsm8k[m]",
        ).to_dict(),
    )
    assert store.runs()[-1]["status"] == "interrupted"
    store.finish_run("new", "2026-01-01T01:00:00", exit_status=1)
    assert store.runs()[-1]["status"] == "ended (exit status 1)"
    stored = raw_sql(store_at, "SELECT measurement_json FROM measurements WHERE run_id = 'new'")
    assert "long answer" not in stored[0][0][0]  # kept once, in the item's row
    [new] = store.measurements("new")
    assert new["items"][0]["completion"]["text"] == "long answer"
    store.close()
    again = Store(store_at)  # reopening upgrades nothing again
    assert {r["run_id"]: r["status"] for r in again.runs()} == {
        **expected,
        "new": "ended (exit status 1)",
    }
    again.close()


def test_locked_is_said_only_for_a_lock(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    Store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(
            DataError,
            match=r"the store stayed locked \(database is locked\); "
            r"is another run holding it\?",
        ):
            Store(path, busy_timeout_s=0.3)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize("kind", list(BAD_STORES))
def test_bad_store_option_is_one_usage_error_line_before_any_test(
    kind: str,
    pytester: pytest.Pytester,
    run_both_ways: RunPytest,
    this_checkout_in_subprocesses: None,
) -> None:
    pytester.makepyfile("def test_x(model_name):\n    raise AssertionError('no test may run')\n")
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


@pytest.mark.parametrize(
    "command", [["runs"], ["report", "some-run", "--md", "out.md"], ["compare", "a", "b"]]
)
@pytest.mark.parametrize("kind", ["folder", "not-sqlite", "foreign-sqlite"])
def test_cli_prints_the_same_line(
    kind: str, command: list[str], tmp_path: Path, this_checkout_in_subprocesses: None
) -> None:
    path = BAD_STORES[kind][0](tmp_path)
    before = digest(path) if path.is_file() else None
    result = subprocess.run(
        [sys.executable, "-m", "pytest_modelsweep.cli", *command, "--store", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
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


# -- a PostgreSQL database as the store ------------------------------------------------------
# Each bad --store postgresql://…: how to make it (from the session's server), and its line.
BAD_DATABASES: dict[str, tuple[Callable[[PostgresServer], str], str]] = {
    "server-down": (
        lambda server: server.url("x").replace(f":{server.port}/", f":{free_port()}/"),
        "{shown}: no PostgreSQL server answers at 127.0.0.1:{port} (connection refused); start "
        "it, or fix the host and port in --store (or PGHOST, PGPORT)",
    ),
    "wrong-password": (
        lambda server: server.url(server.create_database(), password="not-the-password"),
        "{shown}: the server 127.0.0.1:{port} refused the password of user "
        f"'{ADMIN}'; fix the password in --store, PGPASSWORD or PGPASSFILE",
    ),
    "no-password": (
        lambda server: server.url(server.create_database(), password=None),
        "{shown}: the server 127.0.0.1:{port} wants a password; put it in PGPASSWORD, "
        "PGPASSFILE or the URL (postgresql://USER:PASSWORD@HOST/DB)",
    ),
    "missing-database": (
        lambda server: server.url("no_such_db"),
        "{shown}: the server 127.0.0.1:{port} has no database 'no_such_db'; create it "
        "(createdb no_such_db) or fix the database in --store",
    ),
    "newer-schema": (
        lambda server: newer_database(server),
        "{shown}: a store of schema version " + str(SCHEMA_VERSION + 1) + ", newer than this "
        "pytest-modelsweep's (" + str(SCHEMA_VERSION) + "); upgrade pytest-modelsweep or pass "
        "--store with another database",
    ),
    "foreign-tables": (
        lambda server: foreign_tables(server),
        "{shown}: the database has tables named like the store's (items, runs) but no meta "
        "table with a schema key; pass --store with another database, or give the store a "
        "schema of its own (?options=-csearch_path%3Dmodelsweep)",
    ),
    "may-not-create-tables": (
        lambda server: unprivileged_user(server),
        "{shown}: the user may not make the store's tables (permission denied for schema "
        "public); grant it CREATE on the schema (GRANT CREATE ON "
        "SCHEMA public TO USER) or use a database it owns",
    ),
}


def newer_database(server: PostgresServer) -> str:
    url = server.url(server.create_database())
    raw_sql(
        url,
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"INSERT INTO meta VALUES ('schema', '{SCHEMA_VERSION + 1}')",
    )
    return url


def foreign_tables(server: PostgresServer) -> str:
    url = server.url(server.create_database())
    raw_sql(
        url,
        "CREATE TABLE runs (what TEXT)",
        "CREATE TABLE items (what TEXT)",
        "CREATE TABLE people (name TEXT)",
    )
    return url


def unprivileged_user(server: PostgresServer) -> str:
    """A user that may connect but not create tables (PostgreSQL 15's default on public)."""
    database = server.create_database()
    user = f"reader_{database}"
    server.admin_sql(f"CREATE ROLE {user} LOGIN PASSWORD 'reader-pw-5521'")
    return server.url(database, user=user, password="reader-pw-5521")


def bad_database(kind: str, server: PostgresServer) -> tuple[str, str]:
    """The --store URL of a bad kind and the one line it must give."""
    url = BAD_DATABASES[kind][0](server)
    location = parse_store_location(url)
    port = urlsplit(url).port
    return url, BAD_DATABASES[kind][1].format(shown=location.shown, port=port)


@pytest.fixture
def no_pg_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No password from the environment: only the URL's counts."""
    for name in ("PGPASSWORD", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGSERVICE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-passfile"))


@pytest.mark.parametrize("kind", list(BAD_DATABASES))
def test_bad_database_is_refused_with_the_reason_and_the_fix(
    kind: str,
    postgres_server: PostgresServer,
    no_pg_environment: None,
) -> None:
    url, line = bad_database(kind, postgres_server)
    with pytest.raises(DataError) as info:
        Store(url)
    assert str(info.value) == line
    assert ADMIN_PASSWORD not in str(info.value)


@pytest.mark.parametrize(
    "kind", ["server-down", "wrong-password", "missing-database", "newer-schema"]
)
def test_bad_database_is_one_usage_error_line_before_any_test(
    kind: str,
    postgres_server: PostgresServer,
    no_pg_environment: None,
    pytester: pytest.Pytester,
    run_both_ways: RunPytest,
) -> None:
    pytester.makepyfile("def test_x(model_name):\n    raise AssertionError('no test may run')\n")
    url, line = bad_database(kind, postgres_server)
    result = run_both_ways("--store", url)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {line}" in result.stderr.lines
    output = "\n".join(result.outlines + result.errlines)
    assert "Traceback" not in output and "no test may run" not in output
    assert ADMIN_PASSWORD not in output and "not-the-password" not in output
    assert not [p for p in pytester.path.rglob("*") if "postgresql" in p.name]


@pytest.mark.parametrize("kind", ["server-down", "wrong-password", "missing-database"])
def test_cli_prints_the_same_line_for_a_database(
    kind: str,
    postgres_server: PostgresServer,
    no_pg_environment: None,
    tmp_path: Path,
) -> None:
    url, line = bad_database(kind, postgres_server)
    result = subprocess.run(
        [sys.executable, "-m", "pytest_modelsweep.cli", "runs", "--store", url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"modelsweep: error: {line}"]


def test_reading_commands_do_not_make_a_store_in_an_empty_database(postgres_url: str) -> None:
    with pytest.raises(DataError) as info:
        Store(postgres_url, create=False)
    shown = parse_store_location(postgres_url).shown
    assert str(info.value) == (
        f"{shown}: no store in that database yet; run pytest benches with --store {shown} first"
    )
    assert raw_sql(postgres_url, "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'") == [
        [(0,)]
    ]


def test_credentials_from_the_pg_environment(
    postgres_server: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A URL without them: user, password, host and port from PG* variables, or PGPASSFILE."""
    database = postgres_server.create_database()
    for name in ("PGPASSWORD", "PGPASSFILE", "PGDATABASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", str(postgres_server.port))
    monkeypatch.setenv("PGUSER", ADMIN)
    monkeypatch.setenv("PGPASSWORD", ADMIN_PASSWORD)
    store = Store(f"postgresql:///{database}")
    store.add_run("r1", "embedded", {"started_at": "t"})
    store.close()
    monkeypatch.delenv("PGPASSWORD")
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{postgres_server.port}:*:{ADMIN}:{ADMIN_PASSWORD}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    assert [r["run_id"] for r in Store(f"postgresql:///{database}").runs()] == ["r1"]


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (
            "mysql://u:pw@h/db",
            "mysql:// is not a store this version can use; give a file path "
            "(SQLite), sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE",
        ),
        (
            "sqlite://",
            "sqlite:// needs a file, written sqlite:///relative/path or "
            "sqlite:////absolute/path (an in-memory database keeps nothing across the "
            "run's processes; URL parameters are not taken)",
        ),
        (
            "postgresql://u:pw-77@h:port/db",
            "postgresql://u@h:port/db: the port is not a number; "
            "write postgresql://USER@HOST:PORT/DATABASE",
        ),
    ],
)
def test_a_store_value_of_no_known_form_is_a_usage_error(
    value: str,
    line: str,
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_x(model_name):\n    raise AssertionError('no test may run')\n")
    result = pytester.runpytest("--store", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any(err.endswith(f": error: argument --store: {line}") for err in result.stderr.lines)
    assert "pw-77" not in "\n".join(result.outlines + result.errlines)


@pytest.mark.parametrize(
    ("value", "kind", "shown"),
    [
        ("runs/store.sqlite", "sqlite", "runs/store.sqlite"),
        ("sqlite:///runs/store.sqlite", "sqlite", "runs/store.sqlite"),
        ("sqlite:////tmp/store.sqlite", "sqlite", "/tmp/store.sqlite"),
        (
            "postgresql://bench:pw-3391@127.0.0.1:5432/sweep",
            "postgresql",
            "postgresql://bench@127.0.0.1:5432/sweep",
        ),
        (
            "postgres://bench@db/sweep?password=pw-3391&sslmode=require",
            "postgresql",
            "postgresql://bench@db/sweep?password=***&sslmode=require",
        ),
        ("postgresql+psycopg:///sweep", "postgresql", "postgresql:///sweep"),
    ],
)
def test_the_store_value_is_told_by_its_form(value: str, kind: str, shown: str) -> None:
    location = parse_store_location(value)
    assert (location.kind, location.shown) == (kind, shown)
    assert "pw-3391" not in repr(location) + str(location)
    assert "pw-3391" not in redact(f"--store={value}")


@pytest.mark.parametrize(
    "password", ["pa/pw-3391", "p#pw-3391", "p@pw-3391", "p?pw-3391", "p?x=pw-3391"]
)
def test_a_password_no_url_parser_reads_whole_is_refused_unshown(password: str) -> None:
    value = f"postgresql://u:{password}@h/db"
    with pytest.raises(StoreLocationError) as error:
        parse_store_location(value)
    assert "percent-encode them (/ as %2F, ? as %3F, # as %23, @ as %40)" in str(error.value)
    assert "pw-3391" not in str(error.value) and "pw-3391" not in redact(f"--store={value}")
