"""Pairing guard and the store (SQLite and PostgreSQL): refusals name both values; no row is lost."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from support.stores import raw_sql

from pytest_modelsweep.core.records import ItemRecord
from pytest_modelsweep.judging.pairing import (
    PairingError,
    check_same_items,
    check_same_serving,
)
from pytest_modelsweep.store.database import SCHEMA_VERSION, Store


def prov(**overrides: object) -> dict:
    base = {
        "server_name": "vllm",
        "server_version": "0.30.1",
        "image_digest": "sha256:aaa",
        "served_name": "m",
        "model_source": "hf:o/m",
        "server_settings": {
            "max_model_len": 4096,
            "max_num_seqs": 16,
            "prefix_caching": True,
            "n_params": 1,
        },
    }
    base.update(overrides)
    return base


def test_same_serving_pairs_even_when_models_differ() -> None:
    other = prov(
        served_name="x",
        model_source="hf:o/x",
        server_settings={
            "max_model_len": 4096,
            "max_num_seqs": 16,
            "prefix_caching": True,
            "n_params": 999,
        },
    )
    check_same_serving("cand", prov(), "ref", other)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"image_digest": "sha256:bbb"},
            "image_digest differs (cand: 'sha256:bbb', ref: 'sha256:aaa')",
        ),
        ({"server_version": "0.31.0"}, "server_version differs (cand: '0.31.0', ref: '0.30.1')"),
        (
            {
                "server_settings": {
                    "max_model_len": 2048,
                    "max_num_seqs": 16,
                    "prefix_caching": True,
                }
            },
            "serving setting max_model_len differs (cand: 2048, ref: 4096)",
        ),
    ],
)
def test_unlike_serving_is_refused_naming_both_values(overrides: dict, expected: str) -> None:
    with pytest.raises(PairingError) as info:
        check_same_serving("cand", prov(**overrides), "ref", prov())
    assert expected in str(info.value)
    assert str(info.value).startswith("refusing to pair cand with ref")


def item(
    item_id: str, correct: bool = True, data_hash: str = "d", prompt_hash: str = "p"
) -> ItemRecord:
    return ItemRecord(
        item_id=item_id, prompt_hash=prompt_hash, correct=correct, response="r", data_hash=data_hash
    )


def test_item_sets_must_match() -> None:
    check_same_items("a", [item("1"), item("2")], "b", [item("2"), item("1")])
    with pytest.raises(PairingError, match=r"1 only in a, e.g. \['3'\]; 0 only in b"):
        check_same_items("a", [item("1"), item("3")], "b", [item("1")])
    with pytest.raises(PairingError, match="same id but different source data"):
        check_same_items("a", [item("1", data_hash="x")], "b", [item("1", data_hash="y")])


def test_store_reuses_only_matching_keys(store_at: str) -> None:
    store = Store(store_at)
    store.add_run("r1", "embedded", {"started_at": "t"})
    store.add_item("r1", "m", "gsm8k", "key1", item("q1", prompt_hash="h1"))
    store.add_item("r1", "m", "gsm8k", "key1", item("q2", prompt_hash="h2"))
    found = store.stored_items("key1", "gsm8k", [("q1", "h1"), ("q2", "changed"), ("q3", "h3")])
    assert sorted(found) == ["q1"]
    assert store.stored_items("key2", "gsm8k", [("q1", "h1")]) == {}
    assert store.stored_items("key1", "bfcl", [("q1", "h1")]) == {}
    store.add_item("r2", "m", "gsm8k", "key1", found["q1"], reused=True)
    assert [r.item_id for r in store.run_items("r2", "m", "gsm8k")] == ["q1"]
    assert [r.item_id for r in store.run_items("r1", "m", "gsm8k")] == ["q1", "q2"]


def test_store_measurements_and_latest_run(store_at: str) -> None:
    store = Store(store_at)
    for run in ("r1", "r2"):
        store.add_measurement(
            run,
            {
                "model": "m",
                "benchmark": "gsm8k",
                "value": 0.5,
                "unit": "accuracy",
                "n": 2,
                "test_id": "t",
            },
        )
    assert store.measurement_of("r2", "m", "gsm8k")["value"] == 0.5
    assert store.measurement_of("r2", "m", "bfcl") is None
    assert store.latest_run_with("m", "gsm8k", exclude="r2") == "r1"
    assert store.latest_run_with("other", "gsm8k") is None


def _write_items(store_at: str, worker: int, count: int) -> None:
    store = Store(store_at)
    for i in range(count):
        store.add_item("run", f"m{worker}", "gsm8k", "k", item(f"{worker}-{i}"))
        # sent again (a retried write, a re-run): still one row
        store.add_item("run", f"m{worker}", "gsm8k", "k", item(f"{worker}-{i}"))
    store.close()


@pytest.mark.parametrize("made_first", [True, False], ids=["existing", "new"])
def test_concurrent_writers_lose_no_rows(store_at: str, made_first: bool) -> None:
    """Three processes write into one store, made before or by all of them at once."""
    if made_first:
        Store(store_at).close()
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_write_items, args=(store_at, w, 150)) for w in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    store = Store(store_at)
    assert [len(store.run_items("run", f"m{w}", "gsm8k")) for w in range(3)] == [150, 150, 150]
    assert raw_sql(store_at, "SELECT COUNT(*) FROM items", "SELECT COUNT(*) FROM run_items") == [
        [(450,)],
        [(450,)],
    ]


def test_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    from pytest_modelsweep.core.errors import DataError

    with pytest.raises(
        DataError, match=r"bad.sqlite: not a SQLite database \(file is not a database\)"
    ):
        Store(bad)
    assert bad.read_bytes() == b"this is not sqlite" * 100


def test_saving_a_baseline_again_adds_the_run_to_its_history(store_at: str) -> None:
    store = Store(store_at)
    for i in range(7):
        history = store.save_baseline("main", f"r{i}", f"2024-01-0{i + 1}", keep=5)
    assert history == ["r2", "r3", "r4", "r5", "r6"]  # the newest 5, oldest first
    assert store.baselines() == {"main": "r6"}
    assert store.save_baseline("main", "r4", "2024-01-09") == ["r2", "r3", "r5", "r6", "r4"]
    assert store.baseline_runs("other") == []


def test_a_store_of_the_old_schema_opens_with_its_baseline_as_the_first_history_entry(
    store_at: str,
) -> None:
    raw_sql(
        store_at,
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO meta VALUES ('schema', '1')",
        "CREATE TABLE baselines (name TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
        "saved_at TEXT NOT NULL)",
        "INSERT INTO baselines VALUES ('main', 'old-run', '2024-01-01T00:00:00+00:00')",
    )
    store = Store(store_at)
    assert raw_sql(store_at, "SELECT value FROM meta WHERE key = 'schema'") == [
        [(str(SCHEMA_VERSION),)]
    ]  # upgraded on opening
    assert store.baseline_runs("main") == ["old-run"]
    assert store.save_baseline("main", "new-run", "2024-02-01") == ["old-run", "new-run"]
    store.close()
    assert Store(store_at).baseline_runs("main") == ["old-run", "new-run"]  # reopening adds nothing
