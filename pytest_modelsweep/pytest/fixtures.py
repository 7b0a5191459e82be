"""The fixtures benchmark tests use: the run, the sweep, an endpoint, ``record_measurement``,
``evaluate`` (your own accuracy benchmark) and the comparison judges.

Registered in every pytest run, so this module imports only what pytest
itself needs; what a fixture uses is imported when the fixture runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest

from ..core.errors import BenchmarkDeclarationError, DataError
from ..core.metrics import BENCHMARK_MARKER, METRICS
from .context import (
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
    from .state import BenchSettings, RunState

RecordMeasurement = Callable[..., "Measurement"]


@pytest.fixture(scope="session")
def modelsweep_run(request: pytest.FixtureRequest) -> RunState:
    """The run-wide state: options, sweep, selection, endpoint pool."""
    return run_state(request.config)


@pytest.fixture(scope="session")
def bench_settings(modelsweep_run: RunState) -> BenchSettings:
    """The run's id and measuring options (repeats, limit, reuse...), read-only."""
    return modelsweep_run.config.bench_settings


@pytest.fixture(scope="session")
def progress(modelsweep_run: RunState) -> Callable[[str], None]:
    """Write a progress line live, past pytest's output capture."""
    return modelsweep_run.write_line


@pytest.fixture(scope="session")
def sweep(modelsweep_run: RunState) -> Sweep:
    """The parsed sweep file of this run."""
    return modelsweep_run.config.sweep


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
    from dataclasses import fields

    from ..core.measurements import Measurement, OtherStats, stats_type
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
        kind = stats_type(benchmark, unit)
        held = {f.name for f in fields(kind)}
        unheld = sorted(set(stats) - held) if isinstance(stats, Mapping) else []
        if unheld and "figures" in held:  # a benchmark's own figures (accuracy's summarise)
            assert isinstance(stats, Mapping)
            own = {k: v for k, v in stats.items() if k not in held}
            stats = {k: v for k, v in stats.items() if k in held}
            stats["figures"] = {**own, **stats.get("figures", {})}
        elif unheld and kind is not OtherStats:  # a figure the record would drop is lost
            pytest.fail(
                f"record_measurement({benchmark!r}, unit {unit!r}): the {kind.__name__} of this "
                f"kind of measurement holds no {', '.join(map(repr, unheld))}; record such "
                "figures in params, or under a unit of your own",
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
                kind.from_dict(stats or {})
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
    from ..data import expect_full_set
    from ..data.gsm8k import FULL_TEST_SIZE, load_gsm8k

    return _limited(
        modelsweep_run,
        "GSM8K",
        load_gsm8k(modelsweep_run.config.options.gsm8k_path, split="test"),
        partial(expect_full_set, size=FULL_TEST_SIZE, what="GSM8K test", whole="test split"),
    )


@pytest.fixture(scope="session")
def gsm8k_fewshot(modelsweep_run: RunState) -> Any:
    """lm-evaluation-harness's 5-shot sampler over the GSM8K train split."""
    from ..data.gsm8k import load_gsm8k_fewshot
    from ..workloads.gsm8k import Gsm8kFewshot

    return Gsm8kFewshot(load_gsm8k_fewshot(modelsweep_run.config.options.gsm8k_path))


@pytest.fixture(scope="session")
def bfcl_records(modelsweep_run: RunState) -> list[Any]:
    """BFCL simple records with their possible answers: ``--bfcl-path`` or the Hub."""
    from ..data import expect_full_set
    from ..data.bfcl import FULL_SIZE, load_bfcl

    return _limited(
        modelsweep_run,
        "BFCL",
        load_bfcl(modelsweep_run.config.options.bfcl_path),
        partial(
            expect_full_set, size=FULL_SIZE, what="BFCL simple", whole="simple_python category"
        ),
    )


def _limited(
    run: RunState, name: str, loaded: Sequence[Any], expect_full: Callable[[Sequence[Any]], None]
) -> list[Any]:
    """A data set, checked to be complete for a full run, or its first ``--limit`` records
    (all, with a warning, when it has fewer); an empty one is an error."""
    records, limit = list(loaded), run.config.bench_settings.limit
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
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Evaluate:
    """Run your accuracy benchmark on this test's model: ``evaluate(name, items, scorer)``
    in a test declared ``@pytest.mark.modelsweep_benchmark(name)`` (docs/writing-benchmarks.md;
    the work is :func:`~..workloads.accuracy.evaluate`'s)."""
    from ..workloads.accuracy import evaluate as evaluate_items

    node, run = request.node, modelsweep_run

    def evaluate(benchmark: str, items: Iterable[Any], scorer: Any, **options: Any) -> Any:
        _check_declared(node, "evaluates", benchmark, "", "verdicts")
        if node.stash.get(evaluated_key, False):
            raise BenchmarkDeclarationError(
                f"{node.name} called evaluate twice: one benchmark, one evaluate call per test"
            )
        node.stash[evaluated_key] = True
        store, store_failure = run.store_for_items()
        return evaluate_items(
            lambda: request.getfixturevalue("endpoint"),
            benchmark,
            items,
            scorer,
            prompting=model_spec.prompting,
            settings=run.config.bench_settings,
            record=record_measurement,
            store=store,
            store_failure=store_failure,
            rounds=run.until_decided(model_name, partial(tests_in_session, request.session)),
            progress=run.write_line,
            **options,
        )

    return evaluate


def _check_declared(
    node: pytest.Item, verb: str, benchmark: str, kind: str, comparisons: str
) -> None:
    """A one-line error unless the test is declared as the benchmark it records."""
    declared = node.stash.get(declared_benchmark_key, None)
    if declared == benchmark:
        return
    marker = f"@pytest.mark.{BENCHMARK_MARKER}({benchmark!r}{kind})"
    raise BenchmarkDeclarationError(
        f"{node.name} {verb} {benchmark!r} but is declared "
        + (f"{BENCHMARK_MARKER}({declared!r})" if declared else "as no benchmark")
        + f": decorate it with {marker} (that adds -m {benchmark} and its {comparisons})"
    )


@pytest.fixture
def measure_throughput(
    request: pytest.FixtureRequest,
    model_name: str,  # (a test taking this fixture runs per model)
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> MeasureThroughput:
    """Measure your own prompts' throughput on this test's model at one concurrency:
    ``measure_throughput(name, prompts, concurrency=c, output_tokens=256)``, in a test declared
    ``@pytest.mark.modelsweep_benchmark(name, kind="throughput")`` and parametrized by
    ``concurrency``; with ``rate=R`` in an open loop (docs/writing-benchmarks.md; the work is
    :func:`~..workloads.setting.measure_throughput`'s)."""
    from ..workloads.setting import measure_throughput as measure_prompts

    node, run = request.node, modelsweep_run

    def measure(
        benchmark: str, prompts: Sequence[str], *, concurrency: int, **options: Any
    ) -> None:
        _check_declared(node, "measures", benchmark, ', kind="throughput"', "ratios")
        callspec = getattr(node, "callspec", None)
        declared_concurrency = callspec.params.get("concurrency") if callspec else None
        if declared_concurrency != concurrency:
            raise BenchmarkDeclarationError(
                f"{node.name} measures concurrency {concurrency!r} but is parametrized with "
                f"{declared_concurrency!r}: pass concurrency=concurrency (the ratio tests "
                "find the measurement by it)"
            )
        node.stash[evaluated_key] = True
        measure_prompts(
            lambda: request.getfixturevalue("endpoint"),
            run.config.bench_settings,
            record_measurement,
            benchmark,
            prompts,
            concurrency=concurrency,
            progress=run.write_line,
            **options,
        )

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
    reference = run.config.selection.reference

    def judge(benchmark: str) -> Any:
        reasons = (
            bfcl_skip_reason(run.config.sweep.model(name))
            for name in ((candidate_name, reference) if benchmark == "bfcl" else ())
        )
        return _judge(
            request,
            record_measurement,
            AccuracyComparison(
                run.comparisons,
                partial(tests_in_session, request.session),
                candidate_name,
                reference,
                benchmark,
                margin=run.config.options.margin,
                resamples=run.config.options.resamples,
                candidate_first=bool(tests_in_session(request.session, candidate_name, benchmark)),
                holm_candidates=list(run.config.selection.candidates)
                if run.config.options.holm
                else None,
                skip_reason=next(filter(None, reasons), None),
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
    reference = run.config.selection.reference

    def judge(benchmark: str, *, concurrency: int, prompt_tokens: int | None) -> Any:
        setting = {"concurrency": concurrency, "prompt_tokens": prompt_tokens}
        interleaved = None
        if run.config.options.interleave:
            from ..workloads.setting import measure_interleaved_setting

            if benchmark not in METRICS:
                pytest.fail(
                    f"--interleave measures the built-in throughput shapes only, not "
                    f"your own {benchmark!r}: run its ratio without --interleave",
                    pytrace=False,
                )
            interleaved = InterleavedSides(
                run.config.run_id,
                measure_interleaved_setting(
                    [run.pool.get(reference), run.pool.get(candidate_name)],
                    run.config.bench_settings,
                    benchmark,
                    setting,
                    run.write_line,
                ),
                run.config.bench_settings.repeats,
            )
        return _judge(
            request,
            record_measurement,
            ThroughputComparison(
                run.comparisons,
                partial(tests_in_session, request.session),
                candidate_name,
                reference,
                benchmark,
                setting,
                margin=run.config.options.ratio_tolerance,
                interleaved=interleaved,
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
    """``judge()``: this candidate's capacity under ``--slo`` ÷ the reference's, over the knob
    of the search its test is marked with (``capacity``: concurrent requests;
    ``rate_capacity``: requests/s), recorded as that benchmark's ``_ratio`` (:func:`_judge`)."""
    from ..core.measurements import SEARCH_BENCHMARK
    from ..judging.kinds import CapacityComparison

    node, run = request.node, modelsweep_run
    knobs = [k for k, name in SEARCH_BENCHMARK.items() if node.get_closest_marker(name)]
    if len(knobs) != 1:
        raise BenchmarkDeclarationError(
            f"{node.name} judges a capacity ratio, so it is marked with exactly one of "
            + " or ".join(f"@pytest.mark.{name}" for name in SEARCH_BENCHMARK.values())
            + f" (the search it compares); it has {len(knobs)}"
        )

    def judge() -> Any:
        settings = run.config.bench_settings
        return _judge(
            request,
            record_measurement,
            CapacityComparison(
                run.comparisons,
                partial(tests_in_session, request.session),
                candidate_name,
                run.config.selection.reference,
                settings.slo,
                settings.slo_attainment,
                margin=run.config.options.ratio_tolerance,
                knob=knobs[0],
            ),
        )

    return judge


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
    from ..serving.cold_start import measure_startup as measured

    run = modelsweep_run

    def measure() -> Any:
        refusal = cold_start_refusal(model_name, run.config.attach)
        if refusal is not None:
            pytest.skip(refusal)
        return measured(
            run.config.sweep,
            model_name,
            launches=run.config.bench_settings.startup_launches,
            log_dir=run.config.run_dir / "logs" / "startup",
            progress=run.write_line,
            record_measurement=record_measurement,
            worker_id=run.config.worker_id,
        )

    return measure


def _judge(
    request: pytest.FixtureRequest,
    record_measurement: RecordMeasurement,
    comparison: Comparison[Any, Any],
) -> Any:
    """Judge one comparison with the verdict hook, record it on the candidate and announce it;
    a side nowhere or skipped skips, a refusal fails. Returns the recorded stats."""
    from ..judging.comparisons import Failed, Missing, Skipped
    from ..judging.judge import judge
    from ..judging.sequential import SequentialJudgement

    config = request.config

    def decide(interval: Any) -> Any:
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
    announce_verdict(
        judged.summary, judged.verdict, run_state(request.config).config.options.fail_on
    )
    return judged.stats


def announce_verdict(summary: str, verdict: Any, fail_on: Collection[str]) -> None:
    """Fail the comparison's test with its one line when the verdict is in ``--fail-on``,
    else print the line."""
    if verdict.value in fail_on:
        pytest.fail(summary, pytrace=False)
    print(summary)
