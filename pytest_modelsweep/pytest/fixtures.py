"""The fixtures benchmark tests use: the run, the sweep, an endpoint, ``record_measurement``,
``evaluate`` (your own accuracy benchmark) and the comparison judges.

Registered in every pytest run, so this module imports only what pytest
itself needs; what a fixture uses is imported when the fixture runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from ..core.errors import DataError, MeasurementError, ModelsweepError
from ..core.metrics import BENCHMARK_MARKER
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
    from ..core.records import Measurement
    from ..core.sweep import ModelSpec, Sweep
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
    """Record one result of this test; it reaches the results file even if the test then fails.

    Call it as ``record_measurement(benchmark, value, unit, n, params=..., stats=...,
    items=[...], requests=[...])``. The model and the endpoint's provenance are
    added from the test.
    """
    from datetime import datetime, timezone

    from ..core.records import Measurement
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
        stats: dict[str, Any] | None = None,
        items: list[dict[str, Any]] | None = None,
        requests: list[dict[str, Any]] | None = None,
        model: str | None = model,
        endpoint: Endpoint | None = None,
    ) -> Measurement:
        if endpoint is None:
            candidate = node.funcargs.get("endpoint") if hasattr(node, "funcargs") else None
            endpoint = candidate if isinstance(candidate, Endpoint) else None
        measurement = Measurement(
            model=model or "",
            benchmark=benchmark,
            value=float(value),
            unit=unit,
            n=int(n),
            params=dict(params or {}),
            stats=dict(stats or {}),
            items=list(items or []),
            requests=list(requests or []),
            provenance=endpoint.provenance.as_dict() if endpoint is not None else {},
            test_id=node.nodeid,
            recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        node.stash.setdefault(measurements_key, []).append(measurement.to_dict())
        return measurement

    return record


@pytest.fixture(scope="session")
def gsm8k_problems(modelsweep_run: RunState) -> list[Any]:
    """GSM8K test problems: ``--gsm8k-path`` or the Hub; the first ``--limit`` of them."""
    from ..data.gsm8k import expect_full_test_set, load_gsm8k

    return _limited(
        "GSM8K", lambda: load_gsm8k(modelsweep_run.options.gsm8k_path, split="test"),
        expect_full_test_set, modelsweep_run.bench_settings.limit, modelsweep_run.write_line,
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
        "BFCL", lambda: load_bfcl(modelsweep_run.options.bfcl_path),
        expect_full_bfcl_set, modelsweep_run.bench_settings.limit, modelsweep_run.write_line,
    )


def _limited(
    name: str, load: Callable[[], Sequence[Any]], expect_full: Callable[[Sequence[Any]], None],
    limit: int | None, warn: Callable[[str], None],
) -> list[Any]:
    """A data set, checked to be complete for a full run, or its first ``limit`` records.

    An empty data set is an error; one with fewer records than ``--limit`` is measured
    whole, with a warning (the measurement records how many items it really had).
    """
    records = list(load())
    if not records:
        raise DataError(f"the {name} data has no records; pass a data file that has")
    if limit is None:
        expect_full(records)
        return records
    if len(records) < limit:
        warn(f"warning: --limit {limit}, but the {name} data has only {len(records)} "
             f"records: all {len(records)} are measured")
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
    """Run your accuracy benchmark on this test's model: ``evaluate(name, items, scorer)``.

    The test must be declared ``@pytest.mark.modelsweep_benchmark(name)``. Sends the
    first ``--limit`` items with ``concurrency`` in flight, stores each as it is scored
    (a re-run sends only what is not stored), records the measurement and returns
    an :class:`~pytest_modelsweep.EvaluationResult`; fails in one line when items got
    no answer. The candidates' paired verdicts come from the declaration.
    docs/writing-benchmarks.md has the whole API.
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
            first_duplicate,
            request_for,
            scored_record,
            summarise_items,
        )
        from ..core.errors import BenchmarkDeclarationError
        from ..workloads.accuracy import run_accuracy

        _check_declared(node.name, "evaluates", benchmark, declared, "", "verdicts")
        if node.stash.get(evaluated_key, False):
            raise BenchmarkDeclarationError(
                f"{node.name} called evaluate twice: one benchmark, one evaluate call per test")
        node.stash[evaluated_key] = True
        chosen = list(items)
        if not all(isinstance(item, EvalItem) for item in chosen):
            wrong = next(item for item in chosen if not isinstance(item, EvalItem))
            raise DataError(f"{benchmark}: items must be EvalItem, got {type(wrong).__name__}")
        if not chosen:
            raise DataError(f"{benchmark}: no items to evaluate")
        duplicate = first_duplicate(chosen)
        if duplicate is not None:
            raise DataError(f"{benchmark}: two items have the id {duplicate!r}; ids must be unique")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise DataError(f"{benchmark}: concurrency must be a positive integer, "
                            f"got {concurrency!r}")
        limit = bench_settings.limit
        chosen = chosen[:limit] if limit is not None else chosen
        endpoint: Endpoint = request.getfixturevalue("endpoint")
        accuracy_run = run_accuracy(
            endpoint, benchmark, chosen,
            lambda item: request_for(item, model_spec.prompting),
            lambda item, sent, completion: scored_record(benchmark, scorer, item, sent, completion),
            store=modelsweep_run.store, run_id=bench_settings.run_id,
            reuse=bench_settings.reuse, concurrency=concurrency,
            timeout_s=bench_settings.request_timeout_s,
            idle_timeout_s=bench_settings.idle_timeout_s, progress=modelsweep_run.write_line,
        )
        records = accuracy_run.records
        core = summarise_items(records)
        stats = {**(summarise(records) if summarise is not None else {}), **core,
                 "sent": accuracy_run.sent, "reused": accuracy_run.reused,
                 "wall_s": accuracy_run.wall_s}
        recorded_params = {**(params or {}), "prompting": model_spec.prompting,
                           "limit": limit and len(chosen),  # the real count, when limited
                           "subset": limit is not None}
        record_measurement(benchmark, core["accuracy"], "accuracy", core["n"],
                           params=recorded_params, stats=stats,
                           items=[r.to_dict() for r in records], endpoint=endpoint)
        if accuracy_run.store_error is not None:  # measured and recorded, but not stored
            from ..core.outputs import OutputError

            raise OutputError(f"{accuracy_run.store_error} (the measurement is in the results)")
        failed = [r for r in records if r.failed]
        if failed:
            # Failed items are not scored: the accuracy above is over the answered ones only,
            # and nothing (verdict, gate, baseline) is concluded from this measurement.
            raise MeasurementError(
                f"{len(failed)} of {len(records)} {benchmark} requests got no answer (first: "
                f"{failed[0].error}); re-run to resend them (completed items are reused)"
            )
        return EvaluationResult(
            benchmark=benchmark, model=model_name, accuracy=core["accuracy"], n=core["n"],
            correct=core["correct"], failed=core["failed"], sent=accuracy_run.sent,
            reused=accuracy_run.reused, records=records, stats=stats,
        )

    return run


def _check_declared(test: str, verb: str, benchmark: str, declared: str | None, kind: str,
                    comparisons: str) -> None:
    """A one-line error unless the test is declared as the benchmark it records."""
    from ..core.errors import BenchmarkDeclarationError

    if declared == benchmark:
        return
    marker = f"@pytest.mark.{BENCHMARK_MARKER}({benchmark!r}{kind})"
    raise BenchmarkDeclarationError(
        f"{test} {verb} {benchmark!r} but is declared "
        + (f"{BENCHMARK_MARKER}({declared!r})" if declared else "as no benchmark")
        + f": decorate it with {marker} (that adds -m {benchmark} and its {comparisons})")


@pytest.fixture
def measure_throughput(
    request: pytest.FixtureRequest,
    model_name: str,
    bench_settings: BenchSettings,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> MeasureThroughput:
    """Measure your own prompts' throughput on this test's model at one concurrency:
    ``measure_throughput(name, prompts, concurrency=c, output_tokens=256)``.

    The test must be declared ``@pytest.mark.modelsweep_benchmark(name, kind="throughput")``
    and parametrized by ``concurrency``. Each of ``--repeats`` windows sends the prompts in
    turn with exactly ``concurrency`` in flight, each generating exactly ``output_tokens``
    tokens, and is checked against the server's counters (every prompt's token count,
    and, with ``unique_prefixes``, no prefix-cache hit: each prompt gets a distinct lead
    word); the mean output tokens/s is recorded with the same statistics, flags, cost and
    goodput as the built-in throughput benches. The candidates' ratio tests come from the
    declaration. docs/writing-benchmarks.md has the whole API.
    """

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
    ) -> None:
        from ..api.prompts import checked_prompts
        from ..core.errors import BenchmarkDeclarationError
        from ..workloads.setting import measure_setting

        _check_declared(node.name, "measures", benchmark, declared, ', kind="throughput"',
                        "ratios")
        callspec = getattr(node, "callspec", None)
        declared_concurrency = callspec.params.get("concurrency") if callspec else None
        if declared_concurrency != concurrency:
            raise BenchmarkDeclarationError(
                f"{node.name} measures concurrency {concurrency!r} but is parametrized with "
                f"{declared_concurrency!r}: pass concurrency=concurrency (the ratio tests "
                "find the measurement by it)")
        for value, what in ((concurrency, "concurrency"), (output_tokens, "output_tokens")):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DataError(f"{benchmark}: {what} must be a positive integer, got {value!r}")
        texts = checked_prompts(benchmark, prompts)
        node.stash[evaluated_key] = True
        endpoint: Endpoint = request.getfixturevalue("endpoint")
        measure_setting(endpoint, bench_settings, record_measurement, benchmark, concurrency,
                        None, modelsweep_run.write_line, output_tokens=output_tokens,
                        user_prompts=texts, unique_prefixes=unique_prefixes,
                        params=dict(params or {}))

    measure: MeasureThroughput = run
    return measure


@pytest.fixture
def judge_against_reference(
    request: pytest.FixtureRequest,
    candidate_name: str,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Callable[[str], Any]:
    """Compare this candidate with the reference on an accuracy benchmark, item by item.

    Returns a callable ``judge(benchmark)`` that pairs the two models' stored
    items, bootstraps the difference, asks the ``pytest_modelsweep_verdict``
    hook for the verdict, records it, and fails the test when the verdict is
    one of ``--fail-on`` (default: worse).
    """
    from ..core.stats import VerdictRecord
    from ..judging.comparisons import ModelItems, failed_items_reason
    from ..judging.verdicts import holm_adjusted_interval, paired_interval
    from ..workloads.bfcl import bfcl_skip_reason

    run = modelsweep_run
    options = run.options
    reference = run.selection.reference
    config = request.config

    def items_of(model: str, benchmark: str, match: ModelItems | None = None) -> ModelItems:
        outcome = run.comparisons.items(
            model, benchmark,
            expected_tests=tests_in_session(request.session, model, benchmark),
            match_ids=[r.item_id for r in match.items] if match is not None else None,
        )
        side: ModelItems = _side(outcome, request.node)
        return side

    def judge(benchmark: str) -> VerdictRecord:
        if benchmark == "bfcl":
            for name in (candidate_name, reference):
                reason = bfcl_skip_reason(run.sweep.model(name))
                if reason is not None:
                    pytest.skip(reason)
        if tests_in_session(request.session, candidate_name, benchmark):
            cand_items = items_of(candidate_name, benchmark)
            ref_items = items_of(reference, benchmark, match=cand_items)
        else:
            ref_items = items_of(reference, benchmark)
            cand_items = items_of(candidate_name, benchmark, match=ref_items)
        refused = failed_items_reason(cand_items, ref_items, benchmark)
        if refused is not None:
            pytest.fail(refused, pytrace=False)
        try:
            interval = paired_interval(
                cand_items, ref_items, resamples=options.resamples, seed=0, confidence=0.95
            )
            if options.holm:
                others = {
                    name: (cand_items if name == candidate_name else items_of(name, benchmark))
                    for name in run.selection.candidates
                }
                for other in others.values():
                    refused = failed_items_reason(other, ref_items, benchmark)
                    if refused is not None:
                        pytest.fail(refused, pytrace=False)
                interval = holm_adjusted_interval(
                    candidate_name, others, ref_items,
                    resamples=options.resamples, seed=0, confidence=0.95,
                )
        except ModelsweepError as error:
            pytest.fail(str(error), pytrace=False)
        verdict = config.hook.pytest_modelsweep_verdict(
            candidate=candidate_name, reference=reference, metric=benchmark,
            interval=interval, margin=options.margin, config=config, kind="accuracy",
        )
        record = VerdictRecord(
            candidate=candidate_name, reference=reference, metric=benchmark,
            verdict=verdict, interval=interval, margin=options.margin,
            rule="holm+" + ("covers-zero" if options.margin is None else "equivalence-margin")
            if options.holm else ("covers-zero" if options.margin is None else "equivalence-margin"),
        )
        stats = record.as_dict()
        stats.update(candidate_run=cand_items.run_id, reference_run=ref_items.run_id)
        record_measurement(
            f"verdict:{benchmark}", interval.difference, "accuracy difference", interval.n,
            params={"reference": reference, "verdict": str(verdict.value), "holm": options.holm,
                    "margin": options.margin},
            stats=stats,
            model=candidate_name,
        )
        summary = (
            f"{candidate_name} vs {reference} on {benchmark}: {verdict.value} "
            f"(difference {interval.difference:+.3f}, {100 * interval.confidence:.4g}% interval "
            f"[{interval.low:+.3f}, "
            f"{interval.high:+.3f}], n={interval.n}, discordant={interval.discordant}, "
            f"detectable ±{interval.min_detectable_difference:.3f})"
        )
        if interval.too_few_items:
            summary += f"; no verdict from it: {interval.too_few_reason()}"
        announce_verdict(summary, verdict, options.fail_on)
        return record

    return judge


def _side(outcome: Any, node: pytest.Item) -> Any:
    """A comparison's side found; a skip when it is nowhere (the session then fails unless
    ``--allow-unjudged``) or its test was skipped, a failure when its test failed."""
    from ..judging.comparisons import Failed, Missing, Skipped

    if isinstance(outcome, Missing):
        node.stash[unjudged_key] = outcome.reason
        pytest.skip(outcome.reason)
    if isinstance(outcome, Skipped):
        pytest.skip(outcome.reason)
    if isinstance(outcome, Failed):
        pytest.fail(outcome.reason, pytrace=False)
    return outcome.side


@pytest.fixture
def judge_throughput_ratio(
    request: pytest.FixtureRequest,
    candidate_name: str,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Callable[..., Any]:
    """Compare this candidate's throughput with the reference's at one setting.

    Returns ``judge(benchmark, concurrency=..., prompt_tokens=...)``: it finds both
    models' measurements at that setting (this run's, waiting for another xdist
    worker where needed, else the store's latest), computes the ratio interval over
    the repeats, asks the ``pytest_modelsweep_verdict`` hook (``kind="throughput"``)
    for the verdict (``margin`` = ``--ratio-tolerance``), records it, and fails the test
    when the verdict is one of ``--fail-on`` (default: worse). With ``--interleave`` it
    measures both models itself instead, their windows alternating in pairs (A B, B A,
    ...), and the interval comes from the pairs (drift in machine speed cancels).
    """
    from ..core.stats import RatioVerdictRecord
    from ..judging.verdicts import throughput_ratio_interval

    run = modelsweep_run
    reference = run.selection.reference
    config = request.config

    def measurement_of(model: str, benchmark: str, setting: dict[str, Any]) -> Any:
        return _side(run.comparisons.measurement(
            model, benchmark, setting,
            expected_tests=tests_in_session(request.session, model, benchmark, params=setting),
        ), request.node)

    def interleaved(benchmark: str, setting: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Both servers, windows in pairs A B, B A, ...: drift in machine speed cancels."""
        from ..workloads.throughput import measure_interleaved

        settings = run.bench_settings
        measured = measure_interleaved(
            [run.pool.get(reference), run.pool.get(candidate_name)],
            repeats=settings.repeats, benchmark=benchmark,
            run_id=settings.run_id, timed_requests=settings.timed_requests,
            timeout_s=settings.request_timeout_s, idle_timeout_s=settings.idle_timeout_s,
            contended_cores=settings.contended_cores, progress=run.write_line, **setting,
        )
        if measured.violations:
            raise MeasurementError("interleaved windows broke their rules: "
                                   + "; ".join(measured.violations[:10]))
        ratio = settings.repeats.paired_ratio(measured.values[candidate_name],
                                              measured.values[reference])
        return ratio, {"design": "interleaved", "windows": measured.windows,
                       "candidate_values": measured.values[candidate_name],
                       "reference_values": measured.values[reference],
                       "contended": measured.contended}

    def judge(benchmark: str, *, concurrency: int, prompt_tokens: int | None) -> RatioVerdictRecord:
        setting = {"concurrency": concurrency, "prompt_tokens": prompt_tokens}
        if run.options.interleave:
            from ..core.metrics import METRICS

            if benchmark not in METRICS:
                pytest.fail(f"--interleave measures the built-in throughput shapes only, not "
                            f"your own {benchmark!r}: run its ratio without --interleave",
                            pytrace=False)
            ratio, design = interleaved(benchmark, setting)
            runs: dict[str, Any] = {"candidate_run": run.run_id, "reference_run": run.run_id}
        else:
            ref = measurement_of(reference, benchmark, setting)
            cand = measurement_of(candidate_name, benchmark, setting)
            try:
                ratio = throughput_ratio_interval(cand, ref)
            except ModelsweepError as error:
                pytest.fail(str(error), pytrace=False)
            design = {"design": "back-to-back"}
            runs = {"candidate_run": cand.run_id, "reference_run": ref.run_id,
                    "candidate_flags": side_flags(cand.stats),
                    "reference_flags": side_flags(ref.stats)}
        tolerance = run.options.ratio_tolerance
        verdict = config.hook.pytest_modelsweep_verdict(
            candidate=candidate_name, reference=reference, metric=benchmark, interval=ratio,
            margin=tolerance, config=config, kind="throughput",
        )
        record = RatioVerdictRecord(
            candidate=candidate_name, reference=reference, metric=benchmark, verdict=verdict,
            interval=ratio, tolerance=tolerance,
        )
        record_measurement(
            "throughput_ratio", ratio.ratio, "x reference", ratio.candidate_n,
            params={"benchmark": benchmark, **setting, "reference": reference,
                    "verdict": str(verdict.value), "design": design["design"]},
            stats={**record.as_dict(), **runs, **design},
            model=candidate_name,
        )
        shown = ("no interval: a side has one repeat" if ratio.degenerate
                 else f"95% interval {ratio.low:.2f}–{ratio.high:.2f}")
        summary = (f"{candidate_name} ÷ {reference}, {benchmark} c{concurrency}"
                   f"{f' p{prompt_tokens}' if prompt_tokens else ''}: {ratio.ratio:.2f}x, "
                   f"{verdict.value} ({shown}, tolerance ±{tolerance:.0%}, repeats "
                   f"{ratio.candidate_n}/{ratio.reference_n}"
                   f"{flags_text(runs)})")
        announce_verdict(summary, verdict, run.options.fail_on)
        return record

    return judge


ROLES = ("candidate", "reference")
"""The two sides of a comparison, in the order lines name them."""


def side_flags(stats: Mapping[str, Any]) -> list[str]:
    """What makes one side of a ratio doubtful: ``unstable (CV 53%)``, ``contended``."""
    flags = []
    if stats.get("unstable"):
        cv = stats.get("cv")
        flags.append(f"unstable (CV {cv:.0%})" if isinstance(cv, (int, float)) else "unstable")
    if stats.get("contended"):
        flags.append("contended")
    return flags


def flags_text(stats: Mapping[str, Any]) -> str:
    """From a comparison's ``candidate_flags`` / ``reference_flags``: ``; the reference's
    measurement is flagged unstable (CV 53%), contended``, or ``""``."""
    parts = [f"the {role}'s measurement is flagged {', '.join(flags)}"
             for role in ROLES if (flags := stats.get(f"{role}_flags"))]
    return "; " + "; ".join(parts) if parts else ""


def announce_verdict(summary: str, verdict: Any, fail_on: Collection[str]) -> None:
    """Fail the comparison's test with its one line when the verdict is in ``--fail-on``,
    else print the line."""
    if verdict.value in fail_on:
        pytest.fail(summary, pytrace=False)
    print(summary)


@pytest.fixture
def judge_capacity_ratio(
    request: pytest.FixtureRequest,
    candidate_name: str,
    modelsweep_run: RunState,
    record_measurement: RecordMeasurement,
) -> Callable[[], Any]:
    """Compare this candidate's capacity under ``--slo`` with the reference's.

    Returns ``judge()``: it finds both models' capacity measurements under this run's
    SLO and attainment target (this run's, waiting for another xdist worker where
    needed, else the store's latest), computes candidate ÷ reference capacity with the
    bracket the two searches allow (no confidence level: each side is one search), asks
    the ``pytest_modelsweep_verdict`` hook (``kind="capacity"``, ``margin`` =
    ``--ratio-tolerance``) for the verdict, records it as ``capacity_ratio``, and fails
    the test when the verdict is one of ``--fail-on`` (default: worse). A reference
    whose capacity is 0 cannot be divided by: the test fails and no ratio is recorded.
    """
    from ..workloads.capacity import (
        NEEDS_SLO,
        RULE_BRACKET,
        CapacityBracket,
        bracket_text,
        capacity_ratio,
    )

    run = modelsweep_run
    reference = run.selection.reference
    config = request.config

    def measurement_of(model: str, setting: dict[str, Any]) -> Any:
        return _side(run.comparisons.measurement(
            model, "capacity", setting,
            expected_tests=tests_in_session(request.session, model, "capacity", params=None),
        ), request.node)

    def bracket_of(side: Any, role: str) -> CapacityBracket:
        try:
            return CapacityBracket.from_stats(side.stats)
        except ValueError as error:
            pytest.fail(f"cannot compare capacities: the {role}'s ({side.model}) is {error}",
                        pytrace=False)

    def judge() -> dict[str, Any]:
        settings = run.bench_settings
        if settings.slo is None:
            pytest.skip(NEEDS_SLO)
        slo, target = settings.slo, settings.slo_attainment
        setting = {"slo": slo.as_dict(), "attainment_target": target}
        ref = measurement_of(reference, setting)
        cand = measurement_of(candidate_name, setting)
        ref_bracket = bracket_of(ref, "reference")
        cand_bracket = bracket_of(cand, "candidate")
        if ref_bracket.capacity == 0:
            pytest.fail(f"cannot compare: the reference meets the SLO at no concurrency "
                        f"({reference} under {slo}: {ref.stats.get('reason')})", pytrace=False)
        ratio = capacity_ratio(cand_bracket, ref_bracket)
        tolerance = run.options.ratio_tolerance
        verdict = config.hook.pytest_modelsweep_verdict(
            candidate=candidate_name, reference=reference, metric="capacity", interval=ratio,
            margin=tolerance, config=config, kind="capacity",
        )
        stats = {"candidate": candidate_name, "reference": reference, "metric": "capacity",
                 "verdict": str(verdict.value), **ratio.as_dict(), "tolerance": tolerance,
                 "rule": RULE_BRACKET, "attainment_target": target,
                 "candidate_max_concurrency": cand.measurement["params"].get("max_concurrency"),
                 "reference_max_concurrency": ref.measurement["params"].get("max_concurrency"),
                 "candidate_run": cand.run_id, "reference_run": ref.run_id,
                 "candidate_flags": side_flags(cand.stats),
                 "reference_flags": side_flags(ref.stats)}
        record_measurement(
            "capacity_ratio", ratio.ratio, "x reference", int(cand.measurement.get("n") or 0),
            params={"reference": reference, "verdict": str(verdict.value), "slo": slo.as_dict()},
            stats=stats,
            model=candidate_name,
        )
        shown = ("no bracket: both searches reached their server's maximum concurrency"
                 if ratio.degenerate else f"{bracket_text(ratio)}, not a confidence interval")
        summary = (f"{candidate_name} ÷ {reference}, capacity under {slo} "
                   f"({target:.0%} attainment): {cand_bracket.capacity} ÷ "
                   f"{ref_bracket.capacity} = {ratio.ratio:.2f}x, {verdict.value} ({shown}; "
                   f"capacity brackets {cand_bracket.text()} and {ref_bracket.text()}, tolerance "
                   f"±{tolerance:.0%}"
                   f"{flags_text(stats)})")
        announce_verdict(summary, verdict, run.options.fail_on)
        return stats

    return judge
