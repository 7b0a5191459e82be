"""A run killed with SIGKILL keeps what it measured: the journal is read back by load_results and
the CLI, and the store (a SQLite file or a PostgreSQL database) holds every measurement."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import PAIR

import pytest_modelsweep
from pytest_modelsweep.store.database import Store
from pytest_modelsweep.store.results import load_results

pytest_plugins = ("pytester",)

SOURCE_ROOT = Path(pytest_modelsweep.__file__).resolve().parents[1]

# Every model records a measurement; the last test waits until the controller has
# journalled both, then kills its own pytest process (the controller of a plain run).
KILLED_RUN = """
import os
import signal
import time
from pathlib import Path

def test_records(model_name, record_measurement):
    value = {"gemma3-270m": 12.5, "smollm2-135m": 30.25}[model_name]
    record_measurement("journal-bench", value, "tokens/s", 4, params={"concurrency": 2})

def test_zz_killed_mid_run():
    journal = Path("results.json.partial.jsonl")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if journal.is_file() and journal.read_text().count('"measurement"') == 2:
            break
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)

def test_never_reached():
    pass
"""


def test_journal_of_a_killed_run_is_read_back(
    store_at: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(SOURCE_ROOT))  # this checkout's plugin in the subprocess
    pytester.makepyfile(KILLED_RUN)
    result = pytester.runpytest_subprocess(
        "--results", "results.json", "-p", "no:randomly", "--store", store_at, *PAIR, timeout=120
    )
    assert result.ret == -signal.SIGKILL, result.outlines[-20:]
    results = pytester.path / "results.json"
    assert not results.exists()
    assert (pytester.path / "results.json.partial.jsonl").is_file()

    data = load_results(results)
    assert data["summary"] == {"interrupted": True}
    assert data["run"]["run_id"]
    recorded = {
        (m["model"], m["benchmark"], m["value"], m["unit"], m["n"]) for m in data["measurements"]
    }
    assert recorded == {
        ("gemma3-270m", "journal-bench", 12.5, "tokens/s", 4),
        ("smollm2-135m", "journal-bench", 30.25, "tokens/s", 4),
    }

    cli = [sys.executable, "-m", "pytest_modelsweep.cli", "results", str(results)]
    env = {**os.environ, "PYTHONPATH": str(SOURCE_ROOT)}
    as_json = subprocess.run([*cli, "--json"], capture_output=True, text=True, env=env, check=False)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == data

    table = subprocess.run(cli, capture_output=True, text=True, env=env, check=False)
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith(f"run {data['run']['run_id']}, ")
    rows = [line for line in table.stdout.splitlines() if "journal-bench" in line]
    assert len(rows) == 2
    assert any("gemma3-270m" in row and "12.5" in row for row in rows), table.stdout
    assert any("smollm2-135m" in row and "30.2" in row for row in rows), table.stdout

    stored = Store(store_at, create=False)
    assert [(m["model"], m["value"]) for m in stored.measurements(data["run"]["run_id"])] == [
        (m["model"], m["value"]) for m in data["measurements"]
    ]
    runs = subprocess.run(
        [sys.executable, "-m", "pytest_modelsweep.cli", "runs", "--store", store_at],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert runs.returncode == 0, runs.stderr
    assert runs.stdout.startswith(data["run"]["run_id"]) and "2 measurements" in runs.stdout


def test_a_killed_run_is_listed_as_interrupted(
    store_at: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``modelsweep runs`` lists a run killed with SIGKILL (once missing) as interrupted, and a
    run that ended as it is."""
    monkeypatch.setenv("PYTHONPATH", str(SOURCE_ROOT))
    pytester.makepyfile(test_killed=KILLED_RUN)
    killed = pytester.runpytest_subprocess(
        "--results", "results.json", "-p", "no:randomly", "--store", store_at, *PAIR, timeout=120
    )
    assert killed.ret == -signal.SIGKILL
    killed_id = load_results(pytester.path / "results.json")["run"]["run_id"]
    pytester.makepyfile(test_zz="def test_fine(model_name):\n    pass\n")
    (pytester.path / "test_killed.py").unlink()
    ended = pytester.runpytest_subprocess(
        "--results", "ended.json", "--store", store_at, *PAIR, timeout=120
    )
    ended.assert_outcomes(passed=2)
    ended_id = json.loads((pytester.path / "ended.json").read_text())["run"]["run_id"]
    listing = subprocess.run(
        [sys.executable, "-m", "pytest_modelsweep.cli", "runs", "--store", store_at],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(SOURCE_ROOT)},
    )
    assert listing.returncode == 0, listing.stderr
    lines = {line.split()[0]: line for line in listing.stdout.splitlines()}
    assert lines[killed_id].endswith("2 measurements  interrupted (killed, or still running)")
    assert lines[ended_id].endswith("0 measurements")
