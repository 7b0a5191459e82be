"""--sweep-run: the comparison finder's search order over the runs of one sweep run, waiting
for a host that is still measuring, and the store's record of those runs (schema 3).

How the finder looks, the way tests/test_comparisons.py checks it: each run of the sweep run
leaves in the store what a host's accuracy and throughput benches leave (the endpoint, scored
items, the measurement), and joins the sweep run as the plugin does (``add_run`` with the
name, ``plan_run`` once collected, ``finish_run`` at the end). The whole way through pytest —
real benches on two "hosts", a judging run that serves nothing — is tests/test_multihost.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from support.comparison_records import record_items, record_rate
from support.stores import raw_sql

from pytest_modelsweep.core.options import parse_sweep_run
from pytest_modelsweep.judging.comparisons import ComparisonFinder, Failed, Found, Missing
from pytest_modelsweep.store.database import SCHEMA_VERSION, Store
from pytest_modelsweep.store.sweep_run import unsettled_failures

JUDGE = "judge-run"
SWEEP_RUN = "sr-1"


def join(
    store: Store,
    run_id: str,
    started_at: str,
    *,
    sweep_run: str | None = SWEEP_RUN,
    models: list[str] | None = None,
    finished: bool = True,
    host: str = "",
) -> None:
    """A run as the plugin records it: joined at its start, planned once collected, finished
    at its end (``finished=False``: still running, or killed)."""
    run = {"started_at": started_at, "machine": {"hostname": host or f"host-of-{run_id}"}}
    store.add_run(run_id, "s", run, sweep_run=sweep_run)
    if models is not None:
        store.plan_run(run_id, models)
    if finished:
        store.finish_run(run_id, started_at.replace("T00", "T01"))


def judge(
    store: Store, *, sweep_run: str | None = SWEEP_RUN, wait_s: float = 30.0, poll_s: float = 0.02
) -> ComparisonFinder:
    """The finder of a judging run (it measures nothing itself)."""
    return ComparisonFinder(store, JUDGE, wait_s=wait_s, sweep_run=sweep_run, poll_s=poll_s)


def test_a_side_comes_from_the_runs_of_the_sweep_run_and_nowhere_else(store_at: str) -> None:
    store = Store(store_at)
    join(store, "other-sweep", "2026-01-01T00:00:00", sweep_run="sr-0", models=["ref"])
    record_items(store, "other-sweep", "ref", ["q1", "q2"])
    join(store, "host-a", "2026-01-02T00:00:00", models=["ref"])
    record_items(store, "host-a", "ref", ["q1", "q2"])
    join(store, "host-b", "2026-01-02T00:00:01", models=["cand"])
    record_items(store, "host-b", "cand", ["q1", "q2"])
    join(store, "no-sweep", "2026-01-03T00:00:00", sweep_run=None)  # the latest stored run
    record_items(store, "no-sweep", "ref", ["q1", "q2"])
    join(store, JUDGE, "2026-01-04T00:00:00", models=[], finished=False)

    ref = judge(store).items("ref", "gsm8k", expected_tests=[])
    cand = judge(store).items("cand", "gsm8k", expected_tests=[], match_ids=["q1", "q2"])
    assert isinstance(ref, Found) and ref.side.run_id == "host-a"
    assert isinstance(cand, Found) and cand.side.run_id == "host-b"
    assert [r.item_id for r in ref.side.items] == ["q1", "q2"]
    # without --sweep-run: the latest stored run, as before
    latest = judge(store, sweep_run=None).items("ref", "gsm8k", expected_tests=[])
    assert isinstance(latest, Found) and latest.side.run_id == "no-sweep"
    # the runs of another sweep run are not used, though they hold the model
    elsewhere = judge(store, sweep_run="sr-0").items("cand", "gsm8k", expected_tests=[])
    assert elsewhere == Missing(
        f"no gsm8k items of cand in sweep run sr-0 (1 run in the store {store.path}); "
        "measure it on a host with --sweep-run sr-0 --model cand"
    )
    assert [m.run_id for m in store.sweep_run_members(SWEEP_RUN)] == ["host-a", "host-b", JUDGE]


def test_a_measurement_at_a_setting_comes_from_the_sweep_run(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite")
    join(store, "host-a", "2026-01-02T00:00:00", models=["ref"])
    record_rate(store, "host-a", "ref", 16, [90.0, 95.0])
    join(store, "later", "2026-01-03T00:00:00", sweep_run="sr-2", models=["ref"])
    record_rate(store, "later", "ref", 16, [10.0, 11.0])
    setting = {"concurrency": 16, "prompt_tokens": None}
    found = judge(store).measurement("ref", "throughput", setting, expected_tests=[])
    assert isinstance(found, Found) and found.side.run_id == "host-a"
    assert found.side.measurement.stats.repeat_values == (90.0, 95.0)  # type: ignore[union-attr]
    latest = judge(store, sweep_run=None).measurement(
        "ref", "throughput", setting, expected_tests=[]
    )
    assert isinstance(latest, Found) and latest.side.run_id == "later"
    absent = judge(store).measurement(
        "ref", "throughput", {"concurrency": 4, "prompt_tokens": None}, expected_tests=[]
    )
    assert absent == Missing(
        "ref has no throughput result at concurrency 4 in sweep run sr-1: run host-a on "
        "host-of-host-a measured ref and recorded none (its throughput test failed, was skipped "
        "or was not selected there); measure it with --sweep-run sr-1 --model ref"
    )


def test_waits_for_a_host_that_is_still_measuring_the_model(store_at: str) -> None:
    store = Store(store_at)
    join(store, "host-a", "2026-01-02T00:00:00", finished=False)  # not collected yet

    def host_a() -> None:
        other = Store(store_at)
        time.sleep(0.2)
        other.plan_run("host-a", ["ref"])
        time.sleep(0.3)
        record_items(other, "host-a", "ref", ["q1", "q2"])
        other.finish_run("host-a", "2026-01-02T01:00:00")
        other.close()

    writer = threading.Thread(target=host_a)
    writer.start()
    started = time.monotonic()
    outcome = judge(store, wait_s=60).items("ref", "gsm8k", expected_tests=[])
    writer.join()
    assert isinstance(outcome, Found) and outcome.side.run_id == "host-a"
    assert 0.4 < time.monotonic() - started < 30


def test_gives_up_on_a_host_that_does_not_finish_naming_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite")
    join(store, "host-a", "2026-01-02T00:00:00", models=["ref"], finished=False, host="tpu-7")
    sleeps: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    finder = ComparisonFinder(
        store, JUDGE, wait_s=10, sweep_run=SWEEP_RUN, poll_s=1, clock=lambda: now[0], sleep=sleep
    )
    outcome = finder.items("ref", "gsm8k", expected_tests=[])
    assert outcome == Failed(
        "ref has no gsm8k items in sweep run sr-1 after waiting 10s for run host-a on tpu-7, "
        "which has not finished; raise --verdict-wait if it is just slow"
    )
    assert len(sleeps) == 10
    assert finder.items("ref", "gsm8k", expected_tests=[]) == outcome  # no second wait
    assert len(sleeps) == 10


def test_runs_that_measure_other_models_are_not_waited_for(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite")
    join(store, "host-b", "2026-01-02T00:00:00", models=["cand"], finished=False)
    started = time.monotonic()
    outcome = judge(store, wait_s=60).items("ref", "gsm8k", expected_tests=[])
    assert isinstance(outcome, Missing) and time.monotonic() - started < 10


def test_a_host_run_again_speaks_for_its_killed_run(tmp_path: Path) -> None:
    """A run killed with SIGKILL never finishes; the host's next run of the same sweep run
    supersedes it, so nothing waits for the dead one."""
    store = Store(tmp_path / "store.sqlite")
    join(store, "killed", "2026-01-02T00:00:00", models=["ref"], finished=False)
    join(store, "again", "2026-01-02T02:00:00", models=["ref"])
    record_items(store, "again", "ref", ["q1"])
    started = time.monotonic()
    outcome = judge(store, wait_s=60).items("ref", "gsm8k", expected_tests=[])
    assert isinstance(outcome, Found) and outcome.side.run_id == "again"
    assert time.monotonic() - started < 10


def test_the_store_of_schema_2_is_upgraded_with_its_runs_kept(store_at: str) -> None:
    raw_sql(
        store_at,
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO meta VALUES ('schema', '2')",
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, started_at TEXT NOT NULL, "
        "sweep_name TEXT NOT NULL, run_json TEXT NOT NULL)",
        "INSERT INTO runs VALUES ('old-run', '2025-01-01T00:00:00', 's', '{}')",
        "CREATE TABLE baseline_runs (seq INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "run_id TEXT NOT NULL, saved_at TEXT NOT NULL, UNIQUE (name, run_id))",
        "INSERT INTO baseline_runs VALUES (1, 'main', 'old-run', '2025-01-01T00:00:00')",
    )
    store = Store(store_at)
    assert raw_sql(store_at, "SELECT value FROM meta WHERE key = 'schema'") == [
        [(str(SCHEMA_VERSION),)]
    ]
    assert store.runs() == [
        {
            "run_id": "old-run",
            "started_at": "2025-01-01T00:00:00",
            "sweep_name": "s",
            "measurements": 0,
            "sweep_run": None,
            "status": "",
        }
    ]  # whether it ended is not known
    assert store.baseline_entries("main") == [["old-run"]]
    join(store, "new-run", "2025-02-01T00:00:00", models=["m"])
    assert [m.models for m in store.sweep_run_members(SWEEP_RUN)] == [("m",)]
    store.close()
    assert Store(store_at).runs(SWEEP_RUN)[0]["run_id"] == "new-run"  # reopening changes nothing


def test_a_baseline_saved_from_a_sweep_run_stands_for_its_runs_started_by_then(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store.sqlite")
    join(store, "host-a", "2026-01-02T00:00:00", models=["ref"])
    join(store, "host-b", "2026-01-02T00:00:05", models=["cand"])
    join(store, JUDGE, "2026-01-02T00:10:00", models=[])
    store.save_baseline("main", JUDGE, "2026-01-02T00:20:00", sweep_run=SWEEP_RUN)
    join(store, "late", "2026-01-02T00:30:00", models=["cand"])  # after the save: not in it
    store.save_baseline("main", "plain", "2026-01-03T00:00:00")
    assert store.baseline_entries("main") == [["host-a", "host-b", JUDGE], ["plain"]]
    assert store.baseline_runs("main") == [JUDGE, "plain"]


@pytest.mark.parametrize("text", ["", "a b", "-lead", "x/y", "é", "x" * 129])
def test_a_sweep_run_name_of_other_characters_is_refused(text: str) -> None:
    from argparse import ArgumentTypeError

    with pytest.raises(ArgumentTypeError, match="expected a name of letters, digits"):
        parse_sweep_run(text)
    assert parse_sweep_run(" 123456789 ") == "123456789"
    assert parse_sweep_run("2026-11-30.a_b:c") == "2026-11-30.a_b:c"


def test_a_test_that_failed_on_a_host_and_passed_when_run_again_is_settled(
    tmp_path: Path,
) -> None:
    """What --save-baseline of a sweep run refuses on: the tests whose latest outcome, over
    the runs of the sweep run, is a failure."""
    store = Store(tmp_path / "store.sqlite")
    for run_id, started in (
        ("first", "2026-01-02T00:00:00"),
        ("again", "2026-01-02T01:00:00"),
        ("other", "2026-01-02T00:30:00"),
    ):
        join(store, run_id, started, models=["m"])
    store.add_outcome("first", "test_gsm8k[a]", "failed")
    store.add_outcome("again", "test_gsm8k[a]", "passed")
    store.add_outcome("other", "test_gsm8k[b]", "failed")
    store.add_outcome("first", "test_bfcl[a]", "passed")
    order = [m.run_id for m in store.sweep_run_members(SWEEP_RUN)]
    assert order == ["first", "other", "again"]
    assert unsettled_failures(store.test_outcomes(order), order) == [
        ("other", "test_gsm8k[b]", "failed")
    ]
