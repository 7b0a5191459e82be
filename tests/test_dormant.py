"""The plugin stays out of the way of pytest runs that do not use it.

Installed into an environment, the plugin is loaded by every pytest run there: a run
that collects no modelsweep test and gives no modelsweep option must keep the user's
xdist scheduling, make no run state, write nothing and import nothing heavy.
"""

from __future__ import annotations

import json

import pytest
from support.paths import PAIR, TWO_WORKERS

pytest_plugins = ("pytester",)

PLAIN_FILES = {
    "test_a": """
        import os
        def test_1(): open(f"ran-test_a-1-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "w").close()
        def test_2(): open(f"ran-test_a-2-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "w").close()
        def test_3(): open(f"ran-test_a-3-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "w").close()
    """,
    "test_b": """
        import os
        def test_1(): open(f"ran-test_b-1-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "w").close()
        def test_2(): open(f"ran-test_b-2-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "w").close()
        def test_3(): open(f"ran-test_b-3-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "w").close()
    """,
}

# Written at the end of the run: which of the plugin's heavier parts were imported.
MODULES_PROBE = """
import json, sys

def pytest_unconfigure(config):
    watched = ["httpx", "numpy", "sqlite3", "pytest_modelsweep.pytest.state", "pytest_modelsweep.api.evaluation",
               "pytest_modelsweep.serving.pool", "pytest_modelsweep.core.stats",
               "pytest_modelsweep.store.sqlite", "pytest_modelsweep.store.database",
               "sqlalchemy", "psycopg"]
    if not hasattr(config, "workerinput"):
        with open("imported.json", "w") as out:
            json.dump([name for name in watched if name in sys.modules], out)
"""


def workers_by_file(pytester: pytest.Pytester) -> dict[str, set[str]]:
    """File (or model) → the xdist workers that ran its tests (from the files the tests wrote)."""
    ran: dict[str, set[str]] = {}
    for path in pytester.path.glob("ran-*"):
        module, _, worker = path.name.removeprefix("ran-").rsplit("-", 2)
        ran.setdefault(module, set()).add(worker)
    return ran


def test_a_plain_project_keeps_dist_loadfile(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**PLAIN_FILES)
    result = pytester.runpytest_subprocess(*TWO_WORKERS, "--dist", "loadfile", "-v")
    result.assert_outcomes(passed=6)
    ran = workers_by_file(pytester)
    assert sorted(ran) == ["test_a", "test_b"]
    # loadfile: each file's tests on one worker, the two files on the two workers
    assert all(len(workers) == 1 for workers in ran.values()), ran
    assert ran["test_a"] != ran["test_b"], ran


def test_a_plain_project_keeps_dist_load(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**PLAIN_FILES)
    result = pytester.runpytest_subprocess(*TWO_WORKERS, "-v")
    result.assert_outcomes(passed=6)
    ran = workers_by_file(pytester)
    # load: tests are handed out one by one, so a file's tests go to both workers
    assert any(len(workers) == 2 for workers in ran.values()), ran


def test_a_plain_run_makes_no_run_state_and_imports_nothing_heavy(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(**PLAIN_FILES)
    pytester.makeconftest(MODULES_PROBE)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=6)
    imported = json.loads((pytester.path / "imported.json").read_text())
    assert imported == [], f"a run without modelsweep tests imported {imported}"
    assert not (pytester.path / ".modelsweep").exists()
    assert "modelsweep" not in result.stdout.str()


def test_a_modelsweep_option_wakes_the_plugin(pytester: pytest.Pytester) -> None:
    """An option of ours makes the run state at once, so that a bad value fails early."""
    pytester.makepyfile(**PLAIN_FILES)
    pytester.makeconftest(MODULES_PROBE)
    result = pytester.runpytest_subprocess("-q", "--repeats", "2")
    result.assert_outcomes(passed=6)
    imported = json.loads((pytester.path / "imported.json").read_text())
    assert "pytest_modelsweep.pytest.state" in imported


def test_a_collected_modelsweep_test_wakes_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_m="""
        def test_m(model_name, record_measurement):
            record_measurement("w", 1.0, "", 1)
        """
    )
    result = pytester.runpytest_subprocess("-q", "--model", "smollm2-135m", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess("-q", *PAIR)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*modelsweep measurements*"])


@pytest.mark.parametrize("dist", ["loadfile", "loadscope", "loadgroup", "worksteal"])
def test_modelsweep_tests_refuse_a_dist_mode_that_splits_a_model(
    pytester: pytest.Pytester, dist: str
) -> None:
    pytester.makepyfile(
        test_m="""
        def test_m(model_name):
            pass
        """,
        test_n="""
        def test_n(model_name):
            pass
        """,
    )
    result = pytester.runpytest_subprocess(*TWO_WORKERS, "--dist", dist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --dist {dist} would spread one model's tests over several xdist workers, but "
            "each model's server must run on exactly one worker (one chip per model): use -n N "
            "alone (modelsweep then schedules by model), or --dist each to measure every model on "
            "every worker"
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_modelsweep_tests_under_dist_each_run_on_every_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_m="""
        def test_m(model_name):
            pass
        """
    )
    result = pytester.runpytest_subprocess(*TWO_WORKERS, "--dist", "each", *PAIR)
    result.assert_outcomes(passed=4)  # 2 models x 2 workers


def test_modelsweep_tests_under_plain_n_are_scheduled_by_model(pytester: pytest.Pytester) -> None:
    """Beside plain tests, each model's tests stay on one worker (plain ones go anywhere)."""
    pytester.makepyfile(
        test_m="""
        import os
        import pytest

        @pytest.mark.parametrize("i", range(4))
        def test_m(model_name, i):
            open(f"ran-{model_name}-{i}-{os.environ['PYTEST_XDIST_WORKER']}", "w").close()
        """,
        **PLAIN_FILES,
    )
    result = pytester.runpytest_subprocess(*TWO_WORKERS, *PAIR)
    result.assert_outcomes(passed=14)
    ran = workers_by_file(pytester)
    assert len(ran["gemma3-270m"]) == 1 and len(ran["smollm2-135m"]) == 1, ran
