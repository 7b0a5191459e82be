"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import sys
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
import scipy.special  # noqa: F401  (core.stats's Student t and binomial on first use)
import sqlalchemy.dialects.postgresql  # noqa: F401  (the store imports it on first use)
from support.paths import REAL_CACHE, TWO_WORKERS, UNUSED_PLUGINS
from support.postgres_server import PostgresServer, missing_reason
from support.requirements import need

import pytest_modelsweep

with contextlib.suppress(ImportError):
    import psycopg  # noqa: F401

# Likewise the package itself: a run that first imports one of its modules (a user's bench
# imports pytest_modelsweep.api) would otherwise leave it behind in sys.modules' restore, and
# the next run's import make new classes that the plugin's checks do not know ("items must be
# EvalItem, got EvalItem"). Imported here once, every in-process run shares them.
for _module in pkgutil.walk_packages(pytest_modelsweep.__path__, "pytest_modelsweep."):
    importlib.import_module(_module.name)

CHECKOUT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

# The tests start hundreds of Python processes (pytester's, the CLI's) that import this
# checkout; under PYTHONDONTWRITEBYTECODE (set in many CI images) each of them would compile
# the package again and pytest rewrite its modules again (0.3 s a process here). Its bytecode
# goes to the checkout's __pycache__ folders, which git ignores.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The pytest runs the tests start (in process or not) must not take this worker's xdist
# variables for their own: each decides alone whether it is a worker.
for _name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_name, None)

# The plugins none of those runs uses stay out of them (paths.py); pytester removes
# PYTEST_ADDOPTS, and the autouse fixture below sets it again.
ADDOPTS = " ".join(filter(None, [os.environ.get("PYTEST_ADDOPTS"), *UNUSED_PLUGINS]))
os.environ["PYTEST_ADDOPTS"] = ADDOPTS
# Every pytest the tests start freezes what its run loaded (0.6 CPU-s less a process;
# pytest_modelsweep.pytest.context.GC_FREEZE_ENV, off in users' runs).
os.environ["MODELSWEEP_GC_FREEZE"] = "1"


@pytest.fixture(autouse=True)
def this_checkout_in_subprocesses(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Subprocesses (pytester's, their xdist workers, the CLI) import this checkout's package,
    and pytester's runs leave the unused plugins out too.

    pytester puts only its own folder on ``PYTHONPATH``; without this, a subprocess
    would import whichever pytest-modelsweep is installed, which need not be this one.
    """
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")  # which removes PYTEST_ADDOPTS
        monkeypatch.setenv("PYTEST_ADDOPTS", ADDOPTS)
        # An in-process run's test_open_loop.py is not this suite's module of that name, which
        # this process imported when it collected the suite ("import file mismatch"). The
        # suite's modules leave sys.modules while the test runs (pytester puts them back).
        for name, module in list(sys.modules.items()):
            if (
                name.startswith("test_")
                and Path(getattr(module, "__file__", None) or "").parent == TESTS
            ):
                monkeypatch.delitem(sys.modules, name)
    monkeypatch.setenv(
        "PYTHONPATH",
        os.pathsep.join([str(CHECKOUT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )


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
    return lambda *args: pytester.runpytest_subprocess(*args, *TWO_WORKERS)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A private PostgreSQL server for the session (tests/support/postgres_server.py); without the
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


# The files that take longest (seconds of one worker in a clean-clone run of the first step,
# docs/contributing.md), handed out first. xdist's loadfile otherwise hands out the files
# with the most tests first, so that these, with one to seven tests each, came last and
# ran on alone, each of the last two 70 s of real llama-server work.
LONGEST_FILES = (
    "test_decision_page.py",  # 157 s
    "test_measurement_records.py",  # 126 s
    "test_verdict_plugin.py",  # 114 s
    "test_open_loop_bench.py",  # 114 s
    "test_vllm_integration.py",  # 95 s
    "test_vllm_docker.py",  # 63 s: two vLLM launches at once
    "test_store_failure.py",  # 79 s
    "test_resume_integration.py",  # 72 s
    "test_verdict_integration.py",  # 69 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, the rest in pytest's order."""
    rank = {name: index for index, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's own ``--dist loadfile``: the project's tests measure no model (their pytester
    runs do), though their ids may name one, so modelsweep's scheduling by model is not theirs.
    Its files in collection order (``--no-loadscope-reorder``): the longest first."""
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False
    return LoadFileScheduling(config, log)
