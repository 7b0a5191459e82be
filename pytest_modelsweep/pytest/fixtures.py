"""The fixtures benchmark tests use: the run, the sweep, an endpoint, ``record_measurement``,
``evaluate`` (your own accuracy benchmark) and the comparison judges.

Registered in every pytest run, so this module imports only what pytest
itself needs; what a fixture uses is imported when the fixture runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

import pytest

from ..core.errors import DataError, MeasurementError
from ..core.metrics import BENCHMARK_MARKER
from .context import (
    active_run_state,
    declared_benchmark_key,
    evaluated_key,
    measurements_key,
    model_of_item,
    run_state,
    tests_in_session,
    unjudged_key,
)

if TYPE_CHECKING:
    from ..api.evaluation import Evaluate
    from ..api.prompts import MeasureThroughput
    from ..core.measurements import Measurement, Stats
    from ..core.sweep import ModelSpec, Sweep
    from ..judging.judge import Comparison
    from ..serving.endpoint import Endpoint
    from ..store.database import Store
    from .state import BenchSettings, RunState

RecordMeasurement = Callable[..., "Measurement"]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """The run state keeps the report that ends each modelsweep test run in this process (a
    plain run's, or an xdist worker's own): its comparisons read how it ended from there."""
    report = yield
    if (
        (report.when == "call" or not report.passed)
        and report.when != "teardown"
        and model_of_item(item) is not None
    ):
        state = active_run_state(item.config)
        if state is not None:
            from ..judging.comparisons import FinishedTest
            from .controller import first_line

            state.test_finished(
                report.nodeid,
                lambda: FinishedTest(report.outcome, first_line(report) if report.failed else ""),
            )
    return report


@pytest.fixture(scope="session")
def modelsweep_run(request: pytest.FixtureRequest) -> RunState:
    """The run-wide state: options, sweep, selection, endpoint pool."""
    return run_state(request.config)


@pytest.fixture(scope="session")
def bench_settings(modelsweep_run: RunState) -> BenchSettings:
    """The run's id and measuring options (repeats, limit, reuse...), read-only."""
    return modelsweep_run.bench_settings


@pytest.fixture(scope="session")
def progress(modelsweep_run: RunState) -> Callable[[str], None]:
    """Write a progress line live, past pytest's output capture."""
    return modelsweep_run.write_line


@pytest.fixture(scope="session")
def sweep(modelsweep_run: RunState) -> Sweep:
    """The parsed sweep file of this run."""
    return modelsweep_run.sweep


@pytest.fixture
def model_spec(model_name: str, sweep: Sweep) -> ModelSpec:
    """The sweep's record of the model this test measures."""
    return sweep.model(model_name)


@pytest.fixture
def endpoint(model_name: str, modelsweep_run: RunState) -> Endpoint:
    """The live server of this test's model: attached, or started on first need."""
    return modelsweep_run.pool.get(model_name)


@pytest.fixture
def record_measurement(request: pytest.FixtureRequest) -> RecordMeasurement:
    """``record_measurement(benchmark, value, unit, n, params=..., stats=..., items=...,
    requests=...)``: one result of this test (``stats``: the kind's record or a dict of it),
    with its model and endpoint; it reaches the results file even if the test then fails. A
    value that is not a finite number fails the test instead, with one line."""
    from datetime import datetime

    from ..core.measurements import Measurement, stats_type
    from ..serving.endpoint import Endpoint

    node = request.node
    model = model_of_item(node)

    def record(
        benchmark: str,
        value: float,
        unit: str,
        n: int,
        *,
        params: dict[str, Any] | None = None,
        stats: Stats | Mapping[str, Any] | None = None,
        items: list[dict[str, Any]] | None = None,
        requests: list[dict[str, Any]] | None = None,
        model: str | None = model,
        endpoint: Endpoint | None = None,
    ) -> Measurement:
        value = float(value)
        if not math.isfinite(value):  # the store keeps numbers; NaN is no measurement
            pytest.fail(
                f"record_measurement({benchmark!r}): its value is {value!r}, not "
                "a finite number; record what was measured, or fail the test where "
                "nothing was",
                pytrace=False,
            )
        if endpoint is None:
            candidate = node.funcargs.get("endpoint") if hasattr(node, "funcargs") else None
            endpoint = candidate if isinstance(candidate, Endpoint) else None
        measurement = Measurement(
            model=model or "",
            benchmark=benchmark,
            value=value,
            unit=unit,
            n=int(n),
            params=dict(params or {}),
            stats=(
                stats_type(benchmark, unit).from_dict(stats or {})
                if stats is None or isinstance(stats, Mapping)
                else stats
            ),
            items=list(items or []),
            requests=list(requests or []),
            provenance=endpoint.provenance.as_dict() if endpoint is not None else {},
            test_id=node.nodeid,
            recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        node.stash.setdefault(measurements_key, []).append(measurement.to_dict())
        return measurement

    return record


@pytest.fixture(scope="session")
def gsm8k_problems(modelsweep_run: RunState) -> list[Any]:
    """GSM8K test problems: ``--gsm8k-path`` or the Hub; the first ``--limit`` of them."""
    from ..data.gsm8k import expect_full_test_set, load_gsm8k

    return _limited(
        modelsweep_run,
        "GSM8K",
        load_gsm8k(modelsweep_run.options.gsm8k_path, split="test"),
        expect_full_test_set,
    )


@pytest.fixture(scope="session")
def gsm8k_fewshot(modelsweep_run: RunState) -> Any:
    """lm-evaluation-harness's 5-shot sampler over the GSM8K train split."""
    from ..data.gsm8k import load_gsm8k_fewshot
    from ..workloads.gsm8k import Gsm8kFewshot

    return Gsm8kFewshot(load_gsm8k_fewshot(modelsweep_run.options.gsm8k_path))


@pytest.fixture(scope="session")
def bfcl_records(modelsweep_run: RunState) -> list[Any]:
    """BFCL simple records with their possible answers: ``--bfcl-path`` or the Hub."""
    from ..data.bfcl import expect_full_bfcl_set, load_bfcl

    return _limited(
        modelsweep_run, "BFCL", load_bfcl(modelsweep_run.options.bfcl_path), expect_full_bfcl_set
    )


def _limited(
    run: RunState, name: str, loaded: Sequence[Any], expect_full: Callable[[Sequence[Any]], None]
) -> list[Any]:
    """A data set, checked to be complete for a full run, or its first ``--limit`` records
    (all, with a warning, when it has fewer); an empty one is an error."""
    records, limit = list(loaded), run.bench_settings.limit
    if not records:
        raise DataError(f"the {name} data has no records; pass a data file that has")
    if limit is None:
        expect_full(records)
        return records
    if len(records) < limit:
        run.write_line(
            f"warning: --limit {limit}, but the {name} data has only "
            f"{len(records)} records: all {len(records)} are measured"
        )
    return records[:limit]


@pytest.fixture
def evaluate(
    request: pytest.FixtureRequest,
    model_name: str,
    model_spec: ModelSpec,
    bench_settings: BenchSettings,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Evaluate:
    """Run your accuracy benchmark on this test's model: ``evaluate(name, items, scorer)``
    in a test declared ``@pytest.mark.modelsweep_benchmark(name)`` (docs/writing-benchmarks.md).
    """
    from ..api.evaluation import EvalItem, EvaluationResult, Scorer, Summarise

    node = request.node
    declared = node.stash.get(declared_benchmark_key, None)

    def run(
        benchmark: str,
        items: Iterable[EvalItem],
        scorer: Scorer,
        *,
        concurrency: int = 16,
        params: Mapping[str, Any] | None = None,
        summarise: Summarise | None = None,
    ) -> EvaluationResult:
        from ..api.evaluation import (
            check_positive,
            first_duplicate,
            request_for,
            sampling_params,
            scored_record,
            summarise_items,
        )
        from ..core.errors import BenchmarkDeclarationError, ModelsweepError
        from ..core.measurements import AccuracyStats
        from ..workloads.accuracy import run_accuracy

        _check_declared(node.name, "evaluates", benchmark, declared, "", "verdicts")
        if node.stash.get(evaluated_key, False):
            raise BenchmarkDeclarationError(
                f"{node.name} called evaluate twice: one benchmark, one evaluate call per test"
            )
        node.stash[evaluated_key] = True
        chosen = list(items)
        if wrong := [item for item in chosen if not isinstance(item, EvalItem)]:
            raise DataError(f"{benchmark}: items must be EvalItem, got {type(wrong[0]).__name__}")
        if not chosen:
            raise DataError(f"{benchmark}: no items to evaluate")
        if (duplicate := first_duplicate(chosen)) is not None:
            raise DataError(f"{benchmark}: two items have the id {duplicate!r}; ids must be unique")
        check_positive(benchmark, concurrency=concurrency)
        limit = bench_settings.limit
        chosen = chosen[:limit] if limit is not None else chosen
        endpoint: Endpoint = request.getfixturevalue("endpoint")
        recorded_params = {
            **(params or {}),
            "prompting": model_spec.prompting,
            "limit": limit and len(chosen),  # the real count, when limited
            "subset": limit is not None,
            **sampling_params(chosen, model_spec.prompting),
        }

        try:  # a store that failed before: measured all the same, not stored
            store: Store | None = modelsweep_run.store
            store_failure = modelsweep_run.store.failure
        except ModelsweepError as error:  # (an xdist worker that could not open it)
            store, store_failure = None, str(error)

        def send(some: list[EvalItem]) -> Any:
            return run_accuracy(
                endpoint,
                benchmark,
                some,
                lambda item: request_for(item, model_spec.prompting),
                lambda item, sent, completion: scored_record(
                    benchmark, scorer, item, sent, completion
                ),
                store=None if store_failure else store,
                run_id=bench_settings.run_id,
                reuse=bench_settings.reuse,
                concurrency=concurrency,
                timeout_s=bench_settings.request_timeout_s,
                idle_timeout_s=bench_settings.idle_timeout_s,
                progress=modelsweep_run.write_line,
            )

        sequence = None
        if bench_settings.round_size is None:
            accuracy_run = send(chosen)
        else:  # --until-decided: rounds in the seeded order until every comparison is decided
            accuracy_run, sequence = _until_decided(
                request, modelsweep_run, model_name, benchmark, chosen, send, recorded_params
            )
        records = accuracy_run.records
        stats = AccuracyStats.of(
            summarise_items(records),
            summarise(records) if summarise is not None else {},
            sent=accuracy_run.sent,
            reused=accuracy_run.reused,
            wall_s=accuracy_run.wall_s,
            sequence=sequence,
        )
        record_measurement(
            benchmark,
            stats.accuracy,
            "accuracy",
            stats.n,
            params=recorded_params,
            stats=stats,
            items=[r.to_dict() for r in records],
            endpoint=endpoint,
        )
        store_failure = accuracy_run.store_error or store_failure
        if store_failure is not None:  # measured and recorded, but not stored
            from ..core.outputs import OutputError

            raise OutputError(f"{store_failure} (the measurement is in the results)")
        if failed := [r for r in records if r.failed]:
            # Failed items are not scored: the accuracy above is over the answered ones only,
            # and nothing (verdict, gate, baseline) is concluded from this measurement.
            raise MeasurementError(
                f"{len(failed)} of {len(records)} {benchmark} requests got no answer (first: "
                f"{failed[0].error}); re-run to resend them (completed items are reused)"
            )
        return EvaluationResult(
            benchmark=benchmark,
            model=model_name,
            accuracy=stats.accuracy,
            n=stats.n,
            correct=stats.correct,
            failed=stats.failed,
            sent=stats.sent,
            reused=stats.reused,
            records=records,
            stats=stats,
        )

    return run


def _until_decided(
    request: pytest.FixtureRequest,
    run: RunState,
    model: str,
    benchmark: str,
    items: list[Any],
    send: Callable[[list[Any]], Any],
    params: Mapping[str, Any],
) -> tuple[Any, Any]:
    """``--until-decided``: ``items`` in rounds of the seeded order until every comparison
    ``model`` takes part in on ``benchmark`` is decided (:mod:`~..judging.sequential`).
    Returns the run's scored items (an ``AccuracyRun``) and its ``AccuracySequence``."""
    from ..core.errors import ModelsweepError
    from ..core.measurements import Measurement
    from ..judging.gate import baseline_of
    from ..judging.sequential import UntilDecided, partners_for, sequence_order

    baseline = None
    if run.options.baseline:
        try:
            baseline = baseline_of(
                Measurement(model, benchmark, 0.0, "accuracy", 0, params=dict(params)),
                run.baseline_measurements(),
            )
        except ModelsweepError as error:  # the gate says so at the session's end
            run.write_line(f"{benchmark} {model}: no baseline to stop by ({error})")
    partners = partners_for(
        run.store,
        run.run_id,
        model,
        benchmark,
        reference=run.selection.reference,
        candidates=run.selection.candidates,
        tests_of=lambda name: tests_in_session(request.session, name, benchmark),
        margin=run.options.margin,
        baseline=baseline,
        threshold=run.options.thresholds.accuracy_points,
    )
    by_id = {item.id: item for item in items}
    round_size = run.bench_settings.round_size
    assert round_size is not None
    loop = UntilDecided(
        run.store,
        run.run_id,
        model,
        benchmark,
        sequence_order(by_id),
        round_size,
        partners,
        wait_s=run.options.verdict_wait_s,
        progress=run.write_line,
    )
    done = loop.run(lambda ids: send([by_id[item] for item in ids]))
    return done.run, done.sequence


def _check_declared(
    test: str, verb: str, benchmark: str, declared: str | None, kind: str, comparisons: str
) -> None:
    """A one-line error unless the test is declared as the benchmark it records."""
    from ..core.errors import BenchmarkDeclarationError

    if declared == benchmark:
        return
    marker = f"@pytest.mark.{BENCHMARK_MARKER}({benchmark!r}{kind})"
    raise BenchmarkDeclarationError(
        f"{test} {verb} {benchmark!r} but is declared "
        + (f"{BENCHMARK_MARKER}({declared!r})" if declared else "as no benchmark")
        + f": decorate it with {marker} (that adds -m {benchmark} and its {comparisons})"
    )


@pytest.fixture
def measure_throughput(
    request: pytest.FixtureRequest,
    model_name: str,
    bench_settings: BenchSettings,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> MeasureThroughput:
    """Measure your own prompts' throughput on this test's model at one concurrency:
    ``measure_throughput(name, prompts, concurrency=c, output_tokens=256)``, in a test declared
    ``@pytest.mark.modelsweep_benchmark(name, kind="throughput")`` and parametrized by
    ``concurrency``; with ``rate=R`` in an open loop (docs/writing-benchmarks.md)."""
    node = request.node
    declared = node.stash.get(declared_benchmark_key, None)

    def run(
        benchmark: str,
        prompts: Sequence[str],
        *,
        concurrency: int,
        output_tokens: int = 256,
        unique_prefixes: bool = True,
        params: Mapping[str, Any] | None = None,
        rate: float | None = None,
        burstiness: float = 1.0,
    ) -> None:
        from ..api.evaluation import check_positive
        from ..api.prompts import checked_prompts
        from ..core.errors import BenchmarkDeclarationError
        from ..workloads.arrivals import ArrivalProcess
        from ..workloads.setting import measure_setting

        _check_declared(node.name, "measures", benchmark, declared, ', kind="throughput"', "ratios")
        callspec = getattr(node, "callspec", None)
        declared_concurrency = callspec.params.get("concurrency") if callspec else None
        if declared_concurrency != concurrency:
            raise BenchmarkDeclarationError(
                f"{node.name} measures concurrency {concurrency!r} but is parametrized with "
                f"{declared_concurrency!r}: pass concurrency=concurrency (the ratio tests "
                "find the measurement by it)"
            )
        check_positive(benchmark, concurrency=concurrency, output_tokens=output_tokens)
        arrivals = None
        if rate is not None:
            for number, what in ((rate, "rate (requests per second)"), (burstiness, "burstiness")):
                finite = what == "burstiness" or number != float("inf")
                if (
                    isinstance(number, bool)
                    or not isinstance(number, int | float)
                    or not number > 0
                    or not finite
                ):
                    raise DataError(
                        f"{benchmark}: {what} must be a positive number, got {number!r}"
                    )
            arrivals = ArrivalProcess(float(rate), float(burstiness))
        texts = checked_prompts(benchmark, prompts)
        node.stash[evaluated_key] = True
        endpoint: Endpoint = request.getfixturevalue("endpoint")
        measure_setting(
            endpoint,
            bench_settings,
            record_measurement,
            benchmark,
            concurrency,
            None,
            modelsweep_run.write_line,
            output_tokens=output_tokens,
            user_prompts=texts,
            unique_prefixes=unique_prefixes,
            params=dict(params or {}),
            arrivals=arrivals,
        )

    measure: MeasureThroughput = run
    return measure


@pytest.fixture
def judge_against_reference(
    request: pytest.FixtureRequest,
    candidate_name: str,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Callable[[str], Any]:
    """``judge(benchmark)``: this candidate against the reference on an accuracy benchmark,
    item by item (:func:`_judge`)."""
    from ..judging.kinds import AccuracyComparison
    from ..workloads.bfcl import bfcl_skip_reason

    run = modelsweep_run
    reference = run.selection.reference

    def judge(benchmark: str) -> Any:
        skip = None
        if benchmark == "bfcl":
            skip = next(
                filter(
                    None,
                    (
                        bfcl_skip_reason(run.sweep.model(name))
                        for name in (candidate_name, reference)
                    ),
                ),
                None,
            )
        return _judge(
            request,
            record_measurement,
            AccuracyComparison(
                run.comparisons,
                _expected_tests(request),
                candidate_name,
                reference,
                benchmark,
                margin=run.options.margin,
                resamples=run.options.resamples,
                candidate_first=bool(tests_in_session(request.session, candidate_name, benchmark)),
                holm_candidates=list(run.selection.candidates) if run.options.holm else None,
                skip_reason=skip,
            ),
        )

    return judge


@pytest.fixture
def judge_throughput_ratio(
    request: pytest.FixtureRequest,
    candidate_name: str,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Callable[..., Any]:
    """``judge(benchmark, concurrency=..., prompt_tokens=...)``: this candidate's throughput ÷
    the reference's at one setting (:func:`_judge`); with ``--interleave`` both are measured
    here, their windows alternating in pairs."""
    from ..judging.kinds import InterleavedSides, ThroughputComparison

    run = modelsweep_run
    reference = run.selection.reference

    def judge(benchmark: str, *, concurrency: int, prompt_tokens: int | None) -> Any:
        setting = {"concurrency": concurrency, "prompt_tokens": prompt_tokens}
        interleaved = None
        if run.options.interleave:
            from ..core.measurements import Interleaved
            from ..core.metrics import METRICS
            from ..workloads.setting import measure_interleaved_setting

            if benchmark not in METRICS:
                pytest.fail(
                    f"--interleave measures the built-in throughput shapes only, not "
                    f"your own {benchmark!r}: run its ratio without --interleave",
                    pytrace=False,
                )
            measured = measure_interleaved_setting(
                [run.pool.get(reference), run.pool.get(candidate_name)],
                run.bench_settings,
                benchmark,
                setting,
                run.write_line,
            )
            interleaved = InterleavedSides(
                run.run_id,
                Interleaved(
                    tuple(measured.windows),
                    tuple(measured.values[candidate_name]),
                    tuple(measured.values[reference]),
                ),
                run.bench_settings.repeats,
            )
        return _judge(
            request,
            record_measurement,
            ThroughputComparison(
                run.comparisons,
                _expected_tests(request),
                candidate_name,
                reference,
                benchmark,
                setting,
                margin=run.options.ratio_tolerance,
                interleaved=interleaved,
            ),
        )

    return judge


def _capacity_judge(
    request: pytest.FixtureRequest,
    candidate_name: str,
    run: RunState,
    record_measurement: RecordMeasurement,
    knob: str,
) -> Callable[[], Any]:
    """``judge()`` of a candidate's capacity over ``knob`` against the reference's."""
    from ..judging.kinds import CapacityComparison

    def judge() -> Any:
        settings = run.bench_settings
        return _judge(
            request,
            record_measurement,
            CapacityComparison(
                run.comparisons,
                _expected_tests(request),
                candidate_name,
                run.selection.reference,
                settings.slo,
                settings.slo_attainment,
                margin=run.options.ratio_tolerance,
                knob=knob,
            ),
        )

    return judge


@pytest.fixture
def judge_capacity_ratio(
    request: pytest.FixtureRequest,
    candidate_name: str,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Callable[[], Any]:
    """``judge()``: this candidate's capacity (concurrent requests) under ``--slo`` ÷ the
    reference's, recorded as ``capacity_ratio`` (:func:`_judge`)."""
    from ..core.measurements import CONCURRENCY

    return _capacity_judge(request, candidate_name, modelsweep_run, record_measurement, CONCURRENCY)


@pytest.fixture
def judge_rate_capacity_ratio(
    request: pytest.FixtureRequest,
    candidate_name: str,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Callable[[], Any]:
    """``judge()``: this candidate's capacity in requests/s under ``--slo`` ÷ the
    reference's, recorded as ``rate_capacity_ratio`` (:func:`_judge`)."""
    from ..core.measurements import RATE

    return _capacity_judge(request, candidate_name, modelsweep_run, record_measurement, RATE)


@pytest.fixture
def measure_startup(
    model_name: str,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Callable[[], Any]:
    """``measure_startup()``: launch this test's model's server ``--startup-launches`` times,
    record one ``startup`` measurement and return its ``StartupStats``; an attached model
    skips."""
    from ..serving.cold_start import cold_start_refusal

    run = modelsweep_run

    def measure() -> Any:
        from ..serving.cold_start import measure_startup as measured

        refusal = cold_start_refusal(model_name, run.attach)
        if refusal is not None:
            pytest.skip(refusal)
        return measured(
            run.sweep,
            model_name,
            launches=run.bench_settings.startup_launches,
            log_dir=run.run_dir / "logs" / "startup",
            progress=run.write_line,
            record_measurement=record_measurement,
            worker_id=run.worker_id,
        )

    return measure


def _expected_tests(
    request: pytest.FixtureRequest,
) -> Callable[[str, str, Mapping[str, Any] | None], list[str]]:
    """This session's tests that record a model's benchmark (at a setting)."""
    return lambda model, benchmark, params: tests_in_session(
        request.session, model, benchmark, params=params
    )


def _judge(
    request: pytest.FixtureRequest,
    record_measurement: RecordMeasurement,
    comparison: Comparison[Any, Any],
) -> Any:
    """Judge one comparison with the verdict hook, record it on the candidate and announce it;
    a side nowhere or skipped skips, a refusal fails. Returns the recorded stats."""
    from ..judging.comparisons import Failed, Missing, Skipped
    from ..judging.judge import judge

    config = request.config

    def decide(interval: Any) -> Any:
        from ..judging.sequential import SequentialJudgement

        if isinstance(interval, SequentialJudgement):
            return interval.verdict  # the items stopped by this very rule: no hook re-decides
        return config.hook.pytest_modelsweep_verdict(
            candidate=comparison.candidate,
            reference=comparison.reference,
            metric=comparison.metric,
            interval=interval,
            margin=comparison.margin,
            config=config,
            kind=comparison.kind,
        )

    judged = judge(comparison, decide)
    if isinstance(judged, Missing):
        request.node.stash[unjudged_key] = judged.reason
        pytest.skip(judged.reason)
    if isinstance(judged, Skipped):
        pytest.skip(judged.reason)
    if isinstance(judged, Failed):
        pytest.fail(judged.reason, pytrace=False)
    record_measurement(
        judged.benchmark,
        judged.value,
        judged.unit,
        judged.n,
        params=judged.params,
        stats=judged.stats,
        model=comparison.candidate,
    )
    announce_verdict(judged.summary, judged.verdict, run_state(request.config).options.fail_on)
    return judged.stats


def announce_verdict(summary: str, verdict: Any, fail_on: Collection[str]) -> None:
    """Fail the comparison's test with its one line when the verdict is in ``--fail-on``,
    else print the line."""
    if verdict.value in fail_on:
        pytest.fail(summary, pytrace=False)
    print(summary)
