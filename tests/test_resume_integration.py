"""Kill -9 in the middle of a real GSM8K run, re-run it: nothing completed is sent again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy
from support.paths import REAL_CACHE, SHARED_DATA, embedded_sweep_with
from support.requirements import SHARED_DATA_HINT, need
from support.stores import raw_sql

from pytest_modelsweep.core.store_location import parse_store_location

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
LIMIT = 4
KILL_AFTER = 2
"""Items stored before the kill: the server has one slot, so they are answered one after
another (about 1.5 s each) and the kill lands between two of them, not after a batch that ends
at once. One thread: a server of two threads spins on its barrier whenever another test takes
one of the two cores (beside the real verdict run both took four times their time alone)."""


def command(tmp: Path, store: str, results: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        str(ROOT / "benches" / "test_accuracy.py"),
        # the candidate alone: its verdict would have no reference to judge against
        "-m",
        "gsm8k and not verdict",
        "--model",
        "smollm2-135m",
        "--limit",
        str(LIMIT),
        "--gsm8k-max-tokens",
        "32",
        "--gsm8k-path",
        str(GSM8K),
        "--sweep",
        str(embedded_sweep_with(tmp / "one-slot.toml", max_num_seqs=1, threads=1)),
        "--store",
        store,
        "--modelsweep-dir",
        str(tmp / "work"),
        "--results",
        str(results),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
    ]


def stored_items(store: str) -> dict[str, str]:
    path = parse_store_location(store).path
    if path is not None and not path.is_file():
        return {}  # not made yet (and not to be made here)
    return {
        str(item_id): str(record)
        for item_id, record in raw_sql(store, "SELECT item_id, record_json FROM items")[0]
    }


def test_sigkill_midway_then_resume(tmp_path: Path) -> None:
    """On a SQLite store; the same kill and resume on PostgreSQL, with several writers at
    once, is tests/test_store_kill.py's (the store interface is one)."""
    need(GSM8K.is_file(), f"GSM8K data not found at {GSM8K}; {SHARED_DATA_HINT}")
    env = {**os.environ, "MODELSWEEP_CACHE": str(REAL_CACHE)}
    store = str(tmp_path / "store.sqlite")
    first = subprocess.Popen(
        command(tmp_path, store, tmp_path / "killed.json"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 600
    done: dict[str, str] = {}
    while time.monotonic() < deadline and first.poll() is None:
        try:
            done = stored_items(store)
        except sqlalchemy.exc.DBAPIError:  # no tables yet
            done = {}
        if len(done) >= KILL_AFTER:
            break
        time.sleep(0.2)
    assert first.poll() is None, "the run ended before it could be killed"
    os.kill(first.pid, signal.SIGKILL)
    first.wait(30)
    done = stored_items(store)  # everything committed up to the kill
    assert KILL_AFTER <= len(done) < LIMIT

    # the killed run's server went down with it (it is asked to on its parent's death)
    log = next((tmp_path / "work" / "runs").glob("*/logs/smollm2-135m.llama-server.log"))
    port = log.read_text().split("listening on http://127.0.0.1:")[1].split()[0]
    for _ in range(30):  # the kernel delivers the parent-death signal at once; allow for load
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        except httpx.TransportError:  # refused, or reset while it went down
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the killed run's llama-server still answers on port {port}")

    second = subprocess.run(
        command(tmp_path, store, tmp_path / "resumed.json"),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert second.returncode == 0, second.stdout[-3000:]
    usable = {i for i, r in done.items() if json.loads(r)["error"] is None}
    assert (
        f"gsm8k smollm2-135m: reused {len(usable)} stored items, sending {LIMIT - len(usable)}"
        in second.stdout
    )
    resumed = json.loads((tmp_path / "resumed.json").read_text())["measurements"][0]
    assert resumed["n"] == LIMIT and resumed["stats"]["reused"] == len(usable)
    assert resumed["stats"]["sent"] == LIMIT - len(usable)
    by_id = {item["item_id"]: item for item in resumed["items"]}
    for item_id in usable:  # the completed items are the stored ones, byte for byte
        assert by_id[item_id] == json.loads(done[item_id])

    # An uninterrupted run in a fresh store sends the same requests for the same items.
    fresh = subprocess.run(
        command(tmp_path, str(tmp_path / "fresh.sqlite"), tmp_path / "fresh.json"),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert fresh.returncode == 0, fresh.stdout[-3000:]
    uninterrupted = json.loads((tmp_path / "fresh.json").read_text())["measurements"][0]
    assert uninterrupted["stats"]["reused"] == 0 and uninterrupted["stats"]["sent"] == LIMIT
    assert [(i["item_id"], i["prompt_hash"]) for i in uninterrupted["items"]] == [
        (i["item_id"], i["prompt_hash"]) for i in resumed["items"]
    ]
    assert uninterrupted["params"] == resumed["params"]
