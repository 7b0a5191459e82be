"""Writers killed with SIGKILL mid-run, then run again: nothing completed is sent twice, nothing is lost.

Four pytest processes write one PostgreSQL store at once (as runs on four hosts
would), one writes a SQLite file; each measures its own model's benchmark,
written with the public ``evaluate`` API, against one fake server that counts every
request. All are killed when each has stored some of its items; the same commands
run again must send exactly the items that were not stored, and end with every
item stored once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy
from support.paths import write_sweep
from support.sse_server import SseServer
from support.stores import raw_sql

from pytest_modelsweep.core.store_location import parse_store_location

ROOT = Path(__file__).resolve().parents[1]
ITEMS = 24
SLOW = "slow:0.2"  # the fake server waits this long before each of an answer's chunks

BENCH = f'''
import pytest
from pytest_modelsweep import EvalItem


def says_w0(completion, item):
    return completion.text.strip().startswith("w0")


@pytest.mark.modelsweep_benchmark("echo")
def test_echo(evaluate):
    items = [EvalItem(id=f"q{{i:02d}}", prompt=f"q{{i:02d}}: say w0", max_tokens=4,
                      extra_body={{"test_fault": "{SLOW}"}}) for i in range({ITEMS})]
    evaluate("echo", items, says_w0, concurrency=2)
'''


def writer(tmp: Path, sweep: Path, model: str, url: str, store: str, results: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        str(tmp / "test_echo.py"),
        "-k",
        "not verdict",
        "--sweep",
        str(sweep),
        "--model",
        model,
        f"--endpoint={model}={url}",
        "--store",
        store,
        "--modelsweep-dir",
        str(tmp / f"work-{model}"),
        "--results",
        str(tmp / results),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
    ]


def stored(store: str) -> dict[str, set[str]]:
    """Model → the ids of its items in the store (committed)."""
    path = parse_store_location(store).path
    if path is not None and not path.is_file():
        return {}
    try:
        rows = raw_sql(store, "SELECT model, item_id FROM items")[0]
    except sqlalchemy.exc.DBAPIError:  # no tables yet
        return {}
    found: dict[str, set[str]] = {}
    for model, item_id in rows:
        found.setdefault(str(model), set()).add(str(item_id))
    return found


@pytest.mark.parametrize(("backend", "writers"), [("postgresql", 4), ("sqlite", 1)])
def test_killed_writers_resume_without_sending_twice_or_losing(
    backend: str,
    writers: int,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    store = (
        request.getfixturevalue("postgres_url")
        if backend == "postgresql"
        else str(tmp_path / "store.sqlite")
    )
    models = [f"m{k}" for k in range(writers)]
    sweep = write_sweep(tmp_path / "sweep.toml", models)
    (tmp_path / "test_echo.py").write_text(BENCH)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with SseServer(served_names=tuple(models)) as server:
        first = [
            subprocess.Popen(
                writer(tmp_path, sweep, m, server.base_url, store, f"killed-{m}.json"),
                cwd=tmp_path,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for m in models
        ]
        deadline = time.monotonic() + 300
        done: dict[str, set[str]] = {}
        while time.monotonic() < deadline:
            done = stored(store)
            if all(len(done.get(m, ())) >= 3 for m in models):
                break
            assert all(p.poll() is None for p in first), "a writer ended before the kill"
            time.sleep(0.1)
        for process in first:
            os.kill(process.pid, signal.SIGKILL)
        for process in first:
            process.wait(30)
        done = stored(store)  # everything committed up to the kill
        assert all(3 <= len(done[m]) < ITEMS for m in models), {m: len(done[m]) for m in models}

        second = [
            subprocess.Popen(
                writer(tmp_path, sweep, m, server.base_url, store, f"resumed-{m}.json"),
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for m in models
        ]
        for process in second:
            output, _ = process.communicate(timeout=600)
            assert process.returncode == 0, output[-3000:]
        sent = Counter(
            (body["model"], body["prompt"][:3]) for body in server.stats.bodies if "prompt" in body
        )

    for model in models:
        # nothing that had completed was sent again; everything else was sent by the re-run
        assert all(sent[(model, item_id)] == 1 for item_id in done[model]), model
        assert all(sent[(model, f"q{i:02d}")] >= 1 for i in range(ITEMS)), model
        resumed = json.loads((tmp_path / f"resumed-{model}.json").read_text())["measurements"]
        assert [(m["n"], m["stats"]["reused"], m["stats"]["sent"]) for m in resumed] == [
            (ITEMS, len(done[model]), ITEMS - len(done[model]))
        ]
    # nothing lost, nothing doubled: every item stored once, the re-runs' links complete
    assert stored(store) == {m: {f"q{i:02d}" for i in range(ITEMS)} for m in models}
    assert raw_sql(store, "SELECT COUNT(*) FROM items")[0] == [(ITEMS * writers,)]
    links = raw_sql(store, "SELECT run_id, COUNT(*), SUM(reused) FROM run_items GROUP BY run_id")[0]
    resumed_runs = {
        json.loads((tmp_path / f"resumed-{m}.json").read_text())["run"]["run_id"]: len(done[m])
        for m in models
    }
    assert {str(r): (int(n), int(reused)) for r, n, reused in links if str(r) in resumed_runs} == {
        r: (ITEMS, k) for r, k in resumed_runs.items()
    }
