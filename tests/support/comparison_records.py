"""Shared by the tests: moved from test_comparisons.py."""

from __future__ import annotations

from pytest_modelsweep.core.measurements import Measurement, ThroughputStats
from pytest_modelsweep.core.records import ItemRecord
from pytest_modelsweep.store.database import Store

PROV = {"server_name": "s", "server_version": "1", "server_settings": {"total_slots": 4}}


def record_items(store: Store, run_id: str, model: str, ids: list[str], *, key: str = "k") -> None:
    """What the accuracy benches leave in the store: the endpoint, scored items, the measurement."""
    store.add_endpoint(run_id, model, PROV)
    for n, item_id in enumerate(ids):
        store.add_item(
            run_id,
            model,
            "gsm8k",
            key + model,
            ItemRecord(
                item_id=item_id, prompt_hash="p", correct=n % 2 == 0, response="", data_hash="d"
            ),
        )
    store.add_measurement(
        run_id,
        Measurement(
            model=model,
            benchmark="gsm8k",
            value=0.5,
            unit="accuracy",
            n=len(ids),
            provenance=PROV,
            test_id=f"test_accuracy.py::test_gsm8k[{model}]",
        ).to_dict(),
    )


def record_rate(
    store: Store,
    run_id: str,
    model: str,
    concurrency: int,
    values: list[float],
    prompt_tokens: int | None = None,
) -> None:
    """What ``measure`` in benches/test_throughput.py records for one setting."""
    store.add_measurement(
        run_id,
        Measurement(
            model=model,
            benchmark="throughput",
            value=sum(values) / len(values),
            unit="tokens/s",
            n=4 * len(values),
            params={
                "concurrency": concurrency,
                "prompt_tokens": prompt_tokens,
                "output_tokens": 256,
                "timed_requests": 4,
                "repeats": len(values),
            },
            stats=ThroughputStats(repeat_values=tuple(values)),
            provenance=PROV,
            test_id=f"test_throughput.py::test_throughput[{model}-c{concurrency}]",
        ).to_dict(),
    )
