"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
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
from cpu_share import SHARE
from paths import REAL_CACHE
from postgres_server import PostgresServer, missing_reason
from requirements import need
from room import ALONE, CONFINED, Room
from scheduling import FOREGROUND, LONE, Scheduling

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
    """Modules that time real work (contention, drift, paced servers) run first and away
    from the others (``serial``, see :func:`room_kind`): then :data:`LONGEST_FIRST`, then the
    rest (see :func:`module_rank`)."""
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
    "test_capacity", "test_measurement_records", "test_open_loop_bench", "test_decision_page",
    "test_interleave", "test_verdict_plugin", "test_noise", "test_startup", "test_stalls",
    "test_sequential", "test_public_throughput", "test_open_loop", "test_report_tables",
)
"""The test modules whose assertions read a timing that a CPU-bound test beside them on the
same two cores would move (a server's pace, a drift cancelled, a stall's seconds, a first
token within the SLO in the decision page's capacity runs, a rate sweep that both servers of
the records run keep up with at its first step, a reference that waits only for a candidate
whose test has started on the other worker, an open loop's requests sent on schedule, a
steady server's repeats within a loose target, fresh launches that each sleep a second
before they serve, and the report tables read from the
decision page's runs, which the first module to ask for one makes), longest first but for
the report tables, last so that those runs are made by then. They run beside one another
on the foreground workers (three under README's ``-n 5``; mostly waiting on paced
servers), and beside no test but a confined one (``tests/cpu_share.py``): the other
workers' tests run under ``SCHED_IDLE`` at nice 19, their sessions' scheduling groups at
nice 19 too, until the timing tests are done. (At nice 19 alone, on both CPUs, the
interleaved windows' drift and the decision page's first tokens missed; kept to the last
CPU at nice 19, the confined work left the first a third idle.) CI's shared hosts stall a
process 80 to 130 ms now and then: the margins that were thinner are wider (the capacity
servers' slot time, the slow candidates, the drift check)."""

NEEDS_WHOLE_CPUS = ("test_vllm_integration", "test_embedded_integration", "test_cpu_share")
"""The modules that run with the others once the timing and lone tests are done, never
confined beside them: vLLM (it compiles the model on every CPU), the embedded
servers of two threads each, and the test of confining itself."""

ALONE_MODULES = ("test_contention", "test_cold_start")
"""The test modules that read the whole machine (a CPU hog found, a quiet window, a page
cache evicted): each runs, from its first test to its last, while no other test
runs. No other test starts until they are done (``tests/scheduling.py``)."""

FOREGROUND_MODULES = frozenset((*TIMING_MODULES, *ALONE_MODULES))
"""The modules that go to the foreground workers only (``tests/scheduling.py``)."""

LONGEST_FIRST = (
    "test_vllm_integration", "test_resume_integration", "test_verdict_integration",
    "test_like_with_like", "test_multihost", "test_conformance_lmeval",
    "test_public_api", "test_sound_data", "test_store_kill", "test_slo_cost", "test_store",
    "test_plugin", "test_store_copy", "test_dormant", "test_throughput_workload",
)
"""The other modules that take longest (real servers, shared runs, subprocesses; a module
profile of whole runs), so that no long module is the last one left on a worker."""


def module_rank(name: str) -> tuple[int, int]:
    """Where a module's tests go in the order xdist hands modules out (``-n``): the lone
    modules first (each waits only for the tests that started before it), then the timing
    modules, so that while one of them runs the other worker waits for a test of theirs
    rather than for a long test of another module; then the longest others; then the rest as
    collected."""
    for group, names in enumerate((ALONE_MODULES, TIMING_MODULES, LONGEST_FIRST)):
        if name in names:
            return group, names.index(name)
    return 3, 0


SERVERS_KEPT_BETWEEN_TESTS = frozenset({"test_embedded_integration", "test_vllm_integration"})
"""Modules whose real servers live from their first test to their last (module fixtures):
an idle vLLM still polls the CPU, so no timing test may run until the module is done."""


def run_room() -> Room:
    """The room of this test run: timing and lone tests go before the others waiting for it,
    so that no test of another module waits between two of a timing or lone module's tests."""
    return Room(Path(tempfile.gettempdir()) / f"modelsweep-tests-{TEST_RUN}.room",
                first=(TIMING, ALONE))


def room_kind(item: pytest.Item) -> str:
    """``timing``, ``alone`` (the ``serial`` marker's argument), else ``confined`` while timing
    or lone tests are left (:func:`foreground_done`) in a module that needs no whole CPU,
    else ``others``."""
    marker = item.get_closest_marker("serial")
    if marker:
        return str(marker.args[0])
    if (SHARE.can_confine and module_name(item) not in NEEDS_WHOLE_CPUS
            and not foreground_done(item.config)):
        return CONFINED
    return OTHERS


def phase_done(config: pytest.Config, phase: str) -> bool:
    """Whether the scheduler has marked ``phase`` done (always, without xdist)."""
    folder = getattr(config, "workerinput", {}).get(PHASES)
    return folder is None or (Path(folder) / phase).exists()


def foreground_done(config: pytest.Config) -> bool:
    """Whether every timing and lone test of this run has completed."""
    return phase_done(config, FOREGROUND)


def wait_for(config: pytest.Config, phase: str) -> None:
    """Until the scheduler marks ``phase`` done."""
    while not phase_done(config, phase):
        time.sleep(PHASE_POLL_S)


PHASES = "modelsweep_tests_phases"
"""The ``workerinput`` key of the folder in which the scheduler marks the phases done."""
PHASE_POLL_S = 0.1
_phases_folder = pytest.StashKey[Path]()


def phases_folder(config: pytest.Config) -> Path:
    """The controller's folder for :data:`PHASES`, made on first use."""
    if _phases_folder not in config.stash:
        config.stash[_phases_folder] = Path(tempfile.mkdtemp(prefix="modelsweep-tests-"))
    return config.stash[_phases_folder]


def pytest_configure_node(node: Any) -> None:
    """xdist's hook, on the controller: each worker learns where the scheduler marks phases."""
    node.workerinput[PHASES] = str(phases_folder(node.config))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _phases_folder in config.stash:
        shutil.rmtree(config.stash[_phases_folder], ignore_errors=True)


def module_hold(name: str) -> str | None:
    """The kind a module holds the room for from its first test to its last (each test's own
    hold ends with the test): ``others`` while a module's servers live
    (:data:`SERVERS_KEPT_BETWEEN_TESTS`); ``alone`` for a lone module, so that the other
    workers' tests wait once for the module, not once for each of its tests."""
    if name in SERVERS_KEPT_BETWEEN_TESTS:
        return OTHERS
    return ALONE if name in ALONE_MODULES else None


@pytest.fixture(autouse=True, scope="module")
def room_held_over_the_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """The room held for the module's whole run where :func:`module_hold` says so."""
    kind = module_hold(request.module.__name__)
    if TEST_RUN is None or kind is None:
        yield
        return
    if kind == OTHERS:  # a timing module between two of its tests is in no queue of the room
        wait_for(request.config, FOREGROUND)
    with run_room().held(kind):
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Under xdist, each test runs in the room of its kind (``tests/room.py``): timing tests
    beside timing tests, the others beside the others, a lone test beside none, a confined
    test beside any but a lone one, this worker confined to its share while it runs."""
    if TEST_RUN is None:
        return (yield)
    kind = room_kind(item)
    if kind != ALONE:  # else a test that started first would keep a lone module waiting
        wait_for(item.config, LONE)
    if kind == CONFINED:
        SHARE.confine(until=lambda: foreground_done(item.config))
    else:
        SHARE.release()
    with run_room().held(kind):
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n``, a file's tests go to one worker (its module fixtures are made once), the
    files in the order :func:`pytest_collection_modifyitems` left them; the timing and lone
    files on the foreground workers, and a file of :data:`NEEDS_WHOLE_CPUS` on the others
    only once the timing and lone tests are done (``tests/scheduling.py``).

    The project's own tests measure no model (their pytester runs do), though their ids may
    name one: modelsweep's scheduling by model is not theirs."""
    config.option.loadscopereorder = False  # hand modules out in the order collected
    return Scheduling(
        config, log,
        foreground_only=lambda scope: Path(scope).stem in FOREGROUND_MODULES,
        lone=lambda scope: Path(scope).stem in ALONE_MODULES,
        needs_whole_cpus=lambda scope: Path(scope).stem in NEEDS_WHOLE_CPUS,
        phases=phases_folder(config))
