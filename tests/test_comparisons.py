"""comparisons.ComparisonFinder: each side found in this run or the store, missing, or failed."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import pytest
from support.comparison_records import (
    PROV,
    record_items,
    record_rate,
)

from pytest_modelsweep.core.measurements import ThroughputStats
from pytest_modelsweep.core.records import ItemRecord
from pytest_modelsweep.judging.comparisons import (
    ComparisonFinder,
    Failed,
    Found,
    Missing,
    ModelItems,
    ModelMeasurement,
    setting_text,
)
from pytest_modelsweep.store.database import Store

RUN = "run-now"


def repeat_values(side: ModelMeasurement) -> tuple[float, ...]:
    stats = side.measurement.stats
    assert isinstance(stats, ThroughputStats)
    return stats.repeat_values


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store.sqlite")


def finder(store: Store, wait_s: float = 30.0) -> ComparisonFinder:
    return ComparisonFinder(store, RUN, wait_s=wait_s, poll_s=0.02)


# --------------------------------------------------------------------------- accuracy items


def test_items_of_this_run_are_found_without_waiting(store: Store) -> None:
    record_items(store, "earlier", "m", ["q1", "q2"])
    record_items(store, RUN, "m", ["q1", "q2", "q3"])
    outcome = finder(store).items("m", "gsm8k", expected_tests=["test_gsm8k[m]"])
    assert isinstance(outcome, Found)
    assert outcome.side.run_id == RUN
    assert [r.item_id for r in outcome.side.items] == ["q1", "q2", "q3"]
    assert outcome.side.provenance == PROV
    assert outcome.side.scores() == {"q1": 1.0, "q2": 0.0, "q3": 1.0}


def test_items_of_a_model_this_run_does_not_measure_come_from_the_store(store: Store) -> None:
    record_items(store, "older", "ref", ["q1", "q2"])
    record_items(store, "newer", "ref", ["q1", "q2", "q3"])
    latest = finder(store).items("ref", "gsm8k", expected_tests=[])
    assert isinstance(latest, Found) and latest.side.run_id == "newer"
    # the run with the other side's item ids wins over a newer one with other items
    matching = finder(store).items("ref", "gsm8k", expected_tests=[], match_ids=["q2", "q1"])
    assert isinstance(matching, Found) and matching.side.run_id == "older"
    assert [r.item_id for r in matching.side.items] == ["q1", "q2"]


def test_items_nowhere_are_missing_naming_the_fix(store: Store) -> None:
    record_items(store, "older", "other", ["q1"])
    outcome = finder(store).items("ref", "gsm8k", expected_tests=[])
    assert outcome == Missing(
        f"no gsm8k items of ref in this run or in the store {store.path}; "
        "run its gsm8k test too (add --model ref)"
    )


def test_a_test_of_this_run_that_ended_without_items_fails_naming_its_outcome(
    store: Store,
) -> None:
    record_items(store, "older", "ref", ["q1"])  # an earlier run never stands in for this one
    store.add_outcome(RUN, "test_accuracy.py::test_gsm8k[ref]", "failed")
    started = time.monotonic()
    outcome = finder(store, wait_s=60).items(
        "ref", "gsm8k", expected_tests=["test_accuracy.py::test_gsm8k[ref]"]
    )
    assert time.monotonic() - started < 5  # no waiting once every expected test has ended
    assert outcome == Failed(
        "ref recorded no gsm8k result in this run (test_accuracy.py::test_gsm8k[ref] failed); "
        "its own test's failure says why"
    )


def _another_worker_records(path: str, delay_s: float) -> None:
    time.sleep(delay_s)
    store = Store(Path(path))
    record_items(store, RUN, "ref", ["q1", "q2"])
    store.add_outcome(RUN, "test_gsm8k[ref]", "passed")
    store.close()


def test_waits_for_items_another_process_is_still_recording(store: Store) -> None:
    writer = multiprocessing.get_context("spawn").Process(
        target=_another_worker_records, args=(str(store.path), 0.5)
    )
    writer.start()
    try:
        outcome = finder(store, wait_s=60).items("ref", "gsm8k", expected_tests=["test_gsm8k[ref]"])
    finally:
        writer.join(60)
    assert writer.exitcode == 0
    assert isinstance(outcome, Found) and outcome.side.run_id == RUN
    assert [r.item_id for r in outcome.side.items] == ["q1", "q2"]


def test_waiting_times_out_as_a_failure(store: Store) -> None:
    started = time.monotonic()
    outcome = finder(store, wait_s=0.3).items("ref", "gsm8k", expected_tests=["test_gsm8k[ref]"])
    assert 0.3 <= time.monotonic() - started < 5
    assert outcome == Failed(
        "ref has no gsm8k result in this run after waiting 0s (is it still queued behind this "
        "comparison on the same xdist worker?); raise --verdict-wait if it is just slow"
    )


def test_waits_once_per_model_and_benchmark(store: Store) -> None:
    sleeps: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    waiting = ComparisonFinder(store, RUN, wait_s=10, poll_s=1, clock=lambda: now[0], sleep=sleep)
    first = waiting.items("ref", "gsm8k", expected_tests=["test_gsm8k[ref]"])
    assert isinstance(first, Failed) and "after waiting 10s" in first.reason
    assert len(sleeps) == 10
    assert waiting.gave_up == {("ref", "gsm8k"): first}

    again = waiting.items("ref", "gsm8k", expected_tests=["test_gsm8k[ref]"])
    assert again == first and len(sleeps) == 10  # looked once more, did not wait again

    other = waiting.items("ref", "bfcl", expected_tests=["test_bfcl[ref]"])
    assert isinstance(other, Failed) and len(sleeps) == 20  # another benchmark waits its own turn

    record_items(store, RUN, "ref", ["q1"])  # it arrives after all: the next lookup uses it
    late = waiting.items("ref", "gsm8k", expected_tests=["test_gsm8k[ref]"])
    assert isinstance(late, Found) and len(sleeps) == 20


# --------------------------------------------------------------------------- throughput measurements


def test_the_measurement_of_this_runs_setting_is_found_by_its_parameters(store: Store) -> None:
    record_rate(store, RUN, "m", 1, [10.0, 11.0])
    record_rate(store, RUN, "m", 16, [90.0, 95.0])
    record_rate(store, RUN, "m", 16, [50.0, 52.0], prompt_tokens=1024)
    short = finder(store).measurement(
        "m", "throughput", {"concurrency": 16, "prompt_tokens": None}, expected_tests=["t"]
    )
    assert isinstance(short, Found)
    assert isinstance(short.side, ModelMeasurement)
    assert repeat_values(short.side) == (90.0, 95.0) and short.side.run_id == RUN
    assert short.side.measurement.provenance == PROV
    long = finder(store).measurement(
        "m", "throughput", {"concurrency": 16, "prompt_tokens": 1024}, expected_tests=["t"]
    )
    assert isinstance(long, Found) and repeat_values(long.side) == (50.0, 52.0)


def test_a_measurement_from_the_latest_earlier_run_at_the_same_setting(store: Store) -> None:
    record_rate(store, "older", "ref", 4, [20.0, 21.0])
    record_rate(store, "newer", "ref", 4, [30.0, 31.0])
    record_rate(store, "newest", "ref", 1, [5.0, 6.0])
    outcome = finder(store).measurement(
        "ref", "throughput", {"concurrency": 4, "prompt_tokens": None}, expected_tests=[]
    )
    assert isinstance(outcome, Found)
    assert outcome.side.run_id == "newer" and repeat_values(outcome.side) == (30.0, 31.0)


def test_a_setting_nowhere_is_missing(store: Store) -> None:
    record_rate(store, "older", "ref", 4, [20.0, 21.0])
    outcome = finder(store).measurement(
        "ref", "throughput", {"concurrency": 4, "prompt_tokens": 1024}, expected_tests=[]
    )
    assert outcome == Missing(
        f"no throughput result of ref at concurrency 4, 1024-token prompts in this run or the "
        f"store {store.path}; run it too (add --model ref)"
    )


def test_a_setting_whose_test_failed_in_this_run_fails_even_with_history(store: Store) -> None:
    record_rate(store, "older", "ref", 4, [20.0, 21.0])
    record_rate(store, RUN, "ref", 1, [5.0, 6.0])  # another setting of this run does not count
    store.add_outcome(RUN, "test_throughput[ref-c4]", "failed")
    outcome = finder(store).measurement(
        "ref",
        "throughput",
        {"concurrency": 4, "prompt_tokens": None},
        expected_tests=["test_throughput[ref-c4]"],
    )
    assert outcome == Failed(
        "ref recorded no throughput result at concurrency 4 in this run "
        "(test_throughput[ref-c4] failed); its own test's failure says why"
    )


def test_waits_for_a_measurement_another_writer_is_still_recording(store: Store) -> None:
    def other_worker() -> None:
        time.sleep(0.3)
        other = Store(store.path)
        record_rate(other, RUN, "ref", 4, [20.0, 22.0])
        other.close()

    writer = threading.Thread(target=other_worker)
    writer.start()
    outcome = finder(store, wait_s=60).measurement(
        "ref",
        "throughput",
        {"concurrency": 4, "prompt_tokens": None},
        expected_tests=["test_throughput[ref-c4]"],
    )
    writer.join()
    assert isinstance(outcome, Found) and repeat_values(outcome.side) == (20.0, 22.0)


def test_setting_text() -> None:
    assert setting_text({"concurrency": 4, "prompt_tokens": None}) == "at concurrency 4"
    assert setting_text({"prompt_tokens": 3072, "concurrency": 4}) == (
        "at 3072-token prompts, concurrency 4"
    )
    assert setting_text({}) == ""


def test_model_items_scores() -> None:
    items = [ItemRecord(item_id="a", prompt_hash="p", correct=True, response="", data_hash="d")]
    assert ModelItems("m", RUN, items, {}).scores() == {"a": 1.0}
