"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# pytester's in-process runs put sys.modules back as it was after each run, and a C
# extension cannot be loaded twice in one process: import the ones a run of the (dormant
# until used) plugin loads before any pytester run does. httpx imports httpcore on its first
# request and keeps a map of httpcore's exceptions made then: had an in-process run made it,
# a later test's httpcore would be a new import whose errors the map does not know
# (`httpcore.ConnectError` raised where `httpx.ConnectError` is caught).
import anyio._backends._asyncio  # noqa: F401
import httpcore
import httpcore._backends.anyio  # noqa: F401
import numpy  # noqa: F401
import pytest
import sqlalchemy.dialects.postgresql  # noqa: F401  (the store imports it on first use)
from paths import REAL_CACHE
from postgres_server import PostgresServer, missing_reason
from requirements import need
from room import ALONE, Room

with contextlib.suppress(ImportError):
    import psycopg  # noqa: F401

CHECKOUT = Path(__file__).resolve().parents[1]

# The tests start hundreds of Python processes (pytester's, the CLI's) that import this
# checkout; under PYTHONDONTWRITEBYTECODE (set in many CI images) each of them would compile
# the package again and pytest rewrite its modules again (0.3 s a process here). Its bytecode
# goes to the checkout's __pycache__ folders, which git ignores.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

TEST_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
"""Under xdist, the id of this test run (None: one process runs every test)."""
# ... and the pytest runs the tests start (in process or not) must not take this worker's
# xdist variables for their own: each decides alone whether it is a worker
for _name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_name, None)


@pytest.fixture(autouse=True)
def this_checkout_in_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Subprocesses (pytester's, their xdist workers, the CLI) import this checkout's package.

    pytester puts only its own folder on ``PYTHONPATH``; without this, a subprocess
    would import whichever pytest-modelsweep is installed, which need not be this one.
    """
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(CHECKOUT), *filter(None, [os.environ.get("PYTHONPATH")])]))


@pytest.fixture
def real_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point MODELSWEEP_CACHE at the machine's cache, also for pytester subprocesses."""
    monkeypatch.setenv("MODELSWEEP_CACHE", str(REAL_CACHE))
    yield REAL_CACHE


RunPytest = Callable[..., pytest.RunResult]


@pytest.fixture(params=["plain", "xdist"])
def run_both_ways(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> RunPytest:
    """Run pytest in the pytester project as it is, and again under ``-n 2`` (syrupy's way).

    The plugin's behaviour must not depend on xdist: results come back to the
    controller, errors read the same, exit statuses agree. The plain run is
    in-process; xdist needs a subprocess.
    """
    if request.param == "plain":
        return pytester.runpytest
    return lambda *args: pytester.runpytest_subprocess(*args, "-n", "2")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A private PostgreSQL server for the session (tests/postgres_server.py); without the
    server programs or psycopg, a skip locally and a failure under CI=true."""
    reason = missing_reason()
    need(reason is None, reason or "")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        need(False, "psycopg is not installed: pip install -e '.[postgres]'")
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """``postgresql://…`` of a new empty database on the session's server."""
    return postgres_server.url(postgres_server.create_database())


@pytest.fixture(params=["sqlite", "postgresql"])
def store_at(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store's ``--store`` value, once per backend: a SQLite file, a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    return str(request.getfixturevalue("postgres_url"))


# --------------------------------------------------------------------------- tests that time the CPU

def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules that time real work (contention, drift, paced or real servers) run first and
    away from the others (``serial``, see :func:`room_kind`): then :data:`LONGEST_FIRST`,
    then the rest (see :func:`module_rank`)."""
    for item in items:
        name = module_name(item)
        if name in ALONE_MODULES:
            item.add_marker(pytest.mark.serial(ALONE))
        elif name in TIMING_MODULES:
            item.add_marker(pytest.mark.serial(TIMING))
    items.sort(key=lambda item: module_rank(module_name(item)))  # stable: a module stays whole


def module_name(item: pytest.Item) -> str:
    return str(getattr(item.module, "__name__", ""))


TIMING, OTHERS = "timing", "others"

TIMING_MODULES = (
    "test_capacity", "test_open_loop_bench", "test_decision_page", "test_interleave",
    "test_verdict_plugin", "test_stalls", "test_sequential", "test_public_throughput",
)
"""The test modules whose assertions read a timing that a CPU-bound test beside them on the
same two cores would move (a server's pace, a drift cancelled, a stall's seconds, a first
token within 80 ms in the decision page's capacity runs, a reference that waits only for a
candidate whose test has started on the other worker), longest first. They run beside
one another (mostly waiting on paced servers, together they use about half of the two
cores), never beside another test. The real servers' tests (embedded, vLLM, resume, the
real verdict) assert no timing: they run beside the others, slower, rather than leave the
second worker idle."""

ALONE_MODULES = ("test_noise", "test_startup", "test_contention", "test_cold_start")
"""The test modules that read the whole machine (a CPU hog found, a quiet window, the
seconds of fresh launches): each of their tests runs while no other test runs."""

LONGEST_FIRST = (
    "test_like_with_like", "test_resume_integration", "test_measurement_records",
    "test_verdict_integration", "test_vllm_integration",
    "test_multihost", "test_report_tables", "test_conformance_lmeval", "test_public_api",
)
"""The other modules that take longest (real servers, shared runs; ``--durations`` of a whole
run), so that no long module is the last one left on a worker. The first is the one of them
whose longest test is shortest (one minute): a worker done with the timing modules starts it
while the other may still have a timing test waiting for it."""


def module_rank(name: str) -> tuple[int, int]:
    """Where a module's tests go in the order xdist hands modules out (``-n``): the timing
    and then the lone modules first, so that while one of them runs the other worker waits
    for a test of theirs rather than for a long test of another module; then the longest
    others; then the rest as collected. The modules whose servers live across their tests
    (held in the room the whole module) come after every timing module."""
    for group, names in enumerate((TIMING_MODULES, ALONE_MODULES, LONGEST_FIRST)):
        if name in names:
            return group, names.index(name)
    return 3, 0


SERVERS_KEPT_BETWEEN_TESTS = frozenset({"test_embedded_integration", "test_vllm_integration"})
"""Modules whose real servers live from their first test to their last (module fixtures):
an idle vLLM still polls the CPU, so no timing test may run until the module is done."""


def run_room() -> Room:
    return Room(Path(tempfile.gettempdir()) / f"modelsweep-tests-{TEST_RUN}.room")


def room_kind(item: pytest.Item) -> str:
    """``timing``, ``alone`` (the ``serial`` marker's argument) or ``others``."""
    marker = item.get_closest_marker("serial")
    return str(marker.args[0]) if marker else OTHERS


@pytest.fixture(autouse=True, scope="module")
def no_timing_test_while_the_modules_servers_live(request: pytest.FixtureRequest) -> Iterator[None]:
    """The room held for ``others`` over a whole module of :data:`SERVERS_KEPT_BETWEEN_TESTS`
    (each test's own hold ends with the test)."""
    if TEST_RUN is None or request.module.__name__ not in SERVERS_KEPT_BETWEEN_TESTS:
        yield
        return
    with run_room().held(OTHERS):
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Under xdist, each test runs in the room of its kind (``tests/room.py``): timing tests
    beside timing tests, the others beside the others, a lone test beside none."""
    if TEST_RUN is None:
        return (yield)
    with run_room().held(room_kind(item)):
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n``, a file's tests go to one worker (its module fixtures are made once), the
    files in the order :func:`pytest_collection_modifyitems` left them.

    The project's own tests measure no model (their pytester runs do), though their ids may
    name one: modelsweep's scheduling by model is not theirs."""
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False  # hand modules out in the order collected
    return LoadFileScheduling(config, log)
