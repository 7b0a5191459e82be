"""Throughput and latency, exactly as the server counted them.

Each setting runs ``--repeats`` timed windows (warm-up first) with exactly N
requests in flight, 256 generated tokens each (``ignore_eos``), prompts that
share no prefix with any other request of the run. Every window is checked
against the server's own counters; a violation fails the test after the
figures are recorded. The candidate ÷ reference ratio at each setting is a
measurement of its own, with a bootstrap interval over the repeats.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from pytest_modelsweep.comparisons import Failed, Missing, ModelMeasurement
from pytest_modelsweep.context import tests_in_session
from pytest_modelsweep.errors import MeasurementError, ModelsweepError
from pytest_modelsweep.fixtures import RecordMeasurement
from pytest_modelsweep.serving import Endpoint
from pytest_modelsweep.state import RunState
from pytest_modelsweep.stats import RatioVerdictRecord
from pytest_modelsweep.verdicts import throughput_ratio_interval
from pytest_modelsweep.workloads.throughput import make_tokenizer, run_throughput

OUTPUT_TOKENS = 256
SHORT = [pytest.param(c, id=f"c{c}") for c in (1, 4, 16)]
LONG = [pytest.param(p, 4, id=f"p{p}-c4") for p in (1024, 3072)]
SETTINGS = [
    pytest.param("throughput", None, c, marks=pytest.mark.throughput, id=f"c{c}") for c in (1, 4, 16)
] + [
    pytest.param("long_prompt", p, 4, marks=pytest.mark.long_prompt, id=f"p{p}-c4")
    for p in (1024, 3072)
]


def measure(
    endpoint: Endpoint,
    run: RunState,
    record_measurement: RecordMeasurement,
    benchmark: str,
    concurrency: int,
    prompt_tokens: int | None,
) -> None:
    timed = run.options.timed_requests or max(4, 2 * concurrency)
    tokenizer = make_tokenizer(endpoint)
    results = []
    for repeat in range(run.options.repeats):
        seed = zlib.crc32(f"{run.run_id}/{benchmark}/{concurrency}/{prompt_tokens}/{repeat}".encode())
        results.append(run_throughput(
            endpoint, concurrency=concurrency, prompt_tokens=prompt_tokens,
            output_tokens=OUTPUT_TOKENS, timed_requests=timed, warmup_requests=concurrency,
            seed=seed, timeout_s=run.options.request_timeout_s,
            idle_timeout_s=run.options.idle_timeout_s, tokenizer=tokenizer,
        ))
    values = [r.output_tokens_per_s for r in results]
    requests: list[dict[str, Any]] = []
    for repeat, result in enumerate(results):
        requests += [{**record.to_dict(), "repeat": repeat} for record in result.records]
    record_measurement(
        benchmark,
        sum(values) / len(values),
        "tokens/s",
        sum(r.completed for r in results),
        params={"concurrency": concurrency, "prompt_tokens": prompt_tokens,
                "output_tokens": OUTPUT_TOKENS, "timed_requests": timed,
                "repeats": len(results)},
        stats={"repeat_values": values, "repeats": [r.as_stats() for r in results]},
        requests=requests,
        endpoint=endpoint,
    )
    problems = [f"repeat {i}: {v}" for i, r in enumerate(results) for v in r.violations]
    if problems:
        raise MeasurementError("; ".join(problems[:10]))


@pytest.mark.throughput
@pytest.mark.parametrize("concurrency", SHORT)
def test_throughput(
    endpoint: Endpoint, concurrency: int, modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> None:
    measure(endpoint, modelsweep_run, record_measurement, "throughput", concurrency, None)


@pytest.mark.long_prompt
@pytest.mark.parametrize(("prompt_tokens", "concurrency"), LONG)
def test_long_prompt(
    endpoint: Endpoint, prompt_tokens: int, concurrency: int, modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> None:
    measure(endpoint, modelsweep_run, record_measurement, "long_prompt", concurrency,
            prompt_tokens)


def _find(run: RunState, request: pytest.FixtureRequest, model: str, benchmark: str,
          concurrency: int, prompt_tokens: int | None) -> ModelMeasurement:
    """The model's measurement at this setting: this run's (waiting for it if it is still to
    come on another worker), else the latest stored one; a skip when there is none anywhere,
    a failure when this run's test of it ended without it."""
    setting = {"concurrency": concurrency, "prompt_tokens": prompt_tokens}
    outcome = run.comparisons.measurement(
        model, benchmark, setting,
        expected_tests=tests_in_session(request.session, model, benchmark, params=setting),
    )
    if isinstance(outcome, Missing):
        pytest.skip(outcome.reason)
    if isinstance(outcome, Failed):
        pytest.fail(outcome.reason, pytrace=False)
    return outcome.side


@pytest.mark.verdict
@pytest.mark.parametrize(("kind", "prompt_tokens", "concurrency"), SETTINGS)
def test_throughput_ratio(
    candidate_name: str, kind: str, prompt_tokens: int | None, concurrency: int,
    modelsweep_run: RunState, request: pytest.FixtureRequest,
    record_measurement: RecordMeasurement,
) -> None:
    run = modelsweep_run
    reference = run.selection.reference
    ref = _find(run, request, reference, kind, concurrency, prompt_tokens)
    cand = _find(run, request, candidate_name, kind, concurrency, prompt_tokens)
    try:
        ratio = throughput_ratio_interval(cand, ref, resamples=run.options.resamples)
    except ModelsweepError as error:
        pytest.fail(str(error), pytrace=False)
    verdict = request.config.hook.pytest_modelsweep_verdict(
        candidate=candidate_name, reference=reference, metric=kind, interval=ratio,
        margin=None, config=request.config, kind="throughput",
    )
    record = RatioVerdictRecord(
        candidate=candidate_name, reference=reference, metric=kind, verdict=verdict,
        interval=ratio,
    )
    record_measurement(
        "throughput_ratio", ratio.ratio, "x reference", ratio.candidate_n,
        params={"benchmark": kind, "concurrency": concurrency,
                "prompt_tokens": prompt_tokens, "reference": reference,
                "verdict": str(verdict.value)},
        stats={**record.as_dict(), "candidate_run": cand.run_id, "reference_run": ref.run_id},
        model=candidate_name,
    )
    # The verdict is reported, not enforced: a throughput rule with --fail-on comes later.
    print(f"{candidate_name} ÷ {reference}, {kind} c{concurrency}"
          f"{f' p{prompt_tokens}' if prompt_tokens else ''}: {ratio.ratio:.2f}x, "
          f"{verdict.value} (95% interval {ratio.low:.2f}–{ratio.high:.2f}, repeats "
          f"{ratio.candidate_n}/{ratio.reference_n})")
