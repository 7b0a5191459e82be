"""Shared by the tests: moved from test_report_html.py."""

from __future__ import annotations

import pytest

from support.paths import PAIR

PWNED = "<script>document.title='pwned'</script>"


# Both models "answer" 40 GSM8K items (the first response is markup), the candidate is
# compared with the reference through the real verdict machinery, and each model records
# throughput at two concurrencies.
BENCH = """
import pytest
from pytest_modelsweep.core.records import ItemRecord

PWNED = "<script>document.title='pwned'</script>"
SCORES = {"gemma3-270m": [1, 0, 1, 1] * 10, "smollm2-135m": [0, 0, 1, 0] * 10}

@pytest.mark.gsm8k
def test_gsm8k(model_name, modelsweep_run, record_measurement):
    store = modelsweep_run.store
    store.add_endpoint(modelsweep_run.config.run_id, model_name, {"server_name": "s", "server_version": "1"})
    items = []
    for i, ok in enumerate(SCORES[model_name]):
        item = ItemRecord(item_id=f"q{i:03d}", prompt_hash="p", correct=bool(ok), data_hash="d",
                          response=PWNED if i == 0 else f"The answer is {i}.", finish_reason="stop",
                          extracted={"strict-match": None, "flexible-extract": str(i)})
        store.add_item(modelsweep_run.config.run_id, model_name, "gsm8k", "k-" + model_name, item)
        items.append(item.to_dict())
    accuracy = sum(SCORES[model_name]) / 40
    record_measurement("gsm8k", accuracy, "accuracy", 40, items=items,
                       params={"limit": 40, "subset": True},
                       stats={"strict_match_accuracy": accuracy, "truncated_rate": 0.0, "errors": 0})

@pytest.mark.verdict
@pytest.mark.gsm8k
def test_verdict(candidate_name, judge_against_reference):
    judge_against_reference("gsm8k")

@pytest.mark.throughput
@pytest.mark.parametrize("concurrency", [1, 4])
def test_throughput(model_name, concurrency, record_measurement):
    # one measurement per setting, repeats inside, as benches/test_throughput.py records it
    values = [40.0 * concurrency, 40.0 * concurrency + 1]
    window = {"prompt_tokens": 24, "fidelity": 1.0,
              "ttft": {"mean_ms": 90.0, "p50_ms": 80.0, "p90_ms": 100.0, "p99_ms": 120.0, "n": 1},
              "tpot": {"mean_ms": 21.0, "p50_ms": 20.0, "p90_ms": 25.0, "p99_ms": 30.0, "n": 1}}
    record_measurement(
        "throughput", sum(values) / 2, "tokens/s", 2,
        params={"concurrency": concurrency, "prompt_tokens": None, "output_tokens": 256,
                "timed_requests": 1, "repeats": 2},
        stats={"repeat_values": values,
               "repeats": [{**window, "output_tokens_per_s": v} for v in values]},
        requests=[{"start": 0.0, "end": 1.5, "first_token": 0.08, "completion_tokens": 256,
                   "token_times": [0.08, 0.09], "error": None, "repeat": r} for r in range(2)],
    )
"""


def make_report(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, str]:
    """Run the fake bench with ``--html report.html --self-contained-html``; the file's text."""
    pytester.makepyfile(test_bench=BENCH)
    result = pytester.runpytest(
        "--modelsweep-dir",
        "work",
        "--results",
        "results.json",
        "--resamples",
        "1000",
        "--html",
        "report.html",
        "--self-contained-html",
        "-p",
        "no:cacheprovider",
        *PAIR,
        *args,
    )
    return result, (pytester.path / "report.html").read_text(encoding="utf-8")
