"""A store that fails mid-run fails the run fast, and nothing measured is sent again.

A user's own benchmark with a verdict, three models on the fake server of tests/support/sse_server.py,
without ``-n`` and under ``-n 2``. The store fails as the reference's test starts, each way
for real (no root needed):

* full: SQLite's ``PRAGMA max_page_count`` set to the database's size on every connection
  from then on (``database or disk is full``);
* read-only: SQLite's ``PRAGMA query_only`` from then on (``attempt to write a readonly
  database``); root writes through a chmod'ed file (and through an open one, anybody does),
  so a mode bit cannot make a store read-only mid-run;
* gone: a throwaway PostgreSQL server (tests/support/postgres_server.py) stopped.

The fault is the project's conftest (a SQLAlchemy pool event in every process of the run).
Each run has one line per failed test, no traceback, no INTERNALERROR, and ends within 60 s
of its last measured test (the conftest records when each measuring test ended, the test
when the run ended). A rerun on a healthy store sends no request: every answer the
results kept is taken back into the store.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import Pool
from support.paths import TWO_WORKERS
from support.postgres_server import PostgresServer, missing_reason
from support.sse_server import SseServer
from support.user_projects import MODELS, assert_no_traceback, eval_bench, options, output, project

from pytest_modelsweep.core.measurements import STOP_FINAL
from pytest_modelsweep.core.outputs import OutputError
from pytest_modelsweep.core.records import ApiRequest, ItemRecord
from pytest_modelsweep.core.secrets import redact
from pytest_modelsweep.core.store_location import parse_store_location
from pytest_modelsweep.core.sweep import ModelSource, ModelSpec
from pytest_modelsweep.judging.comparisons import ComparisonFinder, Failed, FinishedTest
from pytest_modelsweep.judging.sequential import LiveSide, Partner, UntilDecided
from pytest_modelsweep.serving.endpoint import Endpoint, Provenance
from pytest_modelsweep.store.database import Store
from pytest_modelsweep.workloads.accuracy import AccuracyRun, run_accuracy

pytest_plugins = ("pytester",)

ITEMS = 12
FAULT_CONFTEST = """
import os
import sqlite3
import time
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.pool import Pool

FAULT = os.environ.get("STORE_FAULT", "")
TRIGGER = Path(os.environ.get("STORE_TRIGGER", "trigger"))


@event.listens_for(Pool, "checkout")
def _fault(dbapi_connection, record, proxy):
    if FAULT in ("full", "read-only") and TRIGGER.exists() \\
            and isinstance(dbapi_connection, sqlite3.Connection):
        if FAULT == "full":
            pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
            dbapi_connection.execute(f"PRAGMA max_page_count={pages}")
        else:
            dbapi_connection.execute("PRAGMA query_only=ON")


def pytest_runtest_call(item):
    if FAULT and item.nodeid.endswith("test_my_eval[ref]"):
        TRIGGER.touch()
        done = TRIGGER.with_suffix(".done")
        deadline = time.monotonic() + 60
        while FAULT == "gone" and not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def pytest_runtest_logreport(report):
    if report.when == "call" and "test_my_eval[" in report.nodeid:
        with open(os.environ["MEASURED_AT"], "a") as handle:
            handle.write(f"{time.time()}\\n")
"""


def failures(text: str) -> dict[str, list[str]]:
    """Test name → the lines of its entry in the FAILURES section (xdist's ``[gwN]`` line
    left out)."""
    section = text.split(" FAILURES ", 1)[1] if " FAILURES " in text else ""
    entries: dict[str, list[str]] = {}
    name = None
    for line in section.splitlines():
        header = re.fullmatch(r"_+ (\S+) _+", line)
        if header:
            name = header.group(1)
            entries[name] = []
        elif line.startswith("=") or line.startswith("modelsweep: "):
            name = None
        elif name is not None and line.strip() and not re.match(r"\[gw\d+\] ", line):
            entries[name].append(line)
    return entries


def run(
    pytester: pytest.Pytester,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: SseServer,
    store: str,
    fault: str,
    *args: str,
) -> pytest.RunResult:
    """A run of the project on ``store`` with ``fault`` (``""``: none)."""
    monkeypatch.setenv("STORE_FAULT", fault)
    monkeypatch.setenv("STORE_TRIGGER", str(tmp_path / "trigger"))
    monkeypatch.setenv("MEASURED_AT", str(tmp_path / "measured_at"))
    return pytester.runpytest_subprocess(
        *options(server.base_url, f"--store={store}", "--modelsweep-dir=work", *args), timeout=120
    )


def assert_failed_fast(
    result: pytest.RunResult, tmp_path: Path, ended_at: float, store_line: str
) -> None:
    """Every test failed in one line; the verdicts waited for nothing; the run ended soon
    after its last measuring test."""
    assert_no_traceback(result)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 5 and outcomes.get("passed", 0) == 0, output(result)
    entries = failures(result.stdout.str())
    assert len(entries) == 5, entries
    for test, lines in entries.items():
        assert len(lines) == 1, (test, lines)  # one line per failed test
        assert store_line in lines[0], (test, lines)
    for candidate in ("cand", "third"):
        (line,) = entries[f"test_verdict[{candidate}-my_eval]"]
        assert "after waiting" not in line
    measured = [float(t) for t in (tmp_path / "measured_at").read_text().split()]
    assert ended_at - max(measured) < 60


def assert_nothing_sent_again(result: pytest.RunResult, server: SseServer) -> None:
    assert_no_traceback(result)
    result.assert_outcomes(passed=5)
    assert server.stats.bodies == []  # every answer came from what the first run kept
    assert re.search(r"modelsweep: took \d+ answered items back into the store", output(result))
    for model in MODELS:
        assert f"my_eval {model}: reused {ITEMS} stored items, sending 0" in output(result)


def store_line_of(fault: str, store: str) -> str:
    if fault == "full":
        return (
            f"the store {store}: cannot write (database or disk is full); free space on "
            "its disk or pass --store elsewhere"
        )
    return (
        f"the store {store}: cannot write (attempt to write a readonly database); make "
        "it writable again or pass --store elsewhere"
    )


@pytest.mark.parametrize("workers", [[], list(TWO_WORKERS)], ids=["plain", "xdist"])
@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_a_sqlite_store_that_fails_mid_run_fails_the_run_fast(
    pytester: pytest.Pytester,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    workers: list[str],
) -> None:
    """Full: the results go to ``--results``; read-only: to the run folder (the default), and
    the rerun finds them there. Both reruns use the same store, healthy again."""
    project(pytester, test_mine=eval_bench(items=ITEMS, words=300))
    pytester.makeconftest(FAULT_CONFTEST)
    store = str(tmp_path / "store.sqlite")
    results = ["--results=r.json"] if fault == "full" else []
    with SseServer(served_names=MODELS) as server:
        failed = run(pytester, tmp_path, monkeypatch, server, store, fault, *results, *workers)
        ended_at = time.time()
        assert_failed_fast(failed, tmp_path, ended_at, store_line_of(fault, store))
        assert len(server.stats.bodies) == ITEMS * len(MODELS)  # every model was measured
        kept = (
            pytester.path / "r.json"
            if fault == "full"
            else next((pytester.path / "work" / "runs").glob("*/results.json"))
        )
        measured = json.loads(kept.read_text())["measurements"]
        assert sorted(m["model"] for m in measured) == sorted(MODELS)
        server.reset()
        again = run(pytester, tmp_path, monkeypatch, server, store, "", *results, *workers)
        assert_nothing_sent_again(again, server)


@pytest.fixture
def throwaway_postgres() -> PostgresServer:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[postgres]'")
    return PostgresServer().start()


@pytest.mark.parametrize("workers", [[], list(TWO_WORKERS)], ids=["plain", "xdist"])
def test_a_postgresql_server_stopped_mid_run_fails_the_run_fast(
    pytester: pytest.Pytester,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    throwaway_postgres: PostgresServer,
    workers: list[str],
) -> None:
    """The server is stopped as the reference's test starts; the rerun's healthy store is a
    SQLite file (the stopped server's cluster is gone)."""
    project(pytester, test_mine=eval_bench(items=ITEMS, words=300))
    pytester.makeconftest(FAULT_CONFTEST)
    server_pg = throwaway_postgres
    url = server_pg.url(server_pg.create_database())
    trigger = tmp_path / "trigger"

    stopped = threading.Event()

    def stop_when_triggered() -> None:
        deadline = time.monotonic() + 100
        while not trigger.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        server_pg.stop()
        stopped.set()
        trigger.with_suffix(".done").touch()

    stopper = threading.Thread(target=stop_when_triggered, daemon=True)
    stopper.start()
    try:
        with SseServer(served_names=MODELS) as server:
            failed = run(
                pytester, tmp_path, monkeypatch, server, url, "gone", "--results=r.json", *workers
            )
            ended_at = time.time()
            shown = redact(parse_store_location(url).shown)  # as the report shows it
            # the store gone mid-run, or (an xdist worker opening it late) not there
            assert_failed_fast(failed, tmp_path, ended_at, f"{shown}: ")
            for lines in failures(failed.stdout.str()).values():
                assert (
                    "start its PostgreSQL server again" in lines[0]
                    or "no PostgreSQL server answers" in lines[0]
                )
            measured = json.loads((pytester.path / "r.json").read_text())["measurements"]
            server.reset()
            again = run(
                pytester,
                tmp_path,
                monkeypatch,
                server,
                str(tmp_path / "healthy.sqlite"),
                "",
                "--results=r.json",
                *workers,
            )
            assert_no_traceback(again)
            again.assert_outcomes(passed=5)
            kept = sum(m["n"] for m in measured)
            assert len(server.stats.bodies) == ITEMS * len(MODELS) - kept
    finally:
        stopper.join(5)
        if not stopped.is_set():
            server_pg.stop()
    assert stopped.is_set()


# ----------------------------------------------------------------- the finder, on a clock

TEST_OF_REF = "test_mine.py::test_my_eval[ref]"


def test_a_comparison_waits_only_for_a_test_not_finished_here_and_says_so_every_30_s(
    tmp_path: Path,
) -> None:
    """Nothing of the reference in this process or the store: it may run on another worker."""
    now = [0.0]
    said: list[str] = []
    store = Store(tmp_path / "store.sqlite")
    finder = ComparisonFinder(
        store,
        "run",
        wait_s=75,
        poll_s=5,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
        progress=said.append,
    )
    outcome = finder.items("ref", "my_eval", expected_tests=[TEST_OF_REF])
    store.close()
    assert isinstance(outcome, Failed) and "after waiting 75s" in outcome.reason
    assert said == [
        f"waiting for ref's my_eval result: {TEST_OF_REF} has not finished in this "
        f"process (it runs on another xdist worker, or is still queued); waited "
        f"{s}s of --verdict-wait 75s"
        for s in (30, 60)
    ]


def test_a_side_whose_test_failed_here_is_not_looked_for_nor_waited_for(tmp_path: Path) -> None:
    """Its outcome is this process's, not the store's (which has none); with the store failed,
    the line says why the side is not there."""
    store = Store(tmp_path / "store.sqlite")
    failed_here = {TEST_OF_REF: FinishedTest("failed", "the store S: cannot write (full); fix")}

    def never(seconds: float) -> None:
        raise AssertionError("waited")

    def finder(store_failure: str | None) -> ComparisonFinder:
        return ComparisonFinder(
            store,
            "run",
            wait_s=7200,
            sleep=never,
            finished_here=failed_here.get,
            store_failure=lambda: store_failure,
        )

    healthy = finder(None).items("ref", "my_eval", expected_tests=[TEST_OF_REF])
    assert healthy == Failed(
        f"ref recorded no my_eval result in this run ({TEST_OF_REF} "
        "failed); its own test's failure says why"
    )
    assert store.outcome_of("run", TEST_OF_REF) is None
    failed = finder("the store S: cannot write (full); fix").items(
        "ref", "my_eval", expected_tests=[TEST_OF_REF]
    )
    assert failed == Failed(
        "ref's my_eval result was not recorded: its test failed (the store "
        "S: cannot write (full); fix)"
    )
    other = finder("the store S: cannot write (full); fix").items(
        "cand", "my_eval", expected_tests=["test_mine.py::test_my_eval[cand]"]
    )
    assert other == Failed(
        "cand's my_eval result cannot be looked for: the store S: cannot write (full); fix"
    )
    store.close()


# ----------------------------------------------------------------- in process: a store gone


@contextlib.contextmanager
def broken(how: str = "gone") -> Iterator[None]:
    """From now on every pool refuses each connection as disconnected (``gone``: SQLAlchemy
    gives up with an error of its own, ``InvalidRequestError``, not the driver's) or hands it
    out ``read-only`` (writes fail, reads work)."""

    def checkout(connection: sqlite3.Connection, *_: object) -> None:
        if how == "gone":
            raise DisconnectionError("server closed the connection unexpectedly")
        connection.execute("PRAGMA query_only=ON")

    event.listen(Pool, "checkout", checkout)
    try:
        yield
    finally:
        event.remove(Pool, "checkout", checkout)


def test_a_read_refused_by_sqlalchemy_itself_is_one_line_and_so_is_every_later_one(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store.sqlite")
    with broken():
        raised = []
        for use in (
            store.runs,
            lambda: store.outcome_of("run", "t"),
            lambda: store.add_outcome("run", "t", "passed"),
        ):
            with pytest.raises(OutputError) as info:
                use()
            raised.append(str(info.value))
    store.close()
    assert (
        raised
        == [
            f"the store {store.path}: cannot read (This connection is closed); "
            "check the store's disk or server, or pass --store elsewhere"
        ]
        * 3
    )
    assert store.failure == raised[0]


def test_an_accuracy_run_on_a_store_it_cannot_read_sends_and_keeps_every_item(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store.sqlite")
    spec = ModelSpec(
        name="m",
        source=ModelSource("embedded", "m"),
        served_name="m",
        license="mit",
        prompting="completion",
        tool_call_parser=None,
        bfcl_mode="prompt",
    )
    with SseServer() as server, broken():
        endpoint = Endpoint(
            spec, server.base_url, "m", 4096, "llamacpp", Provenance("test", "0", "m")
        )
        run = run_accuracy(
            endpoint,
            "my_eval",
            ["a", "b"],
            lambda item: ApiRequest(item, "/v1/completions", {"prompt": item, "max_tokens": 2}),
            lambda item, request, answer: ItemRecord(
                item, request.prompt_hash, True, answer.text or "", completion=answer
            ),
            store=store,
            run_id="run",
        )
    store.close()
    assert (run.sent, run.reused, run.errors) == (2, 0, 0)
    assert run.store_error == store.failure and "cannot write" in run.store_error


@pytest.mark.parametrize(
    "how, look",
    [
        ("gone", "ref cannot be looked at: {failure}"),
        ("read-only", "ref has not started (its test may come later)"),
    ],
    ids=["gone", "read-only"],
)
def test_a_sequential_benchmark_waits_on_no_side_once_the_store_failed(
    tmp_path: Path,
    how: str,
    look: str,
) -> None:
    """The store fails as the first round ends: the reference (always waited for) cannot
    record more, so the candidate neither waits for it nor fails; it goes to the order's end."""
    store = Store(tmp_path / "store.sqlite")
    side = LiveSide(store, "run", "ref", "my_eval", ["test_mine.py::test_my_eval[ref]"])

    def never(seconds: float) -> None:
        raise AssertionError("waited on a failed store")

    loop = UntilDecided(
        store,
        "run",
        "cand",
        "my_eval",
        ["q0", "q1", "q2", "q3"],
        2,
        [Partner("verdict", "cand", "ref", side, "always")],
        wait_s=7200,
        sleep=never,
    )
    with contextlib.ExitStack() as breaking:

        def send(ids: Sequence[str]) -> AccuracyRun[object]:
            if store.failure is None:
                breaking.enter_context(broken(how))
                with contextlib.suppress(OutputError):  # as run_accuracy keeps its refusal
                    store.add_outcome("run", "test_mine.py::test_my_eval[cand]", "passed")
            return AccuracyRun([ItemRecord(i, "h", True, "") for i in ids], len(ids), 0, 0, 0.0)

        done = loop.run(send)
    store.close()
    assert store.failure is not None and "cannot write" in store.failure
    assert (done.sequence.used, done.sequence.stop) == (4, STOP_FINAL)
    assert done.sequence.comparisons == (look.format(failure=store.failure),)
    assert [r.item_id for r in done.run.records] == ["q0", "q1", "q2", "q3"]
