"""``modelsweep store copy``: a real run's history moves from SQLite into PostgreSQL and back, whole."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support.sse_server import SseServer
from support.stores import raw_sql

from pytest_modelsweep.core.measurements import Measurement
from pytest_modelsweep.core.store_location import parse_store_location
from pytest_modelsweep.store.database import Store
from pytest_modelsweep.store.upgrade import upgrade_measurement

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("gemma3-270m", "smollm2-135m")
TABLES = (
    "runs",
    "measurements",
    "items",
    "run_items",
    "test_outcomes",
    "endpoints",
    "baselines",
    "baseline_runs",
)


def modelsweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_modelsweep.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=120,
    )


def contents(store: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the store's tables, in a fixed order (measurements without their number)."""
    out = {}
    for table in TABLES:
        columns = (
            "run_id, model, benchmark, test_id, value, unit, n, outcome, measurement_json"
            if table == "measurements"
            else "name, run_id, saved_at"
            if table == "baseline_runs"
            else "*"
        )
        order = "id" if table == "measurements" else "seq" if table == "baseline_runs" else "1, 2"
        out[table] = raw_sql(store, f"SELECT {columns} FROM {table} ORDER BY {order}")[0]
    return out


@pytest.fixture(scope="module")
def measured_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store of two real GSM8K runs (both models, a fake server), saved as baseline main."""
    work = tmp_path_factory.mktemp("measured")
    (work / "test_accuracy.py").write_text((ROOT / "benches" / "test_accuracy.py").read_text())
    data = work / "test.jsonl"
    for split in ("test", "train"):
        (work / f"{split}.jsonl").write_text(
            "".join(f'{{"question": "{i}+{i}?", "answer": "#### {2 * i}"}}\n' for i in range(6))
        )
    store = work / "store.sqlite"
    with SseServer(served_names=MODELS) as server:
        for _ in range(2):  # the second run reuses the first's items
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "test_accuracy.py",
                    "-k",
                    "gsm8k",
                    "--limit",
                    "3",
                    "--gsm8k-path",
                    str(data),
                    "--gsm8k-max-tokens",
                    "4",
                    "--store",
                    str(store),
                    "--modelsweep-dir",
                    "work",
                    "--save-baseline",
                    "main",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:randomly",
                    *[f"--endpoint={m}={server.base_url}" for m in MODELS],
                    *[arg for m in MODELS for arg in ("--model", m)],
                ],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return store


def test_a_history_moves_into_postgresql_and_back(
    measured_store: Path,
    postgres_url: str,
    tmp_path: Path,
) -> None:
    source = str(measured_store)
    before = contents(source)
    assert len(before["runs"]) == 2 and len(before["baseline_runs"]) == 2
    assert before["items"] and before["test_outcomes"] and before["endpoints"]

    copied = modelsweep("store", "copy", source, postgres_url, cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    shown = parse_store_location(postgres_url).shown
    assert copied.stdout.splitlines() == [
        f"copied 2 runs ({len(before['measurements'])} measurements, {len(before['items'])} "
        f"items, {len(before['test_outcomes'])} test outcomes, 1 baseline) from {source} "
        f"into {shown}"
    ]
    assert contents(postgres_url) == before

    # everything the commands read comes out of the database as out of the file
    run_id = str(before["runs"][-1][0])
    for command in (
        ["runs"],
        ["report", run_id],
        ["compare", "main", run_id],
        ["report", "main"],
        ["merge", run_id, "-o", "merged.json"],
    ):
        from_file = modelsweep(*command, "--store", source, cwd=tmp_path)
        from_database = modelsweep(*command, "--store", postgres_url, cwd=tmp_path)
        assert from_file.returncode == from_database.returncode, from_database.stderr
        assert from_database.stdout == from_file.stdout and from_file.stdout

    back = str(tmp_path / "back" / "store.sqlite")
    assert modelsweep("store", "copy", postgres_url, back, cwd=tmp_path).returncode == 0
    assert contents(back) == before


def test_a_target_holding_the_runs_is_refused_unless_told_how(
    measured_store: Path,
    postgres_url: str,
    tmp_path: Path,
) -> None:
    source = str(measured_store)
    before = contents(source)
    assert modelsweep("store", "copy", source, postgres_url, cwd=tmp_path).returncode == 0

    again = modelsweep("store", "copy", source, postgres_url, cwd=tmp_path)
    first = sorted(str(row[0]) for row in before["runs"])[0]
    assert again.returncode == 2
    assert again.stderr.splitlines() == [
        f"modelsweep: error: {parse_store_location(postgres_url).shown}: already holds 2 of the "
        f"2 runs of {source} (first: {first}); pass --existing skip to copy only the others, or "
        "--existing replace to overwrite them"
    ]
    assert contents(postgres_url) == before

    skipped = modelsweep("store", "copy", source, postgres_url, "--existing", "skip", cwd=tmp_path)
    assert skipped.returncode == 0 and skipped.stdout.startswith("copied 0 runs (0 measurements")
    replaced = modelsweep(
        "store", "copy", source, postgres_url, "--existing", "replace", cwd=tmp_path
    )
    assert replaced.returncode == 0 and replaced.stdout.startswith("copied 2 runs")
    assert contents(postgres_url) == before  # replaced, not doubled


def test_a_source_that_is_not_there_is_one_line(postgres_url: str, tmp_path: Path) -> None:
    result = modelsweep("store", "copy", str(tmp_path / "none.sqlite"), postgres_url, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"modelsweep: error: {tmp_path / 'none.sqlite'}: no store there; run pytest benches "
        "first or pass --store"
    ]


def test_a_store_of_results_schema_2_is_copied_as_schema_3(tmp_path: Path) -> None:
    """A store written before results schema 3 (store schema 4) reads, and its copy holds its
    measurements in schema 3, read into the records the old rows read into."""
    golden = json.loads((ROOT / "tests/data/results_v2_every_kind.json").read_text("utf-8"))
    old_rows = [
        m for m in golden["measurements"] if m["benchmark"] in ("capacity_ratio", "open_loop")
    ]
    source, target = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    store = Store(source)
    store.add_run("r1", "s", {"started_at": "2026-01-01T00:00:00"})
    for row in old_rows:
        store.add_measurement("r1", row)
    store.close()
    with sqlite3.connect(source) as db:  # as results schema 2 and store schema 4 left it
        ids = [row_id for (row_id,) in db.execute("SELECT id FROM measurements ORDER BY id")]
        for row_id, row in zip(ids, old_rows):
            db.execute(
                "UPDATE measurements SET measurement_json = ? WHERE id = ?",
                (json.dumps(row), row_id),
            )
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema'")
    result = modelsweep("store", "copy", str(source), str(target), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    copied = [
        json.loads(text)
        for (text,) in raw_sql(
            str(target), "SELECT measurement_json FROM measurements ORDER BY id"
        )[0]
    ]
    assert copied[0]["stats"]["ratio"]["candidate"]["knob"] == "concurrency"
    assert "arrivals" not in copied[1]["stats"]["repeats"][0]["open_loop"]
    for row, text in zip(old_rows, copied):
        assert Measurement.from_dict(text) == Measurement.from_dict(upgrade_measurement(row))
